# ctest script: `pvllm convert` and `pvllm inspect` of a .pvllm file, on the
# repository's real stories260K (llama2.c) and a tiny Hugging Face folder.
# The converted file generates the source's text; inspect shows the header;
# bad options and bad files fail with a status and leave nothing behind.
# Variables: PVLLM (the command), MAKE_MODEL (pvllm_make_tiny_model),
# MODELS (the repository's models/ folder), WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

include(${CMAKE_CURRENT_LIST_DIR}/smoke_helpers.cmake)

set(bin "${MODELS}/stories260K/stories260K.bin")
set(gen generate --prompt "Once upon a time" --temperature 0 --max-tokens 24 -q)

pvllm_run("" convert "${bin}" "${WORK}/s.pvllm")
expect_ok("convert stories260K")
if(NOT err MATCHES "converting" OR NOT err MATCHES "wrote .*s.pvllm")
  message(FATAL_ERROR "convert printed no progress:\n${err}")
endif()
pvllm_run("" ${gen} --model "${bin}")
expect_ok("generate from the .bin")
set(want "${out}")
foreach(layout packed row-major)
  foreach(dtype keep fp32)
    pvllm_run("" convert "${bin}" "${WORK}/s-${layout}-${dtype}.pvllm" --layout ${layout}
              --dtype ${dtype} -q)
    expect_ok("convert --layout ${layout} --dtype ${dtype}")
    pvllm_run("" ${gen} --model "${WORK}/s-${layout}-${dtype}.pvllm")
    expect_ok("generate from the ${layout} ${dtype} .pvllm")
    if(NOT out STREQUAL want OR want STREQUAL "")
      message(FATAL_ERROR "${layout} ${dtype}: generated\n${out}\nthe source generated\n${want}")
    endif()
  endforeach()
endforeach()

foreach(mode lazy none)
  pvllm_run("" ${gen} --model "${WORK}/s.pvllm" --model-checksums ${mode})
  expect_ok("generate --model-checksums ${mode}")
  if(NOT out STREQUAL want)
    message(FATAL_ERROR "--model-checksums ${mode}: generated\n${out}\nwant\n${want}")
  endif()
endforeach()
pvllm_run("" ${gen} --model "${WORK}/s.pvllm" --model-checksums sometimes)
if(rc EQUAL 0)
  message(FATAL_ERROR "--model-checksums sometimes was accepted")
endif()

pvllm_run("" inspect "${WORK}/s.pvllm")
expect_ok("inspect")
foreach(expected "format +pvllm" "format version +1.0" "source +stories260K.bin \\(llama2.c\\)"
        "sentencepiece tokenizer.model" "self_attn.qkv_proj.weight +F32 +panels16"
        "model.embed_tokens.weight +F32 +row-major +\\[512,64\\]")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "inspect does not show '${expected}':\n${out}")
  endif()
endforeach()

# A Hugging Face folder with a chat template: bf16, and the template travels.
execute_process(COMMAND "${MAKE_MODEL}" "${WORK}/hf" RESULT_VARIABLE rc OUTPUT_QUIET)
expect_ok("pvllm_make_tiny_model")
# A trailing slash still names the folder as the source.
pvllm_run("" convert "${WORK}/hf/" "${WORK}/hf.pvllm" --dtype bf16 -q)
expect_ok("convert the HF folder")
pvllm_run("" inspect "${WORK}/hf.pvllm")
if(NOT out MATCHES "BF16 +panels16" OR NOT out MATCHES "source +hf \\(Hugging Face\\)")
  message(FATAL_ERROR "inspect of the bf16 file:\n${out}")
endif()

# Refusals: exit 2 for bad options, 1 with a status for bad files; no output.
pvllm_run("" convert "${bin}" "${WORK}/x.pvllm" --dtype int8)
if(NOT rc EQUAL 2 OR NOT err MATCHES "expected keep, fp32, bf16 or fp16")
  message(FATAL_ERROR "--dtype int8: exit ${rc}\n${err}")
endif()
pvllm_run("" convert "${bin}" "${WORK}/x.pvllm" --layout tiled)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--layout tiled: exit ${rc}\n${err}")
endif()
pvllm_run("" convert "${bin}" "${WORK}/x.bin")
if(NOT rc EQUAL 2 OR NOT err MATCHES "must end in .pvllm")
  message(FATAL_ERROR "output without .pvllm: exit ${rc}\n${err}")
endif()
pvllm_run("" convert "${WORK}/absent" "${WORK}/x.pvllm")
if(NOT rc EQUAL 1 OR NOT err MATCHES "NOT_FOUND")
  message(FATAL_ERROR "absent source: exit ${rc}\n${err}")
endif()
if(EXISTS "${WORK}/x.pvllm" OR EXISTS "${WORK}/x.pvllm.tmp")
  message(FATAL_ERROR "a failed conversion left a file behind")
endif()
file(WRITE "${WORK}/cut.pvllm" "PVLLM")
pvllm_run("" ${gen} --model "${WORK}/cut.pvllm")
if(NOT rc EQUAL 1 OR NOT err MATCHES "CORRUPT_MODEL")
  message(FATAL_ERROR "a truncated .pvllm: exit ${rc}\n${err}")
endif()
pvllm_run("" inspect "${WORK}/cut.pvllm")
if(rc EQUAL 0)
  message(FATAL_ERROR "inspect of a truncated .pvllm succeeded:\n${out}")
endif()
file(REMOVE_RECURSE "${WORK}")
