// pvllm_make_vocab_gguf FOLDER PRE OUT.gguf: writes the vocabulary-only
// GGUF of the tokenizer.json in FOLDER (tests/util/gguf_vocab_writer.h),
// with tokenizer.ggml.pre = PRE, for scripts/reference/make_gguf_vocab_refs.sh.
#include <cstdio>

#include "tests/util/gguf_vocab_writer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s FOLDER PRE OUT.gguf\n", argv[0]);
    return 2;
  }
  pvllm::testing::GgufWriter writer;
  const pvllm::Status st = pvllm::testing::make_hf_vocab_gguf(argv[1], argv[2], &writer);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  writer.write(argv[3]);
  return 0;
}
