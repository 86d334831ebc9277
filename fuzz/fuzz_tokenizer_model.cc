// tokenizer.model: the input is the serialized sentencepiece model; a
// tokenizer that loads is exercised.
#include <memory>
#include <string_view>

#include "core/tokenizer/sentencepiece_tokenizer.h"
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<pvllm::Tokenizer> tok;
  if (pvllm::SentencePieceTokenizer::load_from_bytes(bytes, &tok).ok()) {
    pvllm::fuzz::exercise_tokenizer(*tok);
  }
  return 0;
}
