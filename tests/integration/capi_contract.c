/* The header's promises that are easiest to break without noticing,
 * checked from C99 the way a C caller sees them: names of statuses and
 * finish reasons, what every out-parameter holds after a failure, a
 * pvllm_request of the 0.1 size, and one request followed with pvllm_wait
 * and pvllm_poll_request. Called from a gtest in capi_events_test.cc. */
#include <pvllm/pvllm.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tests/integration/c_check.h"

int pvllm_c_contract_checks(const char* model_path, char* failure, size_t failure_len);

/* Checks a call's status and frees its error. */
#define EXPECT_STATUS(ctx, call, want)                                                            \
  do {                                                                                            \
    pvllm_error* err_ = NULL;                                                                     \
    pvllm_status st_ = (call);                                                                    \
    if (st_ != (want)) {                                                                          \
      fail((ctx), __LINE__, "%s returned %s, expected %s (%s)", #call,                            \
           pvllm_status_to_string(st_), pvllm_status_to_string(want), pvllm_error_message(err_)); \
    } else if ((want) != PVLLM_STATUS_OK && pvllm_error_status(err_) != (want)) {                 \
      fail((ctx), __LINE__, "%s: no error object carrying %s", #call,                             \
           pvllm_status_to_string(want));                                                         \
    }                                                                                             \
    pvllm_error_free(err_);                                                                       \
  } while (0)

#define ERR (&err_)

/* A value no call may leave in an out-parameter after a failure. */
#define GARBAGE 0x5A

static void check_names(context* ctx) {
  static const char* const reasons[] = {"PVLLM_FINISH_NONE", "PVLLM_FINISH_STOP",
                                        "PVLLM_FINISH_LENGTH", "PVLLM_FINISH_ABORT",
                                        "PVLLM_FINISH_ERROR"};
  int32_t i;
  CHECK(ctx, strcmp(pvllm_status_to_string(PVLLM_STATUS_TIMEOUT), "PVLLM_STATUS_TIMEOUT") == 0);
  CHECK(ctx, PVLLM_STATUS_TIMEOUT == 10);
  for (i = 0; i <= PVLLM_FINISH_ERROR; ++i) {
    if (strcmp(pvllm_finish_reason_to_string(i), reasons[i]) != 0) {
      fail(ctx, __LINE__, "finish reason %d is named %s, expected %s", (int)i,
           pvllm_finish_reason_to_string(i), reasons[i]);
    }
  }
  CHECK(ctx, strcmp(pvllm_finish_reason_to_string(5), "PVLLM_FINISH_UNKNOWN") == 0);
  CHECK(ctx, strcmp(pvllm_finish_reason_to_string(-1), "PVLLM_FINISH_UNKNOWN") == 0);
  CHECK(ctx, PVLLM_VERSION_NUMBER >= 200); /* the calls below are since 0.2 */
  CHECK(ctx, pvllm_version_number() >= 200);
}

/* Out-parameters after failures that need no engine, and after failures
 * on a NULL engine. */
static void check_out_params_without_engine(context* ctx) {
  pvllm_engine_params params;
  pvllm_engine* engine;
  pvllm_model_info* info;
  pvllm_output_batch* batch;
  pvllm_request request;
  uint64_t id;
  int32_t unfinished;
  size_t n;
  int32_t ids[4];
  char text[8];
  pvllm_memory_estimate estimate, estimate_before;

  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = "/nonexistent/pvllm/model";
  memset(&engine, GARBAGE, sizeof engine);
  EXPECT_STATUS(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_NOT_FOUND);
  CHECK(ctx, engine == NULL);
  memset(&info, GARBAGE, sizeof info);
  EXPECT_STATUS(ctx, pvllm_model_inspect(params.model_path, &info, ERR), PVLLM_STATUS_NOT_FOUND);
  CHECK(ctx, info == NULL);
  memset(&info, GARBAGE, sizeof info);
  EXPECT_STATUS(ctx, pvllm_model_inspect_random("no-such-shape", &info, ERR),
                PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, info == NULL);

  pvllm_memory_estimate_init(&estimate, sizeof estimate);
  estimate.num_blocks = 1234;
  estimate_before = estimate;
  EXPECT_STATUS(ctx, pvllm_estimate_memory(&params, &estimate, ERR), PVLLM_STATUS_NOT_FOUND);
  CHECK(ctx, memcmp(&estimate, &estimate_before, sizeof estimate) == 0);

  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "x";
  id = 77;
  EXPECT_STATUS(ctx, pvllm_submit(NULL, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, id == 0);
  unfinished = 5;
  EXPECT_STATUS(ctx, pvllm_step(NULL, &unfinished, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, unfinished == 0);
  memset(&batch, GARBAGE, sizeof batch);
  EXPECT_STATUS(ctx, pvllm_poll(NULL, 0, &batch, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, batch == NULL);
  memset(&batch, GARBAGE, sizeof batch);
  EXPECT_STATUS(ctx, pvllm_poll_request(NULL, 1, 0, &batch, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, batch == NULL);
  n = 9;
  EXPECT_STATUS(ctx, pvllm_tokenize(NULL, "a", 1, ids, 4, &n, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, n == 0);
  n = 9;
  EXPECT_STATUS(ctx, pvllm_detokenize(NULL, ids, 0, text, sizeof text, &n, ERR),
                PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, n == 0);
  EXPECT_STATUS(ctx, pvllm_detach(NULL, 1, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(ctx, pvllm_wait(NULL, 1, 0, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
}

/* Out-parameters after failures on a live engine. */
static void check_out_params_with_engine(context* ctx, pvllm_engine* engine, const char* path) {
  pvllm_request request;
  pvllm_sampling_params sampling;
  pvllm_output_batch* batch;
  pvllm_stats stats, stats_before;
  pvllm_model_info* info = NULL;
  pvllm_model_config config, config_before;
  pvllm_tensor_info tensor, tensor_before;
  uint64_t id;
  size_t n;
  int32_t ids[1];
  char text[1];
  pvllm_error* error = NULL;

  pvllm_sampling_params_init(&sampling, sizeof sampling);
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "hello";
  request.sampling = &sampling;

  sampling.top_p = 0.0f; /* out of range */
  id = 77;
  EXPECT_STATUS(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, id == 0);
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  request.delivery = 7;
  id = 77;
  EXPECT_STATUS(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, id == 0);
  request.delivery = PVLLM_DELIVERY_SHARED;

  memset(&batch, GARBAGE, sizeof batch);
  EXPECT_STATUS(ctx, pvllm_poll_request(engine, 424242, 0, &batch, ERR), PVLLM_STATUS_NOT_FOUND);
  CHECK(ctx, batch == NULL);
  EXPECT_STATUS(ctx, pvllm_poll_request(engine, 1, 0, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT);

  /* BUFFER_TOO_SMALL reports the size needed; other failures leave 0. */
  n = 9;
  EXPECT_STATUS(ctx, pvllm_tokenize(engine, "hello world", 1, ids, 1, &n, ERR),
                PVLLM_STATUS_BUFFER_TOO_SMALL);
  CHECK(ctx, n > 1);
  n = 9;
  EXPECT_STATUS(ctx, pvllm_tokenize(engine, NULL, 1, ids, 1, &n, ERR),
                PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, n == 0);
  ids[0] = 1 << 30; /* outside the vocabulary */
  n = 9;
  EXPECT_STATUS(ctx, pvllm_detokenize(engine, ids, 1, text, sizeof text, &n, ERR),
                PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, n == 0);

  /* Structs the library fills are left as they were on failure. */
  memset(&stats, GARBAGE, sizeof stats);
  stats.struct_size = 3;
  stats_before = stats;
  EXPECT_STATUS(ctx, pvllm_get_stats(engine, &stats, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, memcmp(&stats, &stats_before, sizeof stats) == 0);

  if (pvllm_model_inspect(path, &info, &error) != PVLLM_STATUS_OK) {
    fail(ctx, __LINE__, "inspect: %s", pvllm_error_message(error));
    pvllm_error_free(error);
    return;
  }
  memset(&config, GARBAGE, sizeof config);
  config.struct_size = 2;
  config_before = config;
  EXPECT_STATUS(ctx, pvllm_model_info_config(info, &config, ERR), PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, memcmp(&config, &config_before, sizeof config) == 0);
  memset(&tensor, GARBAGE, sizeof tensor);
  tensor_before = tensor;
  EXPECT_STATUS(ctx, pvllm_model_info_tensor(info, 100000, &tensor, ERR),
                PVLLM_STATUS_INVALID_ARGUMENT);
  CHECK(ctx, memcmp(&tensor, &tensor_before, sizeof tensor) == 0);
  pvllm_model_info_free(info);
}

/* Steps until `id` has an event, with waits that return at once. */
static int step_until_ready(pvllm_engine* engine, uint64_t id) {
  int i;
  for (i = 0; i < 1000; ++i) {
    pvllm_status st = pvllm_wait(engine, id, 0, NULL);
    if (st != PVLLM_STATUS_TIMEOUT) return st == PVLLM_STATUS_OK;
    if (pvllm_step(engine, NULL, NULL) != PVLLM_STATUS_OK) return 0;
  }
  return 0;
}

/* A 0.1 caller's pvllm_request (no delivery field) is accepted and shared;
 * a 0.2 caller follows a PER_REQUEST request with wait + poll_request. */
static void check_requests(context* ctx, pvllm_engine* engine) {
  pvllm_request request;
  pvllm_sampling_params sampling;
  pvllm_output_batch* batch = NULL;
  uint64_t old_id = 0, id = 0;
  size_t i, num_tokens = 0, num_finished = 0;
  int over = 0, rounds = 0;
  pvllm_error* error = NULL;

  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.temperature = 0.0f;
  sampling.max_tokens = 4;
  sampling.ignore_eos = 1;

  memset(&request, 0, sizeof request);
  pvllm_request_init(&request, offsetof(pvllm_request, delivery));
  CHECK(ctx, request.struct_size == offsetof(pvllm_request, delivery));
  request.prompt_text = "old caller";
  request.sampling = &sampling;
  request.delivery = 1; /* beyond its struct_size: must be ignored */
  EXPECT_STATUS(ctx, pvllm_submit(engine, &request, &old_id, ERR), PVLLM_STATUS_OK);
  CHECK(ctx, old_id != 0);

  pvllm_request_init(&request, sizeof request);
  CHECK(ctx, request.delivery == PVLLM_DELIVERY_SHARED);
  request.prompt_text = "new caller";
  request.sampling = &sampling;
  request.delivery = PVLLM_DELIVERY_PER_REQUEST;
  EXPECT_STATUS(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_OK);

  {
    pvllm_status st = pvllm_wait(engine, id, 0, &error);
    CHECK(ctx, st == PVLLM_STATUS_TIMEOUT);
    CHECK(ctx, pvllm_error_status(error) == PVLLM_STATUS_TIMEOUT);
    pvllm_error_free(error);
    error = NULL;
  }
  while (!over && rounds++ < 100) {
    if (!step_until_ready(engine, id)) {
      fail(ctx, __LINE__, "request %llu never made an event", (unsigned long long)id);
      return;
    }
    if (pvllm_poll_request(engine, id, 0, &batch, &error) != PVLLM_STATUS_OK) {
      fail(ctx, __LINE__, "poll_request: %s", pvllm_error_message(error));
      pvllm_error_free(error);
      return;
    }
    for (i = 0; i < pvllm_output_batch_size(batch); ++i) {
      const pvllm_output* out = pvllm_output_batch_get(batch, i);
      CHECK(ctx, out->request_id == id);
      CHECK(ctx, out->struct_size == sizeof(pvllm_output));
      CHECK(ctx, PVLLM_STRUCT_HAS(out, pvllm_output, request_finished));
      CHECK(ctx, !over); /* nothing after the last event */
      num_tokens += out->num_token_ids;
      if (out->finish_reason != PVLLM_FINISH_NONE) ++num_finished;
      if (out->request_finished) over = 1;
    }
    pvllm_output_batch_free(batch);
    batch = NULL;
  }
  CHECK(ctx, over);
  CHECK(ctx, num_tokens == 4);
  CHECK(ctx, num_finished == 1);
  EXPECT_STATUS(ctx, pvllm_wait(engine, id, 0, ERR), PVLLM_STATUS_NOT_FOUND);

  /* The old caller's request went to the engine-wide poll. */
  {
    int32_t unfinished = 1;
    while (unfinished > 0 && rounds++ < 200) pvllm_step(engine, &unfinished, NULL);
  }
  if (pvllm_poll(engine, 0, &batch, &error) != PVLLM_STATUS_OK) {
    fail(ctx, __LINE__, "poll: %s", pvllm_error_message(error));
    pvllm_error_free(error);
    return;
  }
  num_tokens = 0;
  over = 0;
  for (i = 0; i < pvllm_output_batch_size(batch); ++i) {
    const pvllm_output* out = pvllm_output_batch_get(batch, i);
    CHECK(ctx, out->request_id == old_id);
    num_tokens += out->num_token_ids;
    if (out->request_finished) over = 1;
  }
  pvllm_output_batch_free(batch);
  CHECK(ctx, over);
  CHECK(ctx, num_tokens == 4);
}

int pvllm_c_contract_checks(const char* model_path, char* failure, size_t failure_len) {
  context ctx;
  pvllm_engine_params params;
  pvllm_engine* engine = NULL;
  pvllm_error* error = NULL;

  ctx.failure = failure;
  ctx.failure_len = failure_len;
  ctx.failed = 0;
  if (failure_len > 0) failure[0] = '\0';

  check_names(&ctx);
  check_out_params_without_engine(&ctx);

  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  params.num_kv_blocks = 64;
  params.num_threads = 1;
  if (pvllm_engine_create(&params, &engine, &error) != PVLLM_STATUS_OK) {
    fail(&ctx, __LINE__, "create %s: %s", model_path, pvllm_error_message(error));
    pvllm_error_free(error);
    return 1;
  }
  check_out_params_with_engine(&ctx, engine, model_path);
  check_requests(&ctx, engine);
  pvllm_engine_destroy(engine);
  return ctx.failed;
}
