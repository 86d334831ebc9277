//! Streams the continuation of one prompt, printing text as it is generated.
//!
//! Usage: stream MODEL_PATH [PROMPT] [MAX_TOKENS]
use std::io::Write;
use std::process::ExitCode;

use pvllm::{Engine, EngineConfig, FinishReason, Request, SamplingParams};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 || args.len() > 4 {
        eprintln!("usage: {} MODEL_PATH [PROMPT] [MAX_TOKENS]", args[0]);
        return ExitCode::from(2);
    }
    let prompt = args.get(2).map(String::as_str).unwrap_or("Once upon a time");
    let max_tokens = match args.get(3).map(|n| n.parse::<u32>()) {
        None => 64,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("MAX_TOKENS: {}", e);
            return ExitCode::from(2);
        }
    };
    match run(&args[1], prompt, max_tokens) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e);
            ExitCode::FAILURE
        }
    }
}

fn run(model: &str, prompt: &str, max_tokens: u32) -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(&EngineConfig::new(model).kv_cache_bytes(64 << 20))?;
    let request = Request::text(prompt).with_sampling(SamplingParams::greedy(max_tokens));

    let mut stdout = std::io::stdout();
    write!(stdout, "{}", prompt)?;
    let mut num_tokens = 0;
    for event in engine.stream(&[request])? {
        let event = event?;
        num_tokens += event.token_ids.len();
        write!(stdout, "{}", event.text)?;
        stdout.flush()?;
        match event.finish_reason {
            None => {}
            Some(FinishReason::Error) => {
                return Err(event.error_message.unwrap_or_default().into());
            }
            Some(reason) => writeln!(stdout, "\n[{} tokens, finished: {:?}]", num_tokens, reason)?,
        }
    }
    Ok(())
}
