/* Misuse of the C ABI, written in C99 the way a C caller would write it:
 * NULL pointers, wrong struct sizes, values out of range, missing files.
 * Every call must return the documented status with a non-empty message,
 * never crash. Called from a gtest in capi_test.cc. */
#include <pvllm/pvllm.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tests/integration/c_check.h"

int pvllm_c_misuse_checks(const char* model_path, char* failure, size_t failure_len);

/* Checks that a call failed with `want` and delivered a matching error
 * whose message contains `needle` (when not NULL); frees the error. */
static void expect_error(context* ctx, int line, const char* call, pvllm_status got,
                         pvllm_status want, pvllm_error* error, const char* needle) {
  const char* message = pvllm_error_message(error);
  if (got != want) {
    fail(ctx, line, "%s returned %s, expected %s (message: %s)", call, pvllm_status_to_string(got),
         pvllm_status_to_string(want), message);
  } else if (error == NULL) {
    fail(ctx, line, "%s returned %s but no error object", call, pvllm_status_to_string(got));
  } else if (pvllm_error_status(error) != want) {
    fail(ctx, line, "%s: the error object carries %s, the call returned %s", call,
         pvllm_status_to_string(pvllm_error_status(error)), pvllm_status_to_string(got));
  } else if (message[0] == '\0') {
    fail(ctx, line, "%s: empty error message", call);
  } else if (needle != NULL && strstr(message, needle) == NULL) {
    fail(ctx, line, "%s: message \"%s\" does not mention \"%s\"", call, message, needle);
  }
  pvllm_error_free(error);
}

#define EXPECT_ERROR(ctx, call, want, needle)                          \
  do {                                                                 \
    pvllm_error* err_ = NULL;                                          \
    pvllm_status st_;                                                  \
    (void)err_;                                                        \
    st_ = (call);                                                      \
    expect_error((ctx), __LINE__, #call, st_, (want), err_, (needle)); \
  } while (0)

/* The calls below pass `&err_`, the error slot EXPECT_ERROR declares. */
#define ERR (&err_)

static void check_versions_and_names(context* ctx) {
  char expected[32];
  static const char* const names[] = {"PVLLM_STATUS_OK",
                                      "PVLLM_STATUS_INVALID_ARGUMENT",
                                      "PVLLM_STATUS_NOT_FOUND",
                                      "PVLLM_STATUS_IO_ERROR",
                                      "PVLLM_STATUS_CORRUPT_MODEL",
                                      "PVLLM_STATUS_UNSUPPORTED",
                                      "PVLLM_STATUS_OUT_OF_MEMORY",
                                      "PVLLM_STATUS_INTERNAL",
                                      "PVLLM_STATUS_TOKENIZER_ERROR",
                                      "PVLLM_STATUS_BUFFER_TOO_SMALL"};
  int i;
  CHECK(ctx, pvllm_version_number() == PVLLM_VERSION_NUMBER);
  CHECK(ctx, pvllm_abi_version() == PVLLM_ABI_VERSION);
  snprintf(expected, sizeof(expected), "%d.%d.%d", PVLLM_VERSION_MAJOR, PVLLM_VERSION_MINOR,
           PVLLM_VERSION_PATCH);
  CHECK(ctx, strcmp(pvllm_version(), expected) == 0);
  for (i = 0; i <= (int)PVLLM_STATUS_BUFFER_TOO_SMALL; ++i) {
    if (strcmp(pvllm_status_to_string((pvllm_status)i), names[i]) != 0) {
      fail(ctx, __LINE__, "status %d is named %s, expected %s", i,
           pvllm_status_to_string((pvllm_status)i), names[i]);
    }
  }
  CHECK(ctx, strcmp(pvllm_status_to_string((pvllm_status)42), "PVLLM_STATUS_UNKNOWN") == 0);
  CHECK(ctx, strcmp(pvllm_status_to_string((pvllm_status)-1), "PVLLM_STATUS_UNKNOWN") == 0);
}

static void check_null_tolerance(context* ctx) {
  pvllm_error_free(NULL);
  pvllm_engine_destroy(NULL);
  pvllm_output_batch_free(NULL);
  pvllm_model_info_free(NULL);
  CHECK(ctx, pvllm_error_status(NULL) == PVLLM_STATUS_OK);
  CHECK(ctx, strcmp(pvllm_error_message(NULL), "") == 0);
  CHECK(ctx, pvllm_output_batch_size(NULL) == 0);
  CHECK(ctx, pvllm_output_batch_get(NULL, 0) == NULL);
  CHECK(ctx, pvllm_model_info_num_tensors(NULL) == 0);
}

static void check_create_misuse(context* ctx, const char* model_path) {
  pvllm_engine_params params;
  pvllm_engine* engine = (pvllm_engine*)&params; /* garbage the call must overwrite */
  const char* missing = "/nonexistent/pvllm-misuse-model";

  EXPECT_ERROR(ctx, pvllm_engine_create(NULL, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "params");
  CHECK(ctx, engine == NULL);
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_engine");
  /* Passing NULL for the error is allowed: only the status comes back. */
  CHECK(ctx, pvllm_engine_create(&params, NULL, NULL) == PVLLM_STATUS_INVALID_ARGUMENT);

  params.struct_size = 0;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
  /* One byte short of the struct as ABI version 1 had it (it ended at
   * kv_allocator; random_weights and later fields were appended). */
  params.struct_size = (uint32_t)offsetof(pvllm_engine_params, random_weights) - 1;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");

  pvllm_engine_params_init(&params, sizeof params);
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "model_path");
  params.model_path = missing;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_NOT_FOUND, missing);
  CHECK(ctx, engine == NULL);

  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  params.block_size = 12;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               NULL);
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  params.max_num_seqs = 0;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               NULL);
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  params.kv_cache_bytes = -1;
  EXPECT_ERROR(ctx, pvllm_engine_create(&params, &engine, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               NULL);
  CHECK(ctx, engine == NULL);
}

static void check_model_misuse(context* ctx, const char* model_path) {
  pvllm_model_info* info = NULL;
  pvllm_model_config config;
  pvllm_tensor_info tensor;
  pvllm_engine_params params;
  pvllm_memory_estimate estimate;

  EXPECT_ERROR(ctx, pvllm_model_inspect(NULL, &info, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "model_path");
  EXPECT_ERROR(ctx, pvllm_model_inspect(model_path, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_info");
  EXPECT_ERROR(ctx, pvllm_model_inspect("/nonexistent/pvllm-misuse-inspect", &info, ERR),
               PVLLM_STATUS_NOT_FOUND, "/nonexistent/pvllm-misuse-inspect");
  CHECK(ctx, info == NULL);

  pvllm_model_config_init(&config, sizeof config);
  EXPECT_ERROR(ctx, pvllm_model_info_config(NULL, &config, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "info");
  EXPECT_ERROR(ctx, pvllm_model_info_tensor(NULL, 0, &tensor, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "info");
  {
    pvllm_error* error = NULL;
    pvllm_status status = pvllm_model_inspect(model_path, &info, &error);
    if (status != PVLLM_STATUS_OK) {
      fail(ctx, __LINE__, "inspect %s: %s", model_path, pvllm_error_message(error));
      pvllm_error_free(error);
      return;
    }
  }
  EXPECT_ERROR(ctx, pvllm_model_info_config(info, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_config");
  config.struct_size = 0;
  EXPECT_ERROR(ctx, pvllm_model_info_config(info, &config, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
  EXPECT_ERROR(ctx, pvllm_model_info_tensor(info, pvllm_model_info_num_tensors(info), &tensor, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "out of range");
  EXPECT_ERROR(ctx, pvllm_model_info_tensor(info, 0, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_tensor");
  pvllm_model_info_free(info);

  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  pvllm_memory_estimate_init(&estimate, sizeof estimate);
  EXPECT_ERROR(ctx, pvllm_estimate_memory(NULL, &estimate, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "params");
  EXPECT_ERROR(ctx, pvllm_estimate_memory(&params, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_estimate");
  estimate.struct_size = 4;
  EXPECT_ERROR(ctx, pvllm_estimate_memory(&params, &estimate, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
}

/* Every bad submit is rejected with INVALID_ARGUMENT and changes nothing. */
static void check_submit_misuse(context* ctx, pvllm_engine* engine, int32_t max_model_len,
                                int32_t max_num_seqs) {
  pvllm_request request;
  pvllm_sampling_params sampling;
  uint64_t id = 7;
  int32_t valid_ids[8];
  int32_t long_prompt[300];
  size_t num_ids = 0;
  int32_t i;
  pvllm_error* error = NULL;
  pvllm_stats stats;

  if (pvllm_tokenize(engine, "a", 1, valid_ids, 8, &num_ids, &error) != PVLLM_STATUS_OK) {
    fail(ctx, __LINE__, "tokenize: %s", pvllm_error_message(error));
    pvllm_error_free(error);
    return;
  }

  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "Once upon a time";
  EXPECT_ERROR(ctx, pvllm_submit(NULL, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "engine");
  EXPECT_ERROR(ctx, pvllm_submit(engine, NULL, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "request");
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "out_request_id");
  request.struct_size = 0;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");

  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "Once upon a time";
  request.sampling = &sampling;
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.struct_size = 0;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.temperature = -1.0f;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "temperature");
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.top_p = 0.0f;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "top_p");
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.n = 0;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "n");
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.n = max_num_seqs + 1;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT, NULL);
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.num_stop = 1; /* stop is NULL */
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "stop");

  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "";
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "prompt");
  pvllm_request_init(&request, sizeof request);
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "prompt");
  request.prompt_text = "Once";
  request.prompt_token_ids = valid_ids;
  request.num_prompt_token_ids = num_ids;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "prompt");
  pvllm_request_init(&request, sizeof request);
  request.prompt_token_ids = valid_ids;
  request.num_prompt_token_ids = 0;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "prompt");
  {
    int32_t out_of_vocab[2];
    out_of_vocab[0] = valid_ids[0];
    out_of_vocab[1] = 1 << 30;
    request.prompt_token_ids = out_of_vocab;
    request.num_prompt_token_ids = 2;
    EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
                 NULL);
  }
  if (max_model_len + 1 > (int32_t)(sizeof(long_prompt) / sizeof(long_prompt[0]))) {
    fail(ctx, __LINE__, "max_model_len %d too large for this check", max_model_len);
    return;
  }
  for (i = 0; i < max_model_len + 1; ++i) long_prompt[i] = valid_ids[num_ids - 1];
  request.prompt_token_ids = long_prompt;
  request.num_prompt_token_ids = (size_t)max_model_len + 1;
  EXPECT_ERROR(ctx, pvllm_submit(engine, &request, &id, ERR), PVLLM_STATUS_INVALID_ARGUMENT, NULL);
  CHECK(ctx, id == 0); /* a failed submit leaves no id behind */

  pvllm_stats_init(&stats, sizeof stats);
  if (pvllm_get_stats(engine, &stats, &error) != PVLLM_STATUS_OK) {
    fail(ctx, __LINE__, "get_stats: %s", pvllm_error_message(error));
    pvllm_error_free(error);
    return;
  }
  CHECK(ctx, stats.num_waiting == 0 && stats.num_running == 0);
}

static void check_engine_misuse(context* ctx, pvllm_engine* engine) {
  pvllm_output_batch* batch = NULL;
  pvllm_stats stats;
  int32_t ids[4];
  char text[8];
  size_t n = 0;
  int32_t bad_id = 1 << 30;
  union {
    pvllm_stats stats;
    char bytes[sizeof(pvllm_stats) + 64];
  } newer;

  EXPECT_ERROR(ctx, pvllm_abort(NULL, 1, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "engine");
  EXPECT_ERROR(ctx, pvllm_abort(engine, 987654321, ERR), PVLLM_STATUS_NOT_FOUND, NULL);
  EXPECT_ERROR(ctx, pvllm_step(NULL, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "engine");
  EXPECT_ERROR(ctx, pvllm_poll(NULL, 0, &batch, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "engine");
  CHECK(ctx, batch == NULL);
  EXPECT_ERROR(ctx, pvllm_poll(engine, 0, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "out_batch");

  pvllm_stats_init(&stats, sizeof stats);
  EXPECT_ERROR(ctx, pvllm_get_stats(NULL, &stats, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "engine");
  EXPECT_ERROR(ctx, pvllm_get_stats(engine, NULL, ERR), PVLLM_STATUS_INVALID_ARGUMENT, "out_stats");
  stats.struct_size = 0;
  EXPECT_ERROR(ctx, pvllm_get_stats(engine, &stats, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
  /* Below ABI 1's struct (which ended before 0.4's backend field). */
  stats.struct_size = (uint32_t)offsetof(pvllm_stats, backend) - 8;
  EXPECT_ERROR(ctx, pvllm_get_stats(engine, &stats, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "struct_size");
  /* A caller built against a newer header passes a larger struct: accepted. */
  memset(&newer, 0, sizeof(newer));
  newer.stats.struct_size = (uint32_t)sizeof(newer);
  {
    pvllm_error* error = (pvllm_error*)&newer; /* must be reset to NULL on success */
    CHECK(ctx, pvllm_get_stats(engine, &newer.stats, &error) == PVLLM_STATUS_OK);
    CHECK(ctx, error == NULL);
    CHECK(ctx, newer.stats.num_blocks_total > 0);
  }

  EXPECT_ERROR(ctx, pvllm_tokenize(NULL, "a", 1, ids, 4, &n, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "engine");
  EXPECT_ERROR(ctx, pvllm_tokenize(engine, NULL, 1, ids, 4, &n, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "text");
  EXPECT_ERROR(ctx, pvllm_tokenize(engine, "a", 1, ids, 4, NULL, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "out_num_ids");
  EXPECT_ERROR(ctx, pvllm_tokenize(engine, "a", 1, NULL, 4, &n, ERR), PVLLM_STATUS_INVALID_ARGUMENT,
               "ids");
  EXPECT_ERROR(ctx, pvllm_detokenize(engine, &bad_id, 1, text, sizeof(text), &n, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "vocabulary");
  EXPECT_ERROR(ctx, pvllm_detokenize(engine, ids, 1, text, sizeof(text), NULL, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "out_len");
  EXPECT_ERROR(ctx, pvllm_detokenize(engine, NULL, 2, text, sizeof(text), &n, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "ids");
  EXPECT_ERROR(ctx, pvllm_detokenize(engine, ids, 1, NULL, 8, &n, ERR),
               PVLLM_STATUS_INVALID_ARGUMENT, "text is NULL");
}

int pvllm_c_misuse_checks(const char* model_path, char* failure, size_t failure_len) {
  context ctx;
  pvllm_engine_params params;
  pvllm_engine* engine = NULL;
  pvllm_error* error = NULL;
  const int32_t max_model_len = 64;
  const int32_t max_num_seqs = 4;

  ctx.failure = failure;
  ctx.failure_len = failure_len;
  ctx.failed = 0;
  if (failure_len > 0) failure[0] = '\0';

  check_versions_and_names(&ctx);
  check_null_tolerance(&ctx);
  check_create_misuse(&ctx, model_path);
  check_model_misuse(&ctx, model_path);

  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_path;
  params.num_kv_blocks = 32;
  params.max_model_len = max_model_len;
  params.max_num_seqs = max_num_seqs;
  params.num_threads = 1;
  if (pvllm_engine_create(&params, &engine, &error) != PVLLM_STATUS_OK) {
    fail(&ctx, __LINE__, "create %s: %s", model_path, pvllm_error_message(error));
    pvllm_error_free(error);
    return 1;
  }
  CHECK(&ctx, error == NULL);
  check_submit_misuse(&ctx, engine, max_model_len, max_num_seqs);
  check_engine_misuse(&ctx, engine);

  /* The destroy pattern: destroy, forget the pointer, destroying NULL is a no-op. */
  pvllm_engine_destroy(engine);
  engine = NULL;
  pvllm_engine_destroy(engine);
  return ctx.failed;
}
