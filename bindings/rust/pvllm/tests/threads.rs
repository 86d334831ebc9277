//! `Engine` is Send + Sync: one thread steps while others submit.
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use common::TinyModel;
use pvllm::{Engine, FinishReason, Request, RequestId, SamplingParams};

fn assert_send_sync<T: Send + Sync>() {}

fn greedy(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

#[test]
fn engine_is_send_and_sync() {
    assert_send_sync::<Engine>();
    // Created on one thread, used and dropped on another.
    let model = TinyModel::new();
    let engine = model.engine();
    let tokens = thread::spawn(move || {
        engine.generate("moved", &greedy(3)).unwrap()[0]
            .token_ids
            .len()
    })
    .join()
    .unwrap();
    assert_eq!(tokens, 3);
}

#[test]
fn submit_from_many_threads_while_one_steps() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 3;
    const MAX_TOKENS: usize = 6;
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let (sent, received) = mpsc::channel::<(RequestId, String)>();
    let submitting = Arc::new(AtomicBool::new(true));

    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let sent = sent.clone();
            thread::spawn(move || {
                for r in 0..PER_THREAD {
                    let prompt = format!("client {} request {}", t, r);
                    let request =
                        Request::text(prompt.as_str()).with_sampling(greedy(MAX_TOKENS as u32));
                    let id = engine.submit(&request).unwrap();
                    sent.send((id, prompt)).unwrap();
                    thread::yield_now();
                }
            })
        })
        .collect();
    drop(sent);
    let joiner = {
        let submitting = Arc::clone(&submitting);
        thread::spawn(move || {
            for client in clients {
                client.join().unwrap();
            }
            submitting.store(false, Ordering::SeqCst);
        })
    };

    // This thread steps and polls until the clients are done and the engine
    // has nothing left.
    let mut tokens: HashMap<RequestId, Vec<i32>> = HashMap::new();
    let mut finished: HashMap<RequestId, FinishReason> = HashMap::new();
    loop {
        let still_submitting = submitting.load(Ordering::SeqCst);
        let unfinished = engine.step().unwrap();
        for event in engine.poll().unwrap() {
            tokens
                .entry(event.request_id)
                .or_default()
                .extend(&event.token_ids);
            if let Some(reason) = event.finish_reason {
                assert!(
                    finished.insert(event.request_id, reason).is_none(),
                    "two final events"
                );
            }
        }
        if !still_submitting && unfinished == 0 {
            break;
        }
    }
    joiner.join().unwrap();
    let submitted: Vec<(RequestId, String)> = received.iter().collect();
    assert_eq!(submitted.len(), THREADS * PER_THREAD);
    assert_eq!(finished.len(), THREADS * PER_THREAD);

    // Every request ran to its length, and batching with the others did not
    // change its greedy tokens.
    let alone = model.engine();
    for (id, prompt) in &submitted {
        assert_eq!(finished[id], FinishReason::Length);
        let reference = alone
            .generate(prompt.as_str(), &greedy(MAX_TOKENS as u32))
            .unwrap();
        assert_eq!(
            tokens[id], reference[0].token_ids,
            "request {} ({:?})",
            id, prompt
        );
    }
}

#[test]
fn pollers_on_other_threads_each_get_distinct_events() {
    let model = TinyModel::new();
    let engine = Arc::new(model.engine());
    let ids: Vec<RequestId> = (0..4)
        .map(|i| {
            engine
                .submit(&Request::text(format!("prompt {}", i)).with_sampling(greedy(8)))
                .unwrap()
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let pollers: Vec<_> = (0..2)
        .map(|_| {
            let engine = Arc::clone(&engine);
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let mut events = Vec::new();
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    events.extend(engine.poll().unwrap());
                    if finished {
                        return events;
                    }
                    thread::yield_now();
                }
            })
        })
        .collect();
    while engine.step().unwrap() > 0 {}
    done.store(true, Ordering::SeqCst);
    let events: Vec<pvllm::Output> = pollers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    for id in &ids {
        let mine: Vec<_> = events.iter().filter(|e| e.request_id == *id).collect();
        assert_eq!(
            mine.iter().map(|e| e.token_ids.len()).sum::<usize>(),
            8,
            "request {}",
            id
        );
        assert_eq!(
            mine.iter().filter(|e| e.is_finished()).count(),
            1,
            "request {}",
            id
        );
    }
}
