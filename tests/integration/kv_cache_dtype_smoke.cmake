# ctest script: --kv-cache-dtype through the command, on the repository's
# stories260K (head_dim 8: a row of K or V is 32 bytes in f32, 16 in f16
# and 8 codes + a 2-byte fp16 scale = 10 in int8).
# - an unknown name is a usage error listing the names, for each command;
# - `generate --kv-cache-dtype int8` generates; fp8_e4m3 on the CPU fails
#   with the library's message naming what the CPU serves;
# - `inspect` shows the dtype and its bytes per block;
# - `bench --kv-cache-dtype f32,f16,int8` runs once per dtype: one table row
#   each, the ratio of sequences over f32 (3.20x for int8, 2.00x for f16),
#   and the per-dtype figures in its JSON.
# Variables: PVLLM (the command), MODELS (the repository's models/), WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
include(${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake)
set(model "${MODELS}/stories260K/stories260K.bin")

foreach(command generate chat bench inspect)
  pvllm_run("" ${command} --kv-cache-dtype int4)
  if(rc EQUAL 0 OR NOT err MATCHES "kv cache dtype \"int4\" is not one of auto, f32, f16, bf16, int8, fp8_e4m3")
    message(FATAL_ERROR "${command} --kv-cache-dtype int4: exit ${rc}\n${out}\n${err}")
  endif()
endforeach()
pvllm_run("" bench --model "${model}" --kv-cache-dtype f32,int4)
if(rc EQUAL 0 OR NOT err MATCHES "\"int4\" is not one of")
  message(FATAL_ERROR "bench --kv-cache-dtype f32,int4: exit ${rc}\n${out}\n${err}")
endif()

pvllm_run("" generate --model "${model}" --prompt "Once upon a time" --max-tokens 8 --ignore-eos
          --temperature 0 --threads 1 --kv-cache-mb 8 --kv-cache-dtype INT8 --quiet --json)
expect_ok("generate --kv-cache-dtype INT8")
string(JSON num_tokens LENGTH "${out}" token_ids)
if(NOT num_tokens EQUAL 8)
  message(FATAL_ERROR "generate --kv-cache-dtype int8 gave ${num_tokens} tokens:\n${out}\n${err}")
endif()

pvllm_run("" generate --model "${model}" --prompt "Once" --max-tokens 4 --device cpu
          --kv-cache-dtype fp8_e4m3 --quiet)
if(rc EQUAL 0 OR NOT err MATCHES "fp8_e4m3 runs on CUDA only" OR NOT err MATCHES "int8"
   OR NOT err MATCHES "UNSUPPORTED")
  message(FATAL_ERROR "generate --kv-cache-dtype fp8_e4m3 on the CPU: exit ${rc}\n${out}\n${err}")
endif()

pvllm_run("" inspect "${model}" --kv-cache-dtype f32)
expect_ok("inspect --kv-cache-dtype f32")
string(REGEX MATCH "KV per block[^\n]*\\(([0-9]+) bytes\\)" _ "${out}")
set(f32_bytes "${CMAKE_MATCH_1}")
pvllm_run("" inspect "${model}" --kv-cache-dtype int8)
expect_ok("inspect --kv-cache-dtype int8")
if(NOT out MATCHES "KV cache dtype +int8")
  message(FATAL_ERROR "inspect does not name the dtype:\n${out}")
endif()
string(REGEX MATCH "KV per block[^\n]*\\(([0-9]+) bytes\\)" _ "${out}")
set(int8_bytes "${CMAKE_MATCH_1}")
if(f32_bytes STREQUAL "" OR int8_bytes STREQUAL "")
  message(FATAL_ERROR "inspect printed no KV bytes per block:\n${out}")
endif()
math(EXPR lhs "${int8_bytes} * 32")
math(EXPR rhs "${f32_bytes} * 10")
if(NOT lhs EQUAL rhs)
  message(FATAL_ERROR "KV bytes per block: int8 ${int8_bytes}, f32 ${f32_bytes}; want 10 : 32")
endif()

pvllm_run("" bench --model "${model}" --workload fixed --input-len 48 --output-len 16
          --num-requests 4 --kv-allocator paged --kv-cache-mb 1 --threads 1 --quiet
          --kv-cache-dtype f32,f16,int8 --json "${WORK}/dtypes.json")
expect_ok("bench --kv-cache-dtype f32,f16,int8")
foreach(row "f32 +${f32_bytes} +[0-9]+ +[0-9]+ +1.00x" "f16 +[0-9]+ +[0-9]+ +[0-9]+ +2.00x"
            "int8 +${int8_bytes} +[0-9]+ +[0-9]+ +3.20x")
  if(NOT out MATCHES "\n${row} ")
    message(FATAL_ERROR "bench prints no row '${row}':\n${out}")
  endif()
endforeach()
string(REGEX MATCHALL "\n(f32|f16|bf16|int8) +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+x" rows "${out}")
list(LENGTH rows num_rows)
if(NOT num_rows EQUAL 3)
  message(FATAL_ERROR "bench printed ${num_rows} dtype rows, want 3:\n${out}")
endif()
file(READ "${WORK}/dtypes.json" json)
string(JSON num_runs LENGTH "${json}" runs)
string(JSON num_dtypes LENGTH "${json}" kv_cache_dtype_table)
if(NOT num_runs EQUAL 3 OR NOT num_dtypes EQUAL 3)
  message(FATAL_ERROR "the JSON has ${num_runs} runs and ${num_dtypes} dtype rows, want 3:\n${json}")
endif()
set(i 0)
foreach(dtype f32 f16 int8)
  string(JSON got GET "${json}" runs ${i} kv_cache_dtype)
  string(JSON table_dtype GET "${json}" kv_cache_dtype_table ${i} kv_cache_dtype)
  if(NOT got STREQUAL dtype OR NOT table_dtype STREQUAL dtype)
    message(FATAL_ERROR "run ${i} is ${got} / ${table_dtype}, want ${dtype}")
  endif()
  foreach(key kv_bytes_per_block seqs_that_fit num_blocks_total output_tokens_per_s)
    string(JSON value ERROR_VARIABLE missing GET "${json}" runs ${i} ${key})
    if(missing)
      message(FATAL_ERROR "run ${i} has no ${key}: ${missing}")
    endif()
  endforeach()
  foreach(key kv_bytes_per_block num_blocks seqs_that_fit seqs_over_first output_tokens_per_s)
    string(JSON value ERROR_VARIABLE missing GET "${json}" kv_cache_dtype_table ${i} ${key})
    if(missing)
      message(FATAL_ERROR "dtype row ${i} has no ${key}: ${missing}")
    endif()
  endforeach()
  math(EXPR i "${i} + 1")
endforeach()
string(JSON int8_ratio GET "${json}" kv_cache_dtype_table 2 seqs_over_first)
string(JSON int8_json_bytes GET "${json}" runs 2 kv_bytes_per_block)
string(JSON int8_blocks GET "${json}" runs 2 num_blocks_total)
string(JSON f32_blocks GET "${json}" runs 0 num_blocks_total)
if(NOT int8_ratio EQUAL 3.2 OR NOT int8_json_bytes EQUAL int8_bytes
   OR NOT int8_blocks GREATER f32_blocks)
  message(FATAL_ERROR "int8: ratio ${int8_ratio}, bytes ${int8_json_bytes}, blocks ${int8_blocks} "
                      "(f32 ${f32_blocks})")
endif()
