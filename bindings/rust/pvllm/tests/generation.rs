//! Real generation through libpvllm on a tiny random model.
mod common;

use common::TinyModel;
use pvllm::{
    estimate_memory, Completion, Dtype, Engine, FinishReason, Output, Prompt, Request,
    SamplingParams,
};

const PROMPT: &str = "Once upon a time";

/// Greedy, never stopping at EOS: exactly `max_tokens` tokens.
fn greedy(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

fn only(mut completions: Vec<Completion>) -> Completion {
    assert_eq!(completions.len(), 1, "{:?}", completions);
    completions.remove(0)
}

#[test]
fn greedy_generation_is_deterministic() {
    let model = TinyModel::new();
    let engine = model.engine();
    let first = only(engine.generate(PROMPT, &greedy(12)).unwrap());
    let second = only(engine.generate(PROMPT, &greedy(12)).unwrap());
    assert_eq!(first.token_ids.len(), 12);
    assert_eq!(first.token_ids, second.token_ids);
    assert_eq!(first.text, second.text);
    assert!(!first.text.is_empty());

    // A second engine over the same weights agrees too.
    let other = model.engine();
    assert_eq!(
        only(other.generate(PROMPT, &greedy(12)).unwrap()).token_ids,
        first.token_ids
    );
}

/// GPU settings pass through the C ABI and do not change what the CPU
/// computes.
#[test]
fn gpu_settings_are_accepted_and_leave_the_cpu_unchanged() {
    let model = TinyModel::new();
    let plain = only(model.engine().generate(PROMPT, &greedy(8)).unwrap());
    for dtype in [Dtype::Bf16, Dtype::Fp16, Dtype::Fp32] {
        let config = model
            .config()
            .device("cpu")
            .gpu_memory_utilization(0.5)
            .dtype(dtype)
            .enable_cuda_graphs(false);
        assert_ne!(config, model.config());
        let engine = Engine::new(&config).unwrap();
        assert_eq!(
            only(engine.generate(PROMPT, &greedy(8)).unwrap()).token_ids,
            plain.token_ids,
            "{:?}",
            dtype
        );
    }
}

#[test]
fn max_tokens_ends_with_length() {
    let model = TinyModel::new();
    let engine = model.engine();
    let completion = only(engine.generate(PROMPT, &greedy(5)).unwrap());
    assert_eq!(completion.token_ids.len(), 5);
    assert_eq!(completion.finish_reason, FinishReason::Length);
    assert_eq!(completion.error_message, None);
}

#[test]
fn token_prompt_matches_text_prompt() {
    let model = TinyModel::new();
    let engine = model.engine();
    let ids = engine.tokenize(PROMPT, true).unwrap();
    let from_text = only(engine.generate(PROMPT, &greedy(8)).unwrap());
    let from_ids = only(engine.generate(Prompt::Tokens(ids), &greedy(8)).unwrap());
    assert_eq!(from_text.token_ids, from_ids.token_ids);
}

#[test]
fn add_special_tokens_off_submits_the_text_without_bos() {
    let model = TinyModel::new();
    let engine = model.engine();
    let plain = engine.tokenize(PROMPT, false).unwrap();
    let params = SamplingParams {
        prompt_logprobs: Some(0),
        ..greedy(2)
    };
    // The first prompt token has no logprob; the metrics count it.
    let prompt_of = |request: Request| {
        let mut events = engine
            .stream(&[request.with_sampling(params.clone())])
            .unwrap();
        let first = events.next().unwrap().unwrap();
        let mut rest = first.prompt_logprobs.clone().expect("prompt logprobs");
        let mut last = first;
        for event in events {
            last = event.unwrap();
        }
        let count = last.metrics.expect("metrics").num_prompt_tokens as usize;
        (
            count,
            rest.drain(..).map(|e| e.token_id).collect::<Vec<_>>(),
        )
    };

    let default = Request::text(PROMPT);
    assert!(default.add_special_tokens);
    let (count, rest) = prompt_of(default);
    assert_eq!(count, plain.len() + 1, "BOS first by default");
    assert_eq!(rest, plain, "the text after BOS");

    let (count, rest) = prompt_of(Request::text(PROMPT).with_add_special_tokens(false));
    assert_eq!(count, plain.len(), "no BOS");
    assert_eq!(rest, plain[1..]);

    // Token prompts are used as given either way.
    let (count, _) = prompt_of(Request::tokens(plain.clone()).with_add_special_tokens(true));
    assert_eq!(count, plain.len());
    // The same tokens as the ids without BOS, so the same greedy tokens.
    let off = Request::text(PROMPT)
        .with_add_special_tokens(false)
        .with_sampling(greedy(6));
    let ids = Request::tokens(plain).with_sampling(greedy(6));
    let tokens_of = |request: Request| -> Vec<i32> {
        engine
            .stream(&[request])
            .unwrap()
            .flat_map(|e| e.unwrap().token_ids)
            .collect()
    };
    assert_eq!(tokens_of(off), tokens_of(ids));
}

#[test]
fn stop_token_ends_with_stop() {
    let model = TinyModel::new();
    let engine = model.engine();
    let reference = only(engine.generate(PROMPT, &greedy(12)).unwrap());
    // Stop at the 4th greedy token: the first position that token appears.
    let stop_id = reference.token_ids[3];
    let cut = reference
        .token_ids
        .iter()
        .position(|&t| t == stop_id)
        .unwrap();
    let params = SamplingParams {
        stop_token_ids: vec![stop_id],
        ..greedy(12)
    };
    let stopped = only(engine.generate(PROMPT, &params).unwrap());
    assert_eq!(stopped.finish_reason, FinishReason::Stop);
    assert_eq!(&stopped.token_ids[..cut], &reference.token_ids[..cut]);
    assert!(
        stopped.token_ids.len() <= cut + 1,
        "{:?} went past the stop token {}",
        stopped.token_ids,
        stop_id
    );
}

#[test]
fn stop_string_ends_with_stop_and_is_cut_from_the_text() {
    let model = TinyModel::new();
    let engine = model.engine();
    let reference = only(engine.generate(PROMPT, &greedy(24)).unwrap());
    // Two ASCII characters from the middle of the text that do not occur
    // before their position: the output must be the text before them.
    let text = reference.text.as_str();
    let bytes = text.as_bytes();
    let start = (text.len() / 3..text.len().saturating_sub(2))
        .find(|&i| {
            bytes[i].is_ascii_graphic()
                && bytes[i + 1].is_ascii_graphic()
                && !text[..i + 1].contains(&text[i..i + 2])
        })
        .unwrap_or_else(|| panic!("no usable stop string in {:?}", text));
    let stop = text[start..start + 2].to_string();
    let params = SamplingParams {
        stop: vec![stop.clone()],
        ..greedy(24)
    };
    let stopped = only(engine.generate(PROMPT, &params).unwrap());
    assert_eq!(
        stopped.finish_reason,
        FinishReason::Stop,
        "stop {:?} in {:?}",
        stop,
        text
    );
    assert_eq!(stopped.text, &text[..start], "stop {:?}", stop);
}

#[test]
fn parallel_samples_are_seeded_and_indexed() {
    let model = TinyModel::new();
    let engine = model.engine();
    let params = SamplingParams {
        temperature: 1.0,
        n: 3,
        seed: Some(7),
        max_tokens: 6,
        ignore_eos: true,
        ..Default::default()
    };
    let samples = engine.generate(PROMPT, &params).unwrap();
    assert_eq!(samples.len(), 3);
    for (i, sample) in samples.iter().enumerate() {
        assert_eq!(sample.sample_index as usize, i);
        assert_eq!(sample.token_ids.len(), 6);
        assert_eq!(sample.finish_reason, FinishReason::Length);
    }
    assert!(
        samples[0].token_ids != samples[1].token_ids
            || samples[1].token_ids != samples[2].token_ids,
        "three samples at temperature 1 came out identical: {:?}",
        samples
    );
    // The same seed gives the same samples.
    let again = engine.generate(PROMPT, &params).unwrap();
    assert_eq!(tokens(&again), tokens(&samples));
}

/// The tokens of each sample (timing in the metrics differs run to run).
fn tokens(samples: &[Completion]) -> Vec<Vec<i32>> {
    samples.iter().map(|s| s.token_ids.clone()).collect()
}

#[test]
fn logprobs_come_with_each_token() {
    let model = TinyModel::new();
    let engine = model.engine();
    let params = SamplingParams {
        logprobs: Some(3),
        ..greedy(5)
    };
    let completion = only(engine.generate(PROMPT, &params).unwrap());
    let logprobs = completion.logprobs.expect("logprobs were asked for");
    assert_eq!(logprobs.len(), 5);
    for (entry, &token) in logprobs.iter().zip(&completion.token_ids) {
        assert_eq!(entry.token_id, token);
        assert!(
            entry.logprob <= 0.0 && entry.logprob.is_finite(),
            "{:?}",
            entry
        );
        assert_eq!(entry.top.len(), 3);
        // Greedy: the chosen token is the most likely one.
        assert_eq!(entry.top[0].token_id, token);
        assert!(
            entry.top.windows(2).all(|w| w[0].logprob >= w[1].logprob),
            "{:?}",
            entry.top
        );
    }
    let without = only(engine.generate(PROMPT, &greedy(5)).unwrap());
    assert!(without.logprobs.is_none());
}

#[test]
fn stream_yields_incremental_events_until_finished() {
    let model = TinyModel::new();
    let engine = model.engine();
    let reference = only(engine.generate(PROMPT, &greedy(10)).unwrap());

    let request = Request::text(PROMPT).with_sampling(greedy(10));
    let events: Vec<Output> = engine
        .stream(&[request])
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert!(
        events.len() > 1,
        "one event per step expected, got {:?}",
        events
    );
    let (last, rest) = events.split_last().unwrap();
    assert_eq!(last.finish_reason, Some(FinishReason::Length));
    assert!(rest.iter().all(|e| !e.is_finished()));
    let tokens: Vec<i32> = events.iter().flat_map(|e| e.token_ids.clone()).collect();
    let text: String = events.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(tokens, reference.token_ids);
    assert_eq!(text, reference.text);
}

#[test]
fn stream_follows_several_requests() {
    let model = TinyModel::new();
    let engine = model.engine();
    let requests = vec![
        Request::text(PROMPT).with_sampling(greedy(3)),
        Request::text("The cat").with_sampling(greedy(7)),
        Request::text("A dog")
            .with_sampling(SamplingParams { n: 2, ..greedy(5) })
            .with_priority(1),
    ];
    let mut stream = engine.stream(&requests).unwrap();
    let ids = stream.request_ids().to_vec();
    assert_eq!(ids.len(), 3);
    let mut counts = std::collections::HashMap::new();
    let mut finals = 0;
    for event in &mut stream {
        let event = event.unwrap();
        *counts
            .entry((event.request_id, event.sample_index))
            .or_insert(0) += event.token_ids.len();
        finals += event.is_finished() as usize;
    }
    assert!(stream.is_finished());
    assert_eq!(finals, 4);
    assert_eq!(counts[&(ids[0], 0)], 3);
    assert_eq!(counts[&(ids[1], 0)], 7);
    assert_eq!(counts[&(ids[2], 0)], 5);
    assert_eq!(counts[&(ids[2], 1)], 5);
}

#[test]
fn abort_ends_the_request_with_abort() {
    let model = TinyModel::new();
    let engine = model.engine();
    let id = engine
        .submit(&Request::text(PROMPT).with_sampling(greedy(400)))
        .unwrap();
    let mut events = Vec::new();
    for _ in 0..3 {
        engine.step().unwrap();
        events.extend(engine.poll().unwrap());
    }
    engine.abort(id).unwrap();
    while !events.iter().any(|e: &Output| e.is_finished()) {
        engine.step().unwrap();
        events.extend(engine.poll().unwrap());
    }
    let last = events.last().unwrap();
    assert_eq!(last.request_id, id);
    assert_eq!(last.finish_reason, Some(FinishReason::Abort));
    let generated: usize = events.iter().map(|e| e.token_ids.len()).sum();
    assert!(
        generated < 400,
        "generated {} tokens after the abort",
        generated
    );
    // Finished now: a second abort does not know it.
    assert_eq!(
        engine.abort(id).unwrap_err().status(),
        pvllm::Status::NotFound
    );
    assert_eq!(engine.step().unwrap(), 0);
}

#[test]
fn dropping_a_stream_aborts_its_requests() {
    let model = TinyModel::new();
    let engine = model.engine();
    let id;
    {
        let mut stream = engine
            .stream(&[Request::text(PROMPT).with_sampling(greedy(400))])
            .unwrap();
        id = stream.request_ids()[0];
        let first = stream.next().unwrap().unwrap();
        assert_eq!(first.request_id, id);
    }
    // The next step applies the abort: the 400-token request ends at once.
    assert_eq!(engine.step().unwrap(), 0);
    assert!(engine.stats().unwrap().num_generation_tokens < 400);
    // Its remaining events, the abort event included, went with the stream
    // (it detached them): nobody else receives them.
    assert!(engine.poll().unwrap().is_empty());
    assert_eq!(
        engine.poll_request(id).unwrap_err().status(),
        pvllm::Status::NotFound
    );
    assert_eq!(
        engine.abort(id).unwrap_err().status(),
        pvllm::Status::NotFound
    );
}

#[test]
fn tokenize_and_detokenize_round_trip() {
    let model = TinyModel::new();
    let engine = model.engine();
    let text = "Hello world, once upon a time.";
    let ids = engine.tokenize(text, false).unwrap();
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|&id| (0..384).contains(&id)), "{:?}", ids);
    assert_eq!(engine.detokenize(&ids).unwrap(), text);

    let with_bos = engine.tokenize(text, true).unwrap();
    assert_eq!(with_bos[0], 1, "BOS of the tiny model");
    assert_eq!(&with_bos[1..], &ids[..]);

    // Longer than any first guess of the buffer sizes.
    let long = "tokens ".repeat(300);
    let long_ids = engine.tokenize(&long, false).unwrap();
    assert_eq!(engine.detokenize(&long_ids).unwrap(), long);
    assert_eq!(engine.detokenize(&[]).unwrap(), "");
}

#[test]
fn stats_count_the_work_done() {
    let model = TinyModel::new();
    let engine = pvllm::Engine::new(&model.config().num_kv_blocks(64).block_size(16)).unwrap();
    let before = engine.stats().unwrap();
    assert_eq!(before.num_blocks_total, 64);
    assert_eq!(before.num_requests_finished, 0);
    assert_eq!(before.num_generation_tokens, 0);

    let prompt_len = engine.tokenize(PROMPT, true).unwrap().len() as i64;
    engine.generate(PROMPT, &greedy(6)).unwrap();
    let after = engine.stats().unwrap();
    assert_eq!(after.num_requests_finished, 1);
    assert_eq!(after.num_generation_tokens, 6);
    assert_eq!(after.num_prompt_tokens_processed, prompt_len);
    assert!(after.num_steps >= 6, "{:?}", after);
    // The prefill attends to the prompt, each of the 5 decodes to one more.
    assert_eq!(after.num_kv_tokens_attended, 6 * prompt_len + 15);
    assert_eq!((after.num_running, after.num_waiting), (0, 0));

    // While a request runs it holds blocks.
    let id = engine
        .submit(&Request::text(PROMPT).with_sampling(greedy(50)))
        .unwrap();
    assert_eq!(engine.stats().unwrap().num_waiting, 1);
    engine.step().unwrap();
    let running = engine.stats().unwrap();
    assert_eq!(running.num_running, 1);
    assert!(
        running.num_blocks_used >= 1 && running.kv_utilization > 0.0,
        "{:?}",
        running
    );
    engine.abort(id).unwrap();
}

#[test]
fn memory_estimate_matches_the_config() {
    let model = TinyModel::new();
    let estimate = estimate_memory(&model.config().num_kv_blocks(40).block_size(32)).unwrap();
    assert_eq!(estimate.num_blocks, 40);
    assert_eq!(estimate.max_tokens_in_cache, 40 * 32);
    assert_eq!(estimate.kv_bytes_total, 40 * estimate.kv_bytes_per_block);
    assert!(estimate.weight_bytes > 0);
    // 2 layers x K and V x 2 KV heads x head_dim 16 x 32 tokens x 4 bytes.
    assert_eq!(estimate.kv_bytes_per_block, 2 * 2 * 2 * 16 * 32 * 4);
}

#[test]
fn progress_is_reported_while_loading() {
    let model = TinyModel::new();
    let mut reports = Vec::new();
    let engine = pvllm::Engine::with_progress(&model.config(), |fraction, stage| {
        reports.push((fraction, stage.to_string()));
    })
    .unwrap();
    drop(engine);
    assert!(!reports.is_empty());
    assert!(
        reports.iter().all(|(f, _)| (0.0..=1.0).contains(f)),
        "{:?}",
        reports
    );
}

#[test]
fn version_matches_the_header() {
    let number = pvllm::version_number();
    let expected = format!("{}.{}.{}", number / 10000, number / 100 % 100, number % 100);
    assert_eq!(pvllm::version(), expected);
    assert_eq!(pvllm::abi_version(), pvllm::ABI_VERSION);
}

#[test]
fn contiguous_kv_allocator_gives_the_same_tokens() {
    let model = TinyModel::new();
    let paged = model.engine();
    let contiguous = pvllm::Engine::new(
        &model
            .config()
            .kv_allocator(pvllm::KvAllocator::Contiguous)
            .max_model_len(64),
    )
    .unwrap();
    let params = SamplingParams { n: 2, ..greedy(8) };
    let expected = paged.generate(PROMPT, &params).unwrap();
    let got = contiguous.generate(PROMPT, &params).unwrap();
    assert_eq!(tokens(&got), tokens(&expected));
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].text, expected[1].text);
}

#[test]
fn random_weights_model_generates_from_token_ids() {
    let config = pvllm::EngineConfig::random_weights("tiny").num_threads(1);
    let engine = pvllm::Engine::new(&config).unwrap();
    let completion = only(
        engine
            .generate(Prompt::Tokens(vec![1, 7, 42]), &greedy(5))
            .unwrap(),
    );
    assert_eq!(completion.token_ids.len(), 5);
    // No tokenizer: a text prompt is a tokenizer error, not a crash.
    let err = engine.generate(PROMPT, &greedy(5)).unwrap_err();
    assert_eq!(err.status(), pvllm::Status::TokenizerError, "{}", err);
    let err =
        pvllm::Engine::new(&pvllm::EngineConfig::random_weights("no-such-shape")).unwrap_err();
    assert_eq!(err.status(), pvllm::Status::InvalidArgument, "{}", err);
}
