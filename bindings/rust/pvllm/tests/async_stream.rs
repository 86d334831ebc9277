//! Async streams over the per-request output handler, on a tiny random
//! model, driven by a minimal executor (the crate needs no runtime).
mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use common::TinyModel;
use pvllm::{FinishReason, Output, Request, SamplingParams};

/// Wakes the thread blocked in `block_on`.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion on this thread, parking between wakes.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = Box::pin(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        thread::park();
    }
}

fn greedy(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

/// Reads a stream to the end: its events, in order.
async fn drain(mut stream: pvllm::AsyncOutputStream<'_>) -> Vec<Output> {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("an event"));
    }
    assert!(stream.is_finished());
    events
}

fn tokens(events: &[Output]) -> Vec<i32> {
    events.iter().flat_map(|e| e.token_ids.clone()).collect()
}

#[test]
fn an_async_stream_yields_what_generate_makes() {
    let model = TinyModel::new();
    let engine = model.engine();
    let want = engine.generate("Once upon a time", &greedy(10)).unwrap();
    let request = Request::text("Once upon a time").with_sampling(greedy(10));
    let stream = engine.stream_async(&request).unwrap();
    let id = stream.request_id();
    let events = block_on(drain(stream));
    assert_eq!(tokens(&events), want[0].token_ids);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.request_id, id);
        assert_eq!(event.sequence, i as u64);
    }
    let last = events.last().unwrap();
    assert!(last.request_finished);
    assert_eq!(last.finish_reason, Some(FinishReason::Length));
    let metrics = last.metrics.expect("metrics on the last event");
    assert_eq!(metrics.num_generated_tokens, 10);
    // The handler owns the events: nobody else can take them.
    assert!(engine.poll_request(id).is_err());
}

/// One thread steps; async streams on other threads only wait and are
/// woken by their handlers (or by the end of a step).
#[test]
fn async_streams_on_many_threads_with_a_stepping_thread() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let prompts = ["Once upon a time", "The cat", "A dog ran", "Lily"];
    let want: Vec<Vec<i32>> = prompts
        .iter()
        .map(|p| {
            engine.generate(*p, &greedy(16)).unwrap()[0]
                .token_ids
                .clone()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let stepper = {
        let engine = Arc::clone(&engine);
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if engine.step().unwrap() == 0 {
                    thread::yield_now();
                }
            }
        })
    };
    let readers: Vec<_> = prompts
        .iter()
        .map(|p| {
            let engine = Arc::clone(&engine);
            let request = Request::text(*p).with_sampling(greedy(16));
            thread::spawn(move || tokens(&block_on(drain(engine.stream_async(&request).unwrap()))))
        })
        .collect();
    let got: Vec<Vec<i32>> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    stepper.join().unwrap();
    assert_eq!(got, want);
}

/// Two streams polled in turn by one task: whichever finds nothing steps
/// the engine, and both finish.
#[test]
fn streams_polled_together_share_the_steps() {
    let model = TinyModel::new();
    let engine = model.engine();
    let a = engine
        .stream_async(&Request::text("Once upon a time").with_sampling(greedy(6)))
        .unwrap();
    let b = engine
        .stream_async(&Request::text("The cat").with_sampling(greedy(12)))
        .unwrap();
    struct Both<'e> {
        streams: Vec<pvllm::AsyncOutputStream<'e>>,
        counts: Vec<usize>,
        open: Vec<bool>,
    }
    impl Future for Both<'_> {
        type Output = Vec<usize>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<usize>> {
            let this = &mut *self;
            for i in 0..this.streams.len() {
                while this.open[i] {
                    match this.streams[i].poll_next(cx) {
                        Poll::Ready(Some(event)) => {
                            this.counts[i] += event.unwrap().token_ids.len()
                        }
                        Poll::Ready(None) => this.open[i] = false,
                        Poll::Pending => break,
                    }
                }
            }
            if this.open.iter().any(|&o| o) {
                Poll::Pending
            } else {
                Poll::Ready(this.counts.clone())
            }
        }
    }
    let counts = block_on(Both {
        streams: vec![a, b],
        counts: vec![0, 0],
        open: vec![true, true],
    });
    assert_eq!(counts, vec![6, 12]);
}

#[test]
fn dropping_an_async_stream_aborts_its_request() {
    let model = TinyModel::new();
    let engine = model.engine();
    let mut stream = engine
        .stream_async(&Request::text("Once upon a time").with_sampling(greedy(200)))
        .unwrap();
    let first = block_on(stream.next()).unwrap().unwrap();
    assert!(!first.request_finished);
    drop(stream);
    // The abort ends it at the next step; its last event goes to the
    // handler the engine still holds.
    while engine.step().unwrap() > 0 {}
    let stats = engine.stats().unwrap();
    assert_eq!(stats.num_running, 0);
    assert_eq!(stats.num_requests_finished, 1);
    assert!(stats.num_generation_tokens < 200);

    // A refused request leaves no handler behind, and the engine goes on.
    let bad = Request::tokens(vec![1, 999_999]).with_sampling(greedy(4));
    assert!(engine.stream_async(&bad).is_err());
    let events = block_on(drain(
        engine
            .stream_async(&Request::text("Lily").with_sampling(greedy(4)))
            .unwrap(),
    ));
    assert_eq!(tokens(&events).len(), 4);
}

/// With the `futures` feature: a `futures::Stream`, read by the futures
/// crate's own executor.
#[cfg(feature = "futures")]
#[test]
fn an_async_stream_is_a_futures_stream() {
    use futures_core::stream::FusedStream;

    let model = TinyModel::new();
    let engine = model.engine();
    let want = engine.generate("The cat", &greedy(9)).unwrap();
    let stream = engine
        .stream_async(&Request::text("The cat").with_sampling(greedy(9)))
        .unwrap();
    let mut iter = futures_executor::block_on_stream(stream);
    let events: Vec<Output> = iter.by_ref().map(|e| e.unwrap()).collect();
    assert_eq!(tokens(&events), want[0].token_ids);
    assert!(events.last().unwrap().request_finished);
    assert!(iter.into_inner().is_terminated());
}
