# ctest script: `pvllm bench` on a tiny random model with a few requests.
# Checks that it exits 0, that its JSON carries every figure for both
# allocators, and that the contiguous baseline behaves as one: with a 1 MiB
# budget (128 blocks of 16) and a 1024-token context (64 blocks per
# reservation) at most 2 contiguous sequences run at once, while paged runs
# more, at higher utilization.
# Variables: PVLLM (the command), MAKE_MODEL (pvllm_make_tiny_model), WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${MAKE_MODEL}" "${WORK}/model" --max-position 1024 --hidden 64
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pvllm_make_tiny_model failed: ${rc}")
endif()
execute_process(
  COMMAND "${PVLLM}" bench --model "${WORK}/model" --workload chat --num-requests 8 --rate 4
          --kv-cache-mb 1 --threads 1 --kv-allocator both --quiet --json "${WORK}/out.json"
          --markdown "${WORK}/out.md" --timeline "${WORK}/timeline.tsv"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pvllm bench exited ${rc}\n${out}\n${err}")
endif()
foreach(f out.md timeline.tsv)
  if(NOT EXISTS "${WORK}/${f}")
    message(FATAL_ERROR "pvllm bench did not write ${f}")
  endif()
endforeach()
file(READ "${WORK}/out.json" json)
string(JSON num_runs LENGTH "${json}" runs)
if(NOT num_runs EQUAL 2)
  message(FATAL_ERROR "expected 2 runs, got ${num_runs}")
endif()
foreach(i 0 1)
  foreach(key allocator output_tokens_per_s total_tokens_per_s peak_running mean_running
              queued_for_memory rejected kv_util_mean kv_util_at_peak internal_waste_fraction
              preemptions prefix_hit_rate prefill_tokens_skipped kv_blocks_per_seq output_tokens)
    string(JSON value ERROR_VARIABLE missing GET "${json}" runs ${i} ${key})
    if(missing)
      message(FATAL_ERROR "run ${i} has no ${key}: ${missing}")
    endif()
  endforeach()
endforeach()
string(JSON paged_peak GET "${json}" runs 0 peak_running)
string(JSON contig_peak GET "${json}" runs 1 peak_running)
string(JSON paged_out GET "${json}" runs 0 output_tokens)
string(JSON contig_out GET "${json}" runs 1 output_tokens)
string(JSON paged_util GET "${json}" runs 0 kv_util_mean)
string(JSON contig_util GET "${json}" runs 1 kv_util_mean)
string(JSON ratio ERROR_VARIABLE missing GET "${json}" paged_over_contiguous peak_running)
if(missing)
  message(FATAL_ERROR "no paged_over_contiguous ratios: ${missing}")
endif()
if(contig_peak GREATER 2)
  message(FATAL_ERROR "contiguous ran ${contig_peak} sequences in room for 2")
endif()
if(NOT paged_peak GREATER contig_peak)
  message(FATAL_ERROR "paged peak ${paged_peak} not above contiguous ${contig_peak}")
endif()
if(NOT paged_out EQUAL contig_out OR paged_out EQUAL 0)
  message(FATAL_ERROR "output tokens differ or are zero: ${paged_out} vs ${contig_out}")
endif()
if(NOT paged_util GREATER contig_util)
  message(FATAL_ERROR "paged utilization ${paged_util} not above contiguous ${contig_util}")
endif()

# Preemption by swap: on 16 requests in the same 1 MiB some sequences are
# preempted, every one by swap, their blocks come back, and the engine's
# own timing and step times are reported.
execute_process(
  COMMAND "${PVLLM}" bench --model "${WORK}/model" --workload chat --num-requests 16 --rate 4
          --kv-cache-mb 1 --threads 1 --kv-allocator paged --preemption-mode swap --quiet
          --json "${WORK}/swap.json"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pvllm bench --preemption-mode swap exited ${rc}\n${out}\n${err}")
endif()
file(READ "${WORK}/swap.json" json)
foreach(key preemptions preemptions_by_swap preemptions_by_recompute blocks_swapped_out
            blocks_swapped_in swap_mib step_time_p50_ms step_time_max_ms engine_ttft_p50_ms
            engine_queued_p99_ms prefix_cache_evictions)
  string(JSON ${key} ERROR_VARIABLE missing GET "${json}" runs 0 ${key})
  if(missing)
    message(FATAL_ERROR "the swap run has no ${key}: ${missing}")
  endif()
endforeach()
if(preemptions EQUAL 0 OR NOT preemptions_by_swap EQUAL preemptions
   OR NOT preemptions_by_recompute EQUAL 0)
  message(FATAL_ERROR "preemptions ${preemptions}, by swap ${preemptions_by_swap}, by "
                      "recompute ${preemptions_by_recompute}")
endif()
if(blocks_swapped_out EQUAL 0 OR NOT blocks_swapped_in EQUAL blocks_swapped_out)
  message(FATAL_ERROR "blocks swapped out ${blocks_swapped_out}, in ${blocks_swapped_in}")
endif()
if(NOT step_time_p50_ms GREATER 0 OR step_time_p50_ms GREATER step_time_max_ms
   OR NOT engine_ttft_p50_ms GREATER 0)
  message(FATAL_ERROR "step time p50 ${step_time_p50_ms} max ${step_time_max_ms}, engine "
                      "TTFT p50 ${engine_ttft_p50_ms}")
endif()
