# ctest script: speculative decoding through the command, on the
# repository's stories260K.
# - `generate --speculative ngram` gives the greedy tokens of a run without
#   it, for k 1 and 8, and says what it proposed;
# - an unknown method is a usage error naming the methods; a bad k is the
#   library's INVALID_ARGUMENT naming the field;
# - `bench --speculative ngram` reports its counters in the JSON.
# Variables: PVLLM (the command), MODELS (the repository's models/), WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
include(${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake)
set(model "${MODELS}/stories260K/stories260K.bin")
set(common --model "${model}" --prompt "Once upon a time" --max-tokens 48 --ignore-eos
           --temperature 0 --threads 1 --device cpu --json)

pvllm_run("" generate ${common} --quiet)
expect_ok("generate")
string(JSON plain GET "${out}" token_ids)
foreach(k 1 8)
  pvllm_run("" generate ${common} --speculative ngram --speculative-tokens ${k})
  expect_ok("generate --speculative ngram --speculative-tokens ${k}")
  string(JSON spec GET "${out}" token_ids)
  if(NOT spec STREQUAL plain)
    message(FATAL_ERROR "--speculative ngram, k ${k}: ${spec}\nwithout: ${plain}")
  endif()
  if(NOT err MATCHES "speculative decoding: [0-9]+ of [0-9]+ proposed tokens accepted")
    message(FATAL_ERROR "--speculative ngram, k ${k}: no counters\n${err}")
  endif()
endforeach()

pvllm_run("" generate ${common} --speculative draft)
if(rc EQUAL 0 OR NOT err MATCHES "draft not in \\{off,ngram\\}")
  message(FATAL_ERROR "--speculative draft: exit ${rc}\n${out}\n${err}")
endif()
pvllm_run("" generate ${common} --speculative ngram --speculative-tokens 99 --quiet)
if(rc EQUAL 0 OR NOT err MATCHES "speculative_tokens must be in \\[1, 16\\]")
  message(FATAL_ERROR "--speculative-tokens 99: exit ${rc}\n${out}\n${err}")
endif()

pvllm_run("" bench --model "${model}" --speculative ngram --num-requests 4 --json "${WORK}/b.json")
expect_ok("bench --speculative ngram")
file(READ "${WORK}/b.json" bench_json)
if(NOT bench_json MATCHES "spec_proposed_tokens")
  message(FATAL_ERROR "bench --speculative ngram: no counters in the JSON\n${bench_json}")
endif()
