// PVLLM_CHECK: broken invariants are programming errors, so they abort with
// the place and the reason (like GGML_ASSERT). Expected failures — bad
// input, running out of blocks — are never checks: they are values or a
// Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PVLLM_CHECK(cond, msg)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "pvllm: invariant broken at %s:%d: %s (%s)\n", __FILE__, __LINE__, msg, \
                   #cond);                                                                         \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)
