// PCRE2 behind Regex.
#include "core/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace pvllm {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Regex::~Regex() = default;

Status Regex::compile(const std::string& pattern, bool literal, std::unique_ptr<Regex>* out) {
  // PCRE2_LITERAL admits no property options (a literal needs none).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Unsupported("tokenizer.json: the pattern " + pattern + " does not compile at offset " +
                       std::to_string(error_offset) + ": " +
                       reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  std::unique_ptr<Regex> regex(new Regex());
  regex->impl_ = std::make_unique<Impl>();
  regex->impl_->code = code;
  *out = std::move(regex);
  return Status::Ok();
}

Status Regex::find_all(std::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const {
  matches->clear();
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start < text.size()) {
    const int rc =
        pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return Status(StatusCode::kTokenizerError, std::string("pre-tokenizer pattern failed: ") +
                                                     reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches->emplace_back(begin, end);
      start = end;
    } else {
      // An empty match: step over one character.
      start = begin + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
    }
  }
  pcre2_match_data_free(data);
  return Status::Ok();
}

}  // namespace pvllm
