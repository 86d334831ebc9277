//! The 0.5 additions: request metrics, prompt logprobs, beam search and
//! preemption by swap, on a tiny random model.
mod common;

use common::TinyModel;
use pvllm::{
    estimate_memory, EarlyStopping, Engine, PreemptionMode, Request, SamplingParams, Status,
};

fn exactly(max_tokens: u32) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

const PROMPT: [i32; 7] = [1, 40, 41, 42, 43, 44, 45];

#[test]
fn metrics_and_prompt_logprobs() {
    let model = TinyModel::new();
    let engine = model.engine();
    let params = SamplingParams {
        prompt_logprobs: Some(2),
        ..exactly(6)
    };
    let completion = engine.generate(PROMPT.to_vec(), &params).unwrap().remove(0);
    let prompt_logprobs = completion.prompt_logprobs.expect("prompt logprobs");
    assert_eq!(prompt_logprobs.len(), PROMPT.len() - 1);
    for (i, entry) in prompt_logprobs.iter().enumerate() {
        assert_eq!(entry.token_id, PROMPT[i + 1]);
        assert!(entry.logprob <= 0.0);
        assert_eq!(entry.top.len(), 2);
        assert!(entry.top[0].logprob >= entry.top[1].logprob);
        assert!(entry.top[0].logprob >= entry.logprob);
    }
    let metrics = completion.metrics.expect("metrics");
    assert_eq!(metrics.num_prompt_tokens, PROMPT.len() as i64);
    assert_eq!(metrics.num_generated_tokens, 6);
    assert!(metrics.time_to_first_token > 0.0);
    assert!(metrics.e2e_latency >= metrics.time_to_first_token);
    assert!(metrics.time_queued <= metrics.time_to_first_token);

    // The last prompt entry is what decoding the same token from the prompt
    // before it gives: the prefill and decode paths agree.
    let prefix = &PROMPT[..PROMPT.len() - 1];
    let forced = SamplingParams {
        logprobs: Some(0),
        ..exactly(1)
    };
    let decoded = engine.generate(prefix.to_vec(), &forced).unwrap().remove(0);
    let greedy_token = decoded.token_ids[0];
    let with_greedy: Vec<i32> = prefix.iter().copied().chain([greedy_token]).collect();
    let again = engine
        .generate(
            with_greedy,
            &SamplingParams {
                prompt_logprobs: Some(0),
                ..exactly(1)
            },
        )
        .unwrap()
        .remove(0);
    let last = again.prompt_logprobs.unwrap().pop().unwrap();
    assert_eq!(last.token_id, greedy_token);
    let want = decoded.logprobs.unwrap()[0].logprob;
    assert!(
        (last.logprob - want).abs() < 1e-3,
        "{} vs {}",
        last.logprob,
        want
    );

    // Without the option there are none, and other events carry no metrics.
    let plain = engine
        .generate(PROMPT.to_vec(), &exactly(3))
        .unwrap()
        .remove(0);
    assert!(plain.prompt_logprobs.is_none());
    let stats = engine.stats().unwrap();
    assert!(stats.step_time_p50_ms > 0.0);
    assert!(stats.step_time_max_ms >= stats.step_time_p99_ms);
    assert!(stats.step_time_p99_ms >= stats.step_time_p50_ms);
}

#[test]
fn beam_search_returns_the_best_hypotheses_by_score() {
    let model = TinyModel::new();
    let engine = model.engine();
    let params = SamplingParams {
        beam_width: 3,
        n: 2,
        early_stopping: EarlyStopping::Never,
        ..SamplingParams::greedy(8)
    };
    let samples = engine.generate(PROMPT.to_vec(), &params).unwrap();
    assert_eq!(samples.len(), 2);
    assert!(samples[0].score < 0.0);
    assert!(samples[0].score >= samples[1].score);
    assert!(!samples[0].token_ids.is_empty());
    assert_ne!(samples[0].token_ids, samples[1].token_ids);

    // Beam search needs greedy scoring.
    let sampled = SamplingParams {
        temperature: 0.5,
        ..params
    };
    let err = engine.submit(&Request::tokens(PROMPT.to_vec()).with_sampling(sampled));
    assert_eq!(err.unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn preemption_by_swap_keeps_every_token() {
    let model = TinyModel::new();
    let config = model
        .config()
        .block_size(8)
        .num_kv_blocks(14)
        .max_model_len(96)
        .preemption_mode(PreemptionMode::Swap);
    let estimate = estimate_memory(&config).unwrap();
    assert_eq!(estimate.swap_bytes, 14 * estimate.kv_bytes_per_block);
    let prompts: Vec<Vec<i32>> = (0..5)
        .map(|r| {
            std::iter::once(1)
                .chain((1..10 + 3 * r).map(|i| 3 + (i * 7) % 200))
                .collect()
        })
        .collect();
    // What each request makes alone, in a pool big enough for it.
    let calm = model.engine();
    let want: Vec<Vec<i32>> = prompts
        .iter()
        .map(|p| {
            calm.generate(p.clone(), &exactly(40))
                .unwrap()
                .remove(0)
                .token_ids
        })
        .collect();

    let engine = Engine::new(&config).unwrap();
    let ids: Vec<_> = prompts
        .iter()
        .map(|p| {
            engine
                .submit(&Request::tokens(p.clone()).with_sampling(exactly(40)))
                .unwrap()
        })
        .collect();
    let mut got = vec![Vec::new(); ids.len()];
    while engine.step().unwrap() > 0 {
        for event in engine.poll().unwrap() {
            let i = ids.iter().position(|&id| id == event.request_id).unwrap();
            got[i].extend(event.token_ids);
        }
    }
    for event in engine.poll().unwrap() {
        let i = ids.iter().position(|&id| id == event.request_id).unwrap();
        got[i].extend(event.token_ids);
    }
    assert_eq!(got, want);
    let s = engine.stats().unwrap();
    assert!(s.num_preemptions_by_swap > 0, "{:?}", s);
    assert_eq!(s.num_blocks_swapped_in, s.num_blocks_swapped_out);
    assert_eq!(
        s.num_swap_bytes as u64,
        (s.num_blocks_swapped_out + s.num_blocks_swapped_in) as u64 * estimate.kv_bytes_per_block
    );
}

/// A stop string made of a multi-byte character and its neighbours, from a
/// generation that streams such characters: the text ends right before it,
/// and no event showed any of it first.
#[test]
fn multi_byte_stop_strings_end_the_stream_before_them() {
    let model = TinyModel::new();
    let engine = model.engine();
    let mut tried = Vec::new();
    for prompt in [
        "Once upon a time",
        "The café",
        "She said 你好",
        "A naïve dog",
        "Tom",
    ] {
        let full = engine
            .generate(prompt, &exactly(48))
            .unwrap()
            .remove(0)
            .text;
        // A multi-byte character in the second half (so text streamed
        // before it), after an ASCII one, with the character after it.
        let chars: Vec<(usize, char)> = full.char_indices().collect();
        let pick = (chars.len() / 2..chars.len().saturating_sub(1))
            .find(|&i| chars[i].1.len_utf8() > 1 && chars[i - 1].1.is_ascii());
        let i = match pick {
            Some(i) => i,
            None => {
                tried.push(full);
                continue;
            }
        };
        let start = chars[i - 1].0;
        let end = chars[i + 1].0 + chars[i + 1].1.len_utf8();
        let stop = full[start..end].to_string();
        let cut = full.find(&stop).unwrap();
        let params = SamplingParams {
            stop: vec![stop.clone()],
            ..exactly(48)
        };
        let mut joined = String::new();
        let mut finish = None;
        for event in engine
            .stream(&[Request::text(prompt).with_sampling(params)])
            .unwrap()
        {
            let event = event.unwrap();
            joined.push_str(&event.text);
            finish = event.finish_reason.or(finish);
        }
        assert_eq!(finish, Some(pvllm::FinishReason::Stop), "stop {:?}", stop);
        assert_eq!(joined, full[..cut], "stop {:?}", stop);
        assert!(!joined.is_empty());
        return;
    }
    panic!("no greedy text held a multi-byte character: {:?}", tried);
}
