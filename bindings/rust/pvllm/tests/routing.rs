//! Each consumer reads its own request's events from the library: streams
//! on several threads, a stream nobody reads, an engine-wide poller beside
//! a stream, aborts from elsewhere, and one thread per request blocked in
//! `wait`. Each of these failed with the crate's old stream, which polled
//! the engine-wide queue and counted sample finishes itself.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::TinyModel;
use pvllm::{Delivery, Engine, FinishReason, Output, Request, RequestId, SamplingParams, Status};

fn greedy(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

/// Checks one request's events: all its own, `tokens` in total, every
/// sample finished once, the request finished once and last.
fn check_complete(id: RequestId, events: &[Output], samples: u32, tokens: usize) {
    assert!(
        events.iter().all(|e| e.request_id == id),
        "foreign events for request {}",
        id
    );
    assert_eq!(
        events.iter().map(|e| e.token_ids.len()).sum::<usize>(),
        tokens,
        "request {}",
        id
    );
    for k in 0..samples {
        let finals = events
            .iter()
            .filter(|e| e.sample_index == k && e.is_finished())
            .count();
        assert_eq!(finals, 1, "request {} sample {}", id, k);
    }
    assert_eq!(
        events.iter().filter(|e| e.request_finished).count(),
        1,
        "request {} completes once",
        id
    );
    assert!(events.last().unwrap().request_finished, "request {}", id);
}

/// Steps `engine` on its own thread until `stop` is set and nothing is left.
fn stepper(engine: Arc<Engine>, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || loop {
        let stopping = stop.load(Ordering::SeqCst);
        let unfinished = engine.step().unwrap();
        if stopping && unfinished == 0 {
            return;
        }
        if unfinished == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    })
}

#[test]
fn streams_on_several_threads_each_get_exactly_their_own_events() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let start = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..3u32)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                let request = Request::text(format!("stream {}", t)).with_sampling(greedy(30 + t));
                let mut stream = engine.stream(&[request]).unwrap();
                let id = stream.request_ids()[0];
                start.wait();
                let events: Vec<Output> = (&mut stream).map(|e| e.unwrap()).collect();
                assert!(stream.is_finished());
                (id, t, events)
            })
        })
        .collect();
    for handle in threads {
        let (id, t, events) = handle.join().unwrap();
        check_complete(id, &events, 1, 30 + t as usize);
    }
}

#[test]
fn a_stream_nobody_reads_stalls_nobody_and_loses_nothing() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let mut idle = engine
        .stream(&[Request::text("idle").with_sampling(greedy(25))])
        .unwrap();
    let idle_id = idle.request_ids()[0];
    // Other consumers run to the end while the idle stream is not read,
    // here and on another thread.
    let other = {
        let engine = Arc::clone(&engine);
        thread::spawn(move || engine.generate("busy", &greedy(20)).unwrap())
    };
    for _ in 0..2 {
        let done = engine.generate("here", &greedy(15)).unwrap();
        assert_eq!(done[0].token_ids.len(), 15);
    }
    assert_eq!(other.join().unwrap()[0].token_ids.len(), 20);
    let events: Vec<Output> = (&mut idle).map(|e| e.unwrap()).collect();
    check_complete(idle_id, &events, 1, 25);
}

#[test]
fn an_engine_wide_poller_cannot_take_a_streams_events() {
    let model = TinyModel::new();
    let engine = model.engine();
    let shared = engine
        .submit(&Request::text("shared").with_sampling(greedy(8)))
        .unwrap();
    let request = Request::text("mine").with_sampling(SamplingParams { n: 3, ..greedy(12) });
    let mut stream = engine.stream(&[request]).unwrap();
    let id = stream.request_ids()[0];
    let mut events = vec![stream.next().unwrap().unwrap()];
    // While the stream is not read, someone else steps and polls the
    // engine-wide queue: it gets the shared request's events only.
    let mut taken = Vec::new();
    for _ in 0..6 {
        engine.step().unwrap();
        taken.extend(engine.poll().unwrap());
    }
    events.extend((&mut stream).map(|e| e.unwrap()));
    check_complete(id, &events, 3, 36);
    assert!(!taken.is_empty());
    assert!(taken.iter().all(|e| e.request_id == shared));
}

#[test]
fn a_streamed_request_aborted_from_another_thread_finishes_once() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let (started, first_event) = mpsc::channel();
    let reader = {
        let engine = Arc::clone(&engine);
        thread::spawn(move || {
            let request = Request::text("long").with_sampling(SamplingParams {
                n: 2,
                ..greedy(400)
            });
            let mut stream = engine.stream(&[request]).unwrap();
            let id = stream.request_ids()[0];
            let mut events = vec![stream.next().unwrap().unwrap()];
            started.send(id).unwrap();
            events.extend((&mut stream).map(|e| e.unwrap()));
            (id, events)
        })
    };
    let id = first_event.recv().unwrap();
    engine.abort(id).unwrap();
    let (read_id, events) = reader.join().unwrap();
    assert_eq!(read_id, id);
    let tokens: usize = events.iter().map(|e| e.token_ids.len()).sum();
    assert!(tokens < 800, "{} tokens after the abort", tokens);
    assert_eq!(events.iter().filter(|e| e.request_finished).count(), 1);
    let last = events.last().unwrap();
    assert!(last.request_finished);
    assert_eq!(last.finish_reason, Some(FinishReason::Abort));
}

#[test]
fn one_thread_per_request_waits_for_its_own_events() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let stop = Arc::new(AtomicBool::new(false));
    let stepping = stepper(Arc::clone(&engine), Arc::clone(&stop));
    let workers: Vec<_> = (0..4u32)
        .map(|w| {
            let engine = Arc::clone(&engine);
            thread::spawn(move || {
                let request = Request::text(format!("worker {}", w)).with_sampling(greedy(10 + w));
                let id = engine.submit_with(&request, Delivery::PerRequest).unwrap();
                let mut events: Vec<Output> = Vec::new();
                while !events.last().map_or(false, |e| e.request_finished) {
                    if engine.wait(id, Some(Duration::from_secs(1))).unwrap() {
                        events.extend(engine.poll_request(id).unwrap());
                    }
                }
                // Over and taken: the id is gone.
                assert_eq!(
                    engine.wait(id, Some(Duration::ZERO)).unwrap_err().status(),
                    Status::NotFound
                );
                (id, w, events)
            })
        })
        .collect();
    for handle in workers {
        let (id, w, events) = handle.join().unwrap();
        check_complete(id, &events, 1, 10 + w as usize);
    }
    stop.store(true, Ordering::SeqCst);
    stepping.join().unwrap();
}

#[test]
fn wait_times_out_while_nothing_steps_and_detach_drops_events() {
    let model = TinyModel::new();
    let engine = model.engine();
    let id = engine
        .submit_with(
            &Request::text("x").with_sampling(greedy(50)),
            Delivery::PerRequest,
        )
        .unwrap();
    assert!(!engine.wait(id, Some(Duration::from_millis(20))).unwrap());
    engine.step().unwrap();
    assert!(engine.wait(id, Some(Duration::ZERO)).unwrap());
    assert!(
        engine.poll().unwrap().is_empty(),
        "PerRequest events skip poll"
    );
    engine.detach(id).unwrap();
    assert_eq!(
        engine.poll_request(id).unwrap_err().status(),
        Status::NotFound
    );
    engine.abort(id).unwrap();
    while engine.step().unwrap() > 0 {}
    assert!(engine.poll().unwrap().is_empty());
    assert_eq!(engine.detach(id).unwrap_err().status(), Status::NotFound);
}
