// Small helpers on token pieces shared by the tokenizers: replacing a
// substring everywhere, and reading byte-fallback tokens ("<0xAB>").
#pragma once

#include <string>
#include <string_view>

namespace pvllm {

// `text` with every occurrence of `from` (non-empty) replaced by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// "<0xAB>" -> 0xAB; -1 when `token` is not in that form.
int byte_token_value(std::string_view token);

}  // namespace pvllm
