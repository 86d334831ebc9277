// pvllm_make_tiny_model DIR: writes a tiny random-weight Hugging Face
// model (and its tokenizer) into DIR, for demos on machines without a real
// checkpoint.
#include <cstdio>
#include <filesystem>

#include "tests/util/tiny_model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  pvllm::testing::TinyModelSpec spec;
  spec.hidden_size = 64;
  spec.num_layers = 2;
  spec.max_position_embeddings = 512;
  std::printf("%s\n", pvllm::testing::write_tiny_hf_model(argv[1], spec).c_str());
  return 0;
}
