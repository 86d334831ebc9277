# Helpers the ctest scripts of the pvllm command share (include()d with
# PVLLM and WORK set).

# Runs the command with `input` on standard input; sets out, err, rc.
function(pvllm_run input)
  file(WRITE "${WORK}/stdin.txt" "${input}")
  execute_process(COMMAND "${PVLLM}" ${ARGN} INPUT_FILE "${WORK}/stdin.txt"
                  RESULT_VARIABLE rc_ OUTPUT_VARIABLE out_ ERROR_VARIABLE err_)
  set(rc "${rc_}" PARENT_SCOPE)
  set(out "${out_}" PARENT_SCOPE)
  set(err "${err_}" PARENT_SCOPE)
endfunction()

function(expect_ok what)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} exited ${rc}\n${out}\n${err}")
  endif()
endfunction()
