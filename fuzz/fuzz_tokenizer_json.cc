// tokenizer.json: the input is the file's text, optionally followed by a
// NUL byte and the text of the tokenizer_config.json beside it (which names
// BOS and EOS); a tokenizer that loads is exercised.
#include <memory>
#include <string>
#include <string_view>

#include "core/tokenizer/json_tokenizer.h"
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<pvllm::Tokenizer> tok;
  if (pvllm::JsonTokenizer::load_from_text(text, "", &tok).ok())
    pvllm::fuzz::exercise_tokenizer(*tok);
  return 0;
}
