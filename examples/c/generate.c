/* Generates a continuation of a prompt with the pvllm C API.
 * Usage: generate MODEL_PATH "PROMPT" */
#include <pvllm/pvllm.h>
#include <stdio.h>

/* Prints the error, frees it and returns 1 when status is not OK. */
static int failed(const char* what, pvllm_status status, pvllm_error* error) {
  if (status == PVLLM_STATUS_OK) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, pvllm_error_message(error),
          pvllm_status_to_string(status));
  pvllm_error_free(error);
  return 1;
}

int main(int argc, char** argv) {
  pvllm_engine_params params;
  pvllm_sampling_params sampling;
  pvllm_request request;
  pvllm_engine* engine = NULL;
  pvllm_error* error = NULL;
  uint64_t id = 0;
  int32_t num_unfinished = 1;
  int rc = 1, request_failed = 0;

  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL_PATH PROMPT\n", argv[0]);
    return 2;
  }
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = argv[1];
  params.kv_cache_bytes = 64 << 20; /* 64 MiB of KV cache is plenty here */
  if (failed("create", pvllm_engine_create(&params, &engine, &error), error)) return 1;

  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.temperature = 0.0f; /* greedy */
  sampling.max_tokens = 64;
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = argv[2];
  request.sampling = &sampling;
  if (failed("submit", pvllm_submit(engine, &request, &id, &error), error)) goto done;

  printf("%s", argv[2]);
  while (num_unfinished > 0) {
    pvllm_output_batch* batch = NULL;
    size_t i;
    if (failed("step", pvllm_step(engine, &num_unfinished, &error), error)) goto done;
    if (failed("poll", pvllm_poll(engine, 0, &batch, &error), error)) goto done;
    for (i = 0; i < pvllm_output_batch_size(batch); ++i) {
      const pvllm_output* out = pvllm_output_batch_get(batch, i);
      fwrite(out->text, 1, out->text_len, stdout);
      if (out->finish_reason == PVLLM_FINISH_ERROR) {
        fprintf(stderr, "\nrequest failed: %s\n", out->error_message);
        request_failed = 1;
      }
    }
    fflush(stdout);
    pvllm_output_batch_free(batch);
  }
  printf("\n");
  rc = request_failed;

done:
  pvllm_engine_destroy(engine);
  return rc;
}
