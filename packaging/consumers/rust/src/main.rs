//! Prints the greedy continuation of a prompt.
//! Usage: pvllm-consumer MODEL_PATH PROMPT
use pvllm::{Engine, EngineConfig, SamplingParams};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pvllm-consumer MODEL_PATH PROMPT");
        std::process::exit(2);
    }
    let config = EngineConfig::new(&args[1]).kv_cache_bytes(16 << 20);
    let engine = Engine::new(&config).unwrap_or_else(|e| {
        eprintln!("pvllm: {}", e);
        std::process::exit(1);
    });
    let completions = engine
        .generate(args[2].as_str(), &SamplingParams::greedy(24))
        .unwrap_or_else(|e| {
            eprintln!("pvllm: {}", e);
            std::process::exit(1);
        });
    println!("{}{}", args[2], completions[0].text);
    eprintln!("pvllm {}", pvllm::version());
}
