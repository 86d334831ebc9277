# ctest script: examples/cpp/generate.cc (pvllm.hpp) prints what
# examples/c/generate.c prints on a tiny model, built here and built again
# as a consumer of an install would build it: `cmake --install` into a
# temporary prefix, the compiler in C++17 with pkg-config's flags for
# pvllm.pc, nothing from the source tree on the include path.
# Variables: MAKE_MODEL (pvllm_make_tiny_model), EXAMPLE_C, EXAMPLE_CPP,
# BUILD_DIR, CXX, SOURCE (examples/cpp/generate.cc), PKG_CONFIG, WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${MAKE_MODEL}" "${WORK}/model" RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pvllm_make_tiny_model failed: ${rc}")
endif()
set(prompt "Once upon a time")

function(run_example name program)
  execute_process(COMMAND ${program} "${WORK}/model" "${prompt}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} exited ${rc}\n${out}\n${err}")
  endif()
  set(${name}_out "${out}" PARENT_SCOPE)
endfunction()

run_example(c "${EXAMPLE_C}")
run_example(cpp "${EXAMPLE_CPP}")
string(LENGTH "${prompt}" prompt_len)
string(LENGTH "${c_out}" c_len)
if(NOT c_out MATCHES "^${prompt}" OR NOT c_len GREATER prompt_len)
  message(FATAL_ERROR "the C example printed no continuation:\n${c_out}")
endif()
if(NOT cpp_out STREQUAL c_out)
  message(FATAL_ERROR "the C++ example printed\n${cpp_out}\nthe C example\n${c_out}")
endif()

# As an installed package's user builds it.
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}):\n${err}")
endif()
foreach(header pvllm.h pvllm.hpp)
  if(NOT EXISTS "${WORK}/prefix/include/pvllm/${header}")
    message(FATAL_ERROR "the install has no include/pvllm/${header}")
  endif()
endforeach()
file(GLOB_RECURSE pc_files "${WORK}/prefix/*/pvllm.pc")
list(LENGTH pc_files num_pc)
if(NOT num_pc EQUAL 1)
  message(FATAL_ERROR "expected one installed pvllm.pc, found: ${pc_files}")
endif()
execute_process(
  COMMAND "${PKG_CONFIG}" "--define-variable=prefix=${WORK}/prefix" --cflags --libs "${pc_files}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config failed (${rc}): ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
execute_process(COMMAND "${CXX}" -std=c++17 -Wall -Wextra -Werror "${SOURCE}" -o "${WORK}/consumer"
                        ${flags}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the C++ example against the install failed (${rc}):\n${out}\n${err}")
endif()
get_filename_component(libdir "${pc_files}" DIRECTORY)
get_filename_component(libdir "${libdir}" DIRECTORY)
run_example(consumer "${CMAKE_COMMAND};-E;env;LD_LIBRARY_PATH=${libdir};${WORK}/consumer")
if(NOT consumer_out STREQUAL c_out)
  message(FATAL_ERROR "the installed build printed\n${consumer_out}\nthe C example\n${c_out}")
endif()
