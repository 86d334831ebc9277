//! Failures come back as `pvllm::Error` with the library's status and
//! message.
mod common;

use common::{TempDir, TinyModel};
use pvllm::{Engine, EngineConfig, Request, RequestId, SamplingParams, Status};

#[test]
fn missing_model_is_not_found_and_names_the_path() {
    let dir = TempDir::new("missing");
    let path = dir.path().join("no-such-model");
    let err = Engine::new(&EngineConfig::new(&path)).unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    let shown = path.display().to_string();
    assert!(
        err.message().contains(&shown),
        "{:?} does not name {}",
        err,
        shown
    );
    // Display: the message and the status name.
    let text = err.to_string();
    assert!(
        text.contains(&shown) && text.contains("PVLLM_STATUS_NOT_FOUND"),
        "{}",
        text
    );
    // It is a std error.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(boxed.to_string().contains("NOT_FOUND"));
    assert_eq!(
        pvllm::estimate_memory(&EngineConfig::new(&path))
            .unwrap_err()
            .status(),
        Status::NotFound
    );
}

#[test]
fn bad_engine_settings_are_invalid_arguments() {
    let model = TinyModel::new();
    let err = Engine::new(&model.config().block_size(7)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("block_size"), "{:?}", err);
    let err = Engine::new(&model.config().device("tpu")).unwrap_err();
    assert!(
        matches!(err.status(), Status::Unsupported | Status::InvalidArgument),
        "{:?}",
        err
    );
    for bad in [0.0f32, 1.5, f32::NAN] {
        let err = Engine::new(&model.config().gpu_memory_utilization(bad)).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{}: {:?}", bad, err);
        assert!(
            err.message().contains("gpu_memory_utilization"),
            "{:?}",
            err
        );
    }
    // Rejected before reaching the library: it would not fit in int32_t.
    let err = Engine::new(&model.config().max_num_seqs(u32::MAX)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("max_num_seqs"), "{:?}", err);
}

#[test]
fn bad_requests_are_invalid_arguments_and_change_nothing() {
    let model = TinyModel::new();
    let engine = Engine::new(&model.config().max_num_seqs(4)).unwrap();
    let cases: Vec<(Request, &str)> = vec![
        (Request::text(""), "empty"),
        (Request::tokens(vec![]), "empty token prompt"),
        (Request::tokens(vec![1, 100000]), "100000"),
        (
            Request::text("hi").with_sampling(SamplingParams {
                top_p: 0.0,
                ..Default::default()
            }),
            "top_p",
        ),
        (
            Request::text("hi").with_sampling(SamplingParams {
                max_tokens: 0,
                ..Default::default()
            }),
            "max_tokens",
        ),
        (
            Request::text("hi").with_sampling(SamplingParams {
                n: 5,
                ..Default::default()
            }),
            "n larger than max_num_seqs",
        ),
        (
            Request::text("hi").with_sampling(SamplingParams {
                logprobs: Some(21),
                ..Default::default()
            }),
            "logprobs",
        ),
    ];
    for (request, what) in cases {
        let err = engine.submit(&request).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{}: {:?}", what, err);
        assert!(!err.message().is_empty(), "{}", what);
    }
    let err = engine
        .submit(&Request::tokens(vec![1, 100000]))
        .unwrap_err();
    assert!(err.message().contains("100000"), "{:?}", err);
    // A NUL inside a string cannot cross the C boundary.
    assert_eq!(
        engine.submit(&Request::text("a\0b")).unwrap_err().status(),
        Status::InvalidArgument
    );
    // Nothing was queued.
    let stats = engine.stats().unwrap();
    assert_eq!((stats.num_waiting, stats.num_running), (0, 0));
    assert_eq!(engine.step().unwrap(), 0);
    assert!(engine.poll().unwrap().is_empty());
}

#[test]
fn unknown_ids_are_reported() {
    let model = TinyModel::new();
    let engine = model.engine();
    let err = engine.abort(RequestId::new(987654)).unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    assert!(err.message().contains("987654"), "{:?}", err);
    let err = engine.detokenize(&[1, 99999]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("99999"), "{:?}", err);
}

#[test]
fn statuses_have_their_c_names() {
    assert_eq!(
        Status::InvalidArgument.name(),
        "PVLLM_STATUS_INVALID_ARGUMENT"
    );
    assert_eq!(Status::OutOfMemory.to_raw(), 6);
    assert_eq!(Status::Unknown(4242).name(), "PVLLM_STATUS_UNKNOWN");
}
