// What the tokenizer targets do with a tokenizer that loaded: encode and
// decode a few fixed texts, decode every id near the ends of the
// vocabulary, and stream ids through the incremental detokenizer. Any
// Status is fine; a crash, leak or sanitizer report is not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace pvllm::fuzz {

inline void exercise_tokenizer(const Tokenizer& tok) {
  static const char* const kTexts[] = {"",
                                       "Hello world",
                                       " leading and  double  spaces\n\ttabs",
                                       "caf\xc3\xa9 \xe2\x82\xac 123 \xf0\x9f\x98\x80",
                                       "<s></s><|im_start|>user<|im_end|>",
                                       "\xff\xfe invalid utf-8 \xc3"};
  for (const char* text : kTexts) {
    for (bool add_special : {false, true}) {
      std::vector<int32_t> ids;
      if (!tok.encode(text, add_special, &ids).ok()) continue;
      std::string back;
      (void)tok.decode(ids, &back);
    }
  }
  const int32_t n = tok.vocab_size();
  std::vector<int32_t> ids;
  for (int32_t id = -2; id < n + 2 && id < 300; ++id) ids.push_back(id);
  for (int32_t id = n - 300 > 300 ? n - 300 : 300; id < n + 2; ++id) ids.push_back(id);
  std::string text;
  (void)tok.decode(ids, &text);
  IncrementalDetokenizer detok(&tok, tok.bos_id());
  for (int32_t id : ids) {
    (void)tok.id_to_token(id);
    if (tok.is_valid_id(id)) {
      (void)tok.token_bytes(id);
      (void)detok.push(id);
    }
  }
  (void)detok.flush();
  (void)tok.token_to_id("<s>");
}

}  // namespace pvllm::fuzz
