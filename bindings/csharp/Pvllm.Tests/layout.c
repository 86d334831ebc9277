/* Prints the size of every struct in pvllm.h and the offset of each field,
 * one "struct field offset" line each ("struct <size> size" for sizes).
 * LayoutTests compares NativeMethods' StructLayout structs against it. */
#include <pvllm/pvllm.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(T) printf("%s <size> %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("%s %s %zu\n", #T, #f, offsetof(T, f))

int main(void) {
  SIZE(pvllm_engine_params);
  FIELD(pvllm_engine_params, struct_size);
  FIELD(pvllm_engine_params, model_path);
  FIELD(pvllm_engine_params, device);
  FIELD(pvllm_engine_params, block_size);
  FIELD(pvllm_engine_params, kv_cache_bytes);
  FIELD(pvllm_engine_params, num_kv_blocks);
  FIELD(pvllm_engine_params, max_num_seqs);
  FIELD(pvllm_engine_params, max_num_batched_tokens);
  FIELD(pvllm_engine_params, max_model_len);
  FIELD(pvllm_engine_params, enable_prefix_caching);
  FIELD(pvllm_engine_params, num_threads);
  FIELD(pvllm_engine_params, progress);
  FIELD(pvllm_engine_params, progress_user_data);
  FIELD(pvllm_engine_params, kv_allocator);
  FIELD(pvllm_engine_params, random_weights);
  FIELD(pvllm_engine_params, gpu_memory_utilization);
  FIELD(pvllm_engine_params, dtype);
  FIELD(pvllm_engine_params, enable_cuda_graphs);
  FIELD(pvllm_engine_params, swap_space_bytes);
  FIELD(pvllm_engine_params, preemption_mode);
  FIELD(pvllm_engine_params, model_checksums);
  FIELD(pvllm_engine_params, quantize);
  FIELD(pvllm_engine_params, kv_cache_dtype);
  FIELD(pvllm_engine_params, speculative);
  FIELD(pvllm_engine_params, speculative_tokens);
  FIELD(pvllm_engine_params, ngram_min);
  FIELD(pvllm_engine_params, ngram_max);
  FIELD(pvllm_engine_params, speculative_max_running);

  SIZE(pvllm_sampling_params);
  FIELD(pvllm_sampling_params, struct_size);
  FIELD(pvllm_sampling_params, temperature);
  FIELD(pvllm_sampling_params, top_k);
  FIELD(pvllm_sampling_params, top_p);
  FIELD(pvllm_sampling_params, min_p);
  FIELD(pvllm_sampling_params, repetition_penalty);
  FIELD(pvllm_sampling_params, presence_penalty);
  FIELD(pvllm_sampling_params, frequency_penalty);
  FIELD(pvllm_sampling_params, max_tokens);
  FIELD(pvllm_sampling_params, stop_token_ids);
  FIELD(pvllm_sampling_params, num_stop_token_ids);
  FIELD(pvllm_sampling_params, stop);
  FIELD(pvllm_sampling_params, num_stop);
  FIELD(pvllm_sampling_params, ignore_eos);
  FIELD(pvllm_sampling_params, logprobs);
  FIELD(pvllm_sampling_params, has_seed);
  FIELD(pvllm_sampling_params, seed);
  FIELD(pvllm_sampling_params, n);
  FIELD(pvllm_sampling_params, prompt_logprobs);
  FIELD(pvllm_sampling_params, beam_width);
  FIELD(pvllm_sampling_params, length_penalty);
  FIELD(pvllm_sampling_params, early_stopping);
  FIELD(pvllm_sampling_params, constraint_kind);
  FIELD(pvllm_sampling_params, constraint);
  FIELD(pvllm_sampling_params, choices);
  FIELD(pvllm_sampling_params, num_choices);
  FIELD(pvllm_sampling_params, constraint_flags);
  FIELD(pvllm_sampling_params, speculative);

  SIZE(pvllm_chat_template_params);
  FIELD(pvllm_chat_template_params, struct_size);
  FIELD(pvllm_chat_template_params, messages_json);
  FIELD(pvllm_chat_template_params, tools_json);
  FIELD(pvllm_chat_template_params, extra_context_json);
  FIELD(pvllm_chat_template_params, add_generation_prompt);
  FIELD(pvllm_chat_template_params, template_name);
  FIELD(pvllm_chat_template_params, chat_template);

  SIZE(pvllm_request);
  FIELD(pvllm_request, struct_size);
  FIELD(pvllm_request, prompt_text);
  FIELD(pvllm_request, prompt_token_ids);
  FIELD(pvllm_request, num_prompt_token_ids);
  FIELD(pvllm_request, sampling);
  FIELD(pvllm_request, priority);
  FIELD(pvllm_request, delivery);
  FIELD(pvllm_request, on_output);
  FIELD(pvllm_request, on_output_user_data);
  FIELD(pvllm_request, add_special_tokens);

  SIZE(pvllm_logprob);
  FIELD(pvllm_logprob, token_id);
  FIELD(pvllm_logprob, logprob);

  SIZE(pvllm_token_logprobs);
  FIELD(pvllm_token_logprobs, token_id);
  FIELD(pvllm_token_logprobs, logprob);
  FIELD(pvllm_token_logprobs, top);
  FIELD(pvllm_token_logprobs, num_top);

  SIZE(pvllm_output);
  FIELD(pvllm_output, struct_size);
  FIELD(pvllm_output, request_id);
  FIELD(pvllm_output, sample_index);
  FIELD(pvllm_output, token_ids);
  FIELD(pvllm_output, num_token_ids);
  FIELD(pvllm_output, text);
  FIELD(pvllm_output, text_len);
  FIELD(pvllm_output, finish_reason);
  FIELD(pvllm_output, logprobs);
  FIELD(pvllm_output, error_message);
  FIELD(pvllm_output, request_finished);
  FIELD(pvllm_output, sequence);
  FIELD(pvllm_output, time_queued);
  FIELD(pvllm_output, time_to_first_token);
  FIELD(pvllm_output, time_per_output_token);
  FIELD(pvllm_output, e2e_latency);
  FIELD(pvllm_output, num_prompt_tokens);
  FIELD(pvllm_output, num_prefill_tokens);
  FIELD(pvllm_output, num_cached_prompt_tokens);
  FIELD(pvllm_output, num_generated_tokens);
  FIELD(pvllm_output, prompt_logprobs);
  FIELD(pvllm_output, num_prompt_logprobs);
  FIELD(pvllm_output, score);

  SIZE(pvllm_stats);
  FIELD(pvllm_stats, struct_size);
  FIELD(pvllm_stats, num_running);
  FIELD(pvllm_stats, num_waiting);
  FIELD(pvllm_stats, num_blocks_total);
  FIELD(pvllm_stats, num_blocks_used);
  FIELD(pvllm_stats, num_blocks_free);
  FIELD(pvllm_stats, num_blocks_cached);
  FIELD(pvllm_stats, kv_utilization);
  FIELD(pvllm_stats, reserved_unused_slots);
  FIELD(pvllm_stats, prefix_cache_hit_rate);
  FIELD(pvllm_stats, prefix_cache_hits);
  FIELD(pvllm_stats, prefix_cache_queries);
  FIELD(pvllm_stats, num_preemptions);
  FIELD(pvllm_stats, num_prompt_tokens_processed);
  FIELD(pvllm_stats, num_generation_tokens);
  FIELD(pvllm_stats, num_cached_prompt_tokens);
  FIELD(pvllm_stats, num_steps);
  FIELD(pvllm_stats, num_requests_finished);
  FIELD(pvllm_stats, num_kv_tokens_stored);
  FIELD(pvllm_stats, num_kv_slots_reserved);
  FIELD(pvllm_stats, num_seqs_queued_for_memory);
  FIELD(pvllm_stats, num_block_copies);
  FIELD(pvllm_stats, backend);
  FIELD(pvllm_stats, num_prefix_cache_evictions);
  FIELD(pvllm_stats, step_time_p50_ms);
  FIELD(pvllm_stats, step_time_p99_ms);
  FIELD(pvllm_stats, step_time_max_ms);
  FIELD(pvllm_stats, num_preemptions_by_swap);
  FIELD(pvllm_stats, num_blocks_swapped_out);
  FIELD(pvllm_stats, num_blocks_swapped_in);
  FIELD(pvllm_stats, num_swap_bytes);
  FIELD(pvllm_stats, num_kv_tokens_attended);
  FIELD(pvllm_stats, num_spec_drafts);
  FIELD(pvllm_stats, num_spec_proposed_tokens);
  FIELD(pvllm_stats, num_spec_accepted_tokens);
  FIELD(pvllm_stats, spec_accepted_at);

  SIZE(pvllm_model_config);
  FIELD(pvllm_model_config, struct_size);
  FIELD(pvllm_model_config, architecture);
  FIELD(pvllm_model_config, format);
  FIELD(pvllm_model_config, hidden_size);
  FIELD(pvllm_model_config, intermediate_size);
  FIELD(pvllm_model_config, num_layers);
  FIELD(pvllm_model_config, num_heads);
  FIELD(pvllm_model_config, num_kv_heads);
  FIELD(pvllm_model_config, head_dim);
  FIELD(pvllm_model_config, vocab_size);
  FIELD(pvllm_model_config, max_position_embeddings);
  FIELD(pvllm_model_config, rms_norm_eps);
  FIELD(pvllm_model_config, rope_theta);
  FIELD(pvllm_model_config, tie_word_embeddings);
  FIELD(pvllm_model_config, bos_token_id);
  FIELD(pvllm_model_config, eos_token_id);
  FIELD(pvllm_model_config, rope_type);
  FIELD(pvllm_model_config, rope_factor);
  FIELD(pvllm_model_config, rope_low_freq_factor);
  FIELD(pvllm_model_config, rope_high_freq_factor);
  FIELD(pvllm_model_config, rope_original_max_position_embeddings);
  FIELD(pvllm_model_config, sliding_window);
  FIELD(pvllm_model_config, qkv_bias);
  FIELD(pvllm_model_config, o_bias);
  FIELD(pvllm_model_config, qk_norm);
  FIELD(pvllm_model_config, num_stop_token_ids);
  FIELD(pvllm_model_config, stop_token_ids);

  SIZE(pvllm_tensor_info);
  FIELD(pvllm_tensor_info, name);
  FIELD(pvllm_tensor_info, dtype);
  FIELD(pvllm_tensor_info, num_dims);
  FIELD(pvllm_tensor_info, shape);

  SIZE(pvllm_memory_estimate);
  FIELD(pvllm_memory_estimate, struct_size);
  FIELD(pvllm_memory_estimate, weight_bytes);
  FIELD(pvllm_memory_estimate, kv_bytes_per_block);
  FIELD(pvllm_memory_estimate, num_blocks);
  FIELD(pvllm_memory_estimate, kv_bytes_total);
  FIELD(pvllm_memory_estimate, max_tokens_in_cache);
  FIELD(pvllm_memory_estimate, activation_bytes);
  FIELD(pvllm_memory_estimate, swap_bytes);

  SIZE(pvllm_tokenizer_info);
  FIELD(pvllm_tokenizer_info, struct_size);
  FIELD(pvllm_tokenizer_info, vocab_size);
  FIELD(pvllm_tokenizer_info, bos_id);
  FIELD(pvllm_tokenizer_info, eos_id);
  FIELD(pvllm_tokenizer_info, bos_token);
  FIELD(pvllm_tokenizer_info, eos_token);
  FIELD(pvllm_tokenizer_info, kind);
  FIELD(pvllm_tokenizer_info, source);
  FIELD(pvllm_tokenizer_info, adds_bos);
  FIELD(pvllm_tokenizer_info, has_chat_template);
  return 0;
}
