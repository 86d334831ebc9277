# Fails when an object built for the baseline target (everything but the
# CPU kernel variants: the code that runs before the ISA check) holds an
# AVX instruction (a ymm or zmm register), which would be SIGILL on a CPU
# without AVX. OBJECTS: a ;-list of object files (escaped as |).
string(REPLACE "|" ";" objects "${OBJECTS}")
foreach(object IN LISTS objects)
  execute_process(COMMAND objdump -d --no-show-raw-insn ${object} OUTPUT_VARIABLE asm
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "objdump failed on ${object}")
  endif()
  string(REGEX MATCH "[^\n]*%[yz]mm[0-9]+[^\n]*" hit "${asm}")
  if(hit)
    message(FATAL_ERROR "${object} uses AVX outside the kernel variants: ${hit}")
  endif()
endforeach()
list(LENGTH objects n)
message(STATUS "${n} baseline objects hold no AVX instruction")
