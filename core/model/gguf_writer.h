// Writing GGUF metadata: a version-3 GGUF file with no tensors holding
// chosen entries of a gguf::Metadata, each with its own value type. How a
// .pvllm file converted from a GGUF carries the tokenizer and chat
// templates, which a GGUF keeps in its `tokenizer.*` keys (pvllm_writer.cc);
// gguf::parse_metadata reads them back.
#pragma once

#include <functional>
#include <string>

#include "core/model/gguf_file.h"

namespace pvllm::gguf {

// The bytes of a GGUF file holding, in order, the entries of `metadata`
// whose keys `keep` accepts.
std::string write_metadata(const Metadata& metadata,
                           const std::function<bool(const std::string& key)>& keep);

// The keys of the tokenizer and chat templates ("tokenizer." ...), with
// general.name (the tokenizer reads it).
bool is_tokenizer_key(const std::string& key);

}  // namespace pvllm::gguf
