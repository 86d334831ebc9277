/* CHECK for the C99 ABI tests (capi_misuse.c, capi_contract.c): the first
 * failed condition is written, with its file and line, into the caller's
 * buffer, which the C++ test that called in reports. */
#ifndef PVLLM_TESTS_C_CHECK_H_
#define PVLLM_TESTS_C_CHECK_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef struct context {
  char* failure;
  size_t failure_len;
  int failed;
} context;

static void fail_at(context* ctx, const char* file, int line, const char* format, ...) {
  va_list args;
  int n;
  if (ctx->failed) return; /* keep the first failure */
  ctx->failed = 1;
  n = snprintf(ctx->failure, ctx->failure_len, "%s:%d: ", file, line);
  if (n < 0 || (size_t)n >= ctx->failure_len) return;
  va_start(args, format);
  vsnprintf(ctx->failure + n, ctx->failure_len - (size_t)n, format, args);
  va_end(args);
}

#define fail(ctx, line, ...) fail_at((ctx), __FILE__, (line), __VA_ARGS__)

#define CHECK(ctx, cond)                             \
  do {                                               \
    if (!(cond)) fail((ctx), __LINE__, "%s", #cond); \
  } while (0)

#endif /* PVLLM_TESTS_C_CHECK_H_ */
