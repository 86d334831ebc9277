# ctest script: the command with --random-weights tiny and no model file.
# `pvllm bench` runs nano-vllm's workload unscaled on the 2048-token tiny
# shape (and says SCALED only when --max-model-len shortens the context),
# reports latency percentiles in its JSON; `inspect` shows a big shape's
# config without allocating it; `generate` takes token-id prompts and
# refuses text prompts with a tokenizer error.
# Variables: PVLLM (the command), WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

execute_process(
  COMMAND "${PVLLM}" bench --random-weights tiny --workload nano --num-requests 4
          --kv-allocator paged --kv-cache-mb 16 --threads 1 --json "${WORK}/nano.json"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pvllm bench --random-weights tiny exited ${rc}\n${out}\n${err}")
endif()
if(out MATCHES "SCALED")
  message(FATAL_ERROR "nano was scaled on a 2048-token context:\n${out}")
endif()
file(READ "${WORK}/nano.json" json)
string(JSON model GET "${json}" model)
if(NOT model STREQUAL "random:tiny")
  message(FATAL_ERROR "model is '${model}', expected random:tiny")
endif()
foreach(key ttft_p50_ms ttft_p99_ms tpot_p50_ms tpot_p99_ms output_tokens_per_s total_tokens_per_s
            peak_running kv_util_mean preemptions)
  string(JSON value ERROR_VARIABLE missing GET "${json}" runs 0 ${key})
  if(missing)
    message(FATAL_ERROR "run has no ${key}: ${missing}")
  endif()
endforeach()
string(JSON ttft50 GET "${json}" runs 0 ttft_p50_ms)
string(JSON ttft99 GET "${json}" runs 0 ttft_p99_ms)
string(JSON tpot50 GET "${json}" runs 0 tpot_p50_ms)
if(NOT ttft50 GREATER 0 OR NOT tpot50 GREATER 0 OR ttft99 LESS ttft50)
  message(FATAL_ERROR "implausible latencies: ttft p50 ${ttft50} p99 ${ttft99}, tpot p50 ${tpot50}")
endif()
# nano-vllm's lengths are each at least 100: every request decodes >= 100.
string(JSON num_out GET "${json}" runs 0 output_tokens)
if(num_out LESS 400)
  message(FATAL_ERROR "4 nano requests produced only ${num_out} tokens")
endif()

execute_process(
  COMMAND "${PVLLM}" bench --random-weights tiny --workload nano --num-requests 2
          --max-model-len 512 --kv-allocator paged --kv-cache-mb 16 --threads 1 --quiet
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "SCALED")
  message(FATAL_ERROR "a 512-token context should scale nano and say so (rc ${rc}):\n${out}\n${err}")
endif()

execute_process(COMMAND "${PVLLM}" inspect --random-weights tinyllama-1.1b
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "hidden_size +2048" OR NOT out MATCHES "num_kv_heads +4")
  message(FATAL_ERROR "inspect --random-weights tinyllama-1.1b (rc ${rc}):\n${out}\n${err}")
endif()

execute_process(
  COMMAND "${PVLLM}" generate --random-weights tiny --prompt-ids 1,2,3 --max-tokens 4
          --temperature 0 --threads 1 --quiet
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\[1,2,3\\] -> \\[[0-9]+,[0-9]+,[0-9]+,[0-9]+\\]")
  message(FATAL_ERROR "generate --prompt-ids (rc ${rc}):\n${out}\n${err}")
endif()

execute_process(
  COMMAND "${PVLLM}" generate --random-weights tiny --prompt "hello" --max-tokens 2 --quiet
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "TOKENIZER_ERROR")
  message(FATAL_ERROR "a text prompt on a random model should fail with TOKENIZER_ERROR:\n${err}")
endif()
