//! Many concurrent requests on one engine: client threads submit prompts
//! while the main thread steps the engine and hands each client its
//! completion — continuous batching serves them all together.
//!
//! Usage: concurrent MODEL_PATH [NUM_CLIENTS] [REQUESTS_PER_CLIENT]
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use pvllm::{Engine, EngineConfig, FinishReason, RequestId, SamplingParams};

/// A finished request as the stepping thread hands it back.
struct Done {
    text: String,
    num_tokens: usize,
    reason: Option<FinishReason>,
}

/// What a client tells the stepping thread: a request it submitted and
/// where to send its completion.
type Registration = (RequestId, Sender<Done>);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let number = |i: usize, default: usize| args.get(i).map(|s| s.parse::<usize>()).unwrap_or(Ok(default));
    let (clients, per_client) = match (number(2, 4), number(3, 4)) {
        (Ok(c), Ok(p)) if args.len() >= 2 && args.len() <= 4 => (c, p),
        _ => {
            eprintln!("usage: {} MODEL_PATH [NUM_CLIENTS] [REQUESTS_PER_CLIENT]", args[0]);
            return ExitCode::from(2);
        }
    };
    match run(&args[1], clients, per_client) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e);
            ExitCode::FAILURE
        }
    }
}

fn run(model: &str, clients: usize, per_client: usize) -> Result<(), Box<dyn std::error::Error>> {
    let engine = Arc::new(Engine::new(&EngineConfig::new(model).kv_cache_bytes(64 << 20))?);
    let (register, registrations) = mpsc::channel::<Registration>();
    let start = Instant::now();

    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let engine = Arc::clone(&engine);
            let register = register.clone();
            thread::spawn(move || -> Result<(), pvllm::Error> {
                let prompts = ["Once upon a time", "The little dog", "One day, a girl", "The sun was"];
                for r in 0..per_client {
                    let prompt = prompts[(c + r) % prompts.len()];
                    let params = SamplingParams { temperature: 0.8, seed: Some((c * 1000 + r) as u64), max_tokens: 32, ..Default::default() };
                    let id = engine.submit(&pvllm::Request::text(prompt).with_sampling(params))?;
                    let (reply, completion) = mpsc::channel();
                    register.send((id, reply)).expect("the stepping thread is alive");
                    let done: Done = completion.recv().expect("a completion for every request");
                    println!(
                        "client {} request {} ({} tokens, {:?}): {}{}",
                        c, id, done.num_tokens, done.reason, prompt, done.text
                    );
                }
                Ok(())
            })
        })
        .collect();
    drop(register);

    let num_tokens = step_until_done(&engine, registrations)?;
    for handle in handles {
        handle.join().expect("client thread panicked")?;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{} requests, {} tokens in {:.2} s ({:.1} tokens/s)",
        clients * per_client,
        num_tokens,
        seconds,
        num_tokens as f64 / seconds
    );
    Ok(())
}

/// Steps the engine, gathering each request's events, until every client
/// has hung up and nothing is left to run. Returns the tokens generated.
fn step_until_done(engine: &Engine, registrations: Receiver<Registration>) -> pvllm::Result<usize> {
    let mut replies: HashMap<RequestId, Sender<Done>> = HashMap::new();
    let mut partial: HashMap<RequestId, Done> = HashMap::new();
    let mut finished: Vec<RequestId> = Vec::new();
    let mut clients_gone = false;
    let mut total = 0;
    loop {
        // Take new registrations; block when idle so the loop does not spin.
        let idle = replies.is_empty() && partial.is_empty();
        if idle && !clients_gone {
            match registrations.recv() {
                Ok((id, reply)) => {
                    replies.insert(id, reply);
                }
                Err(_) => clients_gone = true,
            }
        }
        while let Ok((id, reply)) = registrations.try_recv() {
            replies.insert(id, reply);
        }
        let unfinished = engine.step()?;
        for event in engine.poll()? {
            total += event.token_ids.len();
            let entry = partial
                .entry(event.request_id)
                .or_insert(Done { text: String::new(), num_tokens: 0, reason: None });
            entry.text.push_str(&event.text);
            entry.num_tokens += event.token_ids.len();
            if event.finish_reason.is_some() {
                entry.reason = event.finish_reason;
                finished.push(event.request_id);
            }
        }
        // Hand finished requests to their clients once they registered
        // (a request can finish before its client's registration arrives).
        finished.retain(|id| match replies.remove(id) {
            Some(reply) => {
                let _ = reply.send(partial.remove(id).expect("events of a finished request"));
                false
            }
            None => true,
        });
        if clients_gone && unfinished == 0 && finished.is_empty() {
            return Ok(total);
        }
    }
}
