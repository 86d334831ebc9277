# ctest script: the maskbench runner end to end (a few seconds) on 20
# Kubernetes files of the committed MaskBench subset: it must exit 0, print the table, and write a JSON whose counts add up, with no
# invalid instance let through, no crash and no timeout. Skips (ctest
# reads its "skipped:" line) without the reference tokenizers.
# Variables: MASKBENCH (the program), DATA (tests/data/structured/maskbench),
# WORK.
if(NOT DEFINED ENV{PVLLM_REFERENCE_TOKENIZERS} OR "$ENV{PVLLM_REFERENCE_TOKENIZERS}" STREQUAL "")
  message("skipped: needs PVLLM_REFERENCE_TOKENIZERS (bash scripts/reference/install.sh)")
  return()
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(
  COMMAND "${MASKBENCH}" "${DATA}" "$ENV{PVLLM_REFERENCE_TOKENIZERS}/tokenizer-llama3_1/models"
          --filter Kubernetes --limit 20 --time-limit 30 --json "${WORK}/out.json"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "maskbench exited ${rc}\n${out}\n${err}")
endif()
if(NOT out MATCHES "\\| passing \\| compile error \\|")
  message(FATAL_ERROR "maskbench printed no table:\n${out}")
endif()
file(READ "${WORK}/out.json" json)
string(JSON schemas GET "${json}" schemas)
string(JSON passing GET "${json}" passing)
string(JSON invalidation GET "${json}" invalidation_errors)
string(JSON crashes GET "${json}" crashes)
string(JSON timeouts GET "${json}" timeouts)
string(JSON results LENGTH "${json}" results)
if(NOT schemas EQUAL 20 OR NOT results EQUAL 20)
  message(FATAL_ERROR "expected 20 schemas and 20 results, got ${schemas} and ${results}")
endif()
if(passing LESS 1 OR NOT invalidation EQUAL 0 OR NOT crashes EQUAL 0 OR NOT timeouts EQUAL 0)
  message(FATAL_ERROR "passing ${passing}, invalidation errors ${invalidation}, crashes ${crashes}, "
                      "timeouts ${timeouts}\n${out}")
endif()
