// Generates a continuation of a prompt with pvllm's C++ header (C++17):
// the same program as examples/c/generate.c, with RAII handles and
// exceptions instead of status checks and frees.
// Usage: generate MODEL_PATH "PROMPT"
#include <cstdio>
#include <pvllm/pvllm.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_PATH PROMPT\n", argv[0]);
    return 2;
  }
  try {
    pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
    params.model_path = argv[1];
    params.kv_cache_bytes = 64 << 20;  // 64 MiB of KV cache is plenty here
    pvllm::cxx::Engine engine(params);

    pvllm_sampling_params sampling = pvllm::cxx::defaults<pvllm_sampling_params>();
    sampling.temperature = 0.0f;  // greedy
    sampling.max_tokens = 64;
    engine.submit(argv[2], sampling);

    std::printf("%s", argv[2]);
    bool request_failed = false;
    for (int32_t num_unfinished = 1; num_unfinished > 0;) {
      num_unfinished = engine.step();
      // The batch, and every pointer in its events, lives until the loop ends.
      for (const pvllm_output& out : engine.poll()) {
        std::fwrite(out.text, 1, out.text_len, stdout);
        if (out.finish_reason == PVLLM_FINISH_ERROR) {
          std::fprintf(stderr, "\nrequest failed: %s\n", out.error_message);
          request_failed = true;
        }
      }
      std::fflush(stdout);
    }
    std::printf("\n");
    return request_failed ? 1 : 0;
  } catch (const pvllm::cxx::Error& e) {
    std::fprintf(stderr, "%s (%s)\n", e.what(), e.status_name());
    return 1;
  }
}
