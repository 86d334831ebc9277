// The decoders of tokenizer.json as per-token byte rules.
#include "core/tokenizer/token_decoder.h"

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pieces.h"
#include "core/tokenizer/utf8.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;

bool is_single_char(const std::string& s) {
  return !s.empty() && utf8_char_length(static_cast<unsigned char>(s[0])) == s.size();
}

}  // namespace

Status TokenDecoder::parse(const json& config, std::unique_ptr<TokenDecoder>* out) {
  auto decoder = std::unique_ptr<TokenDecoder>(new TokenDecoder());
  if (config.is_null()) return unsupported("decoder", config);
  PVLLM_RETURN_IF_ERROR(decoder->parse_step(config, "decoder"));
  *out = std::move(decoder);
  return Status::Ok();
}

Status TokenDecoder::parse_step(const json& config, const std::string& path) {
  if (!config.is_object()) return malformed(path, "is not an object");
  std::string type;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "type", &type));
  const std::string type_path = field_path(path, "type");
  if (after_strip_ && type != "Sequence") {
    return unsupported(type_path + " after Strip", type);
  }
  if (type == "Sequence") {
    const json* items = nullptr;
    PVLLM_RETURN_IF_ERROR(read_array(config, path, "decoders", &items));
    for (size_t i = 0; i < items->size(); ++i) {
      PVLLM_RETURN_IF_ERROR(parse_step((*items)[i], index_path(field_path(path, "decoders"), i)));
    }
  } else if (type == "ByteLevel") {
    steps_.push_back({Step::Kind::kByteLevel, "", ""});
  } else if (type == "ByteFallback") {
    if (fused_) return unsupported(type_path + " after Fuse", type);
    steps_.push_back({Step::Kind::kByteFallback, "", ""});
  } else if (type == "Replace") {
    Step step{Step::Kind::kReplace, "", ""};
    bool is_regex = false;
    PVLLM_RETURN_IF_ERROR(read_pattern(config, path, &step.from, &is_regex));
    if (is_regex || step.from.empty()) {
      return unsupported(field_path(path, "pattern"), config["pattern"]);
    }
    if (fused_ && !is_single_char(step.from)) {
      return unsupported(field_path(path, "pattern") + " after Fuse", config["pattern"]);
    }
    PVLLM_RETURN_IF_ERROR(read_string(config, path, "content", &step.to));
    steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    std::string replacement;
    PVLLM_RETURN_IF_ERROR(read_string(config, path, "replacement", &replacement));
    if (replacement.empty()) return malformed(field_path(path, "replacement"), "is empty");
    PVLLM_RETURN_IF_ERROR(
        require_one_of(config, path, "prepend_scheme", {"always", "first", "never"}));
    bool add_prefix_space = true;
    PVLLM_RETURN_IF_ERROR(read_bool(config, path, "add_prefix_space", true, &add_prefix_space));
    const bool strips = config.contains("prepend_scheme") && config["prepend_scheme"].is_string()
                            ? config["prepend_scheme"] != "never"
                            : add_prefix_space;
    steps_.push_back({Step::Kind::kReplace, replacement, " "});
    if (strips) num_leading_spaces_stripped_ = 1;
  } else if (type == "Fuse") {
    fused_ = true;
  } else if (type == "Strip") {
    if (!fused_) return unsupported(type_path + " before Fuse", type);
    PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "content", {" "}));
    PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "stop", {0}));
    int64_t start = 0;
    PVLLM_RETURN_IF_ERROR(read_int(config, path, "start", 0, &start));
    if (start < 0 || start > 64) return unsupported(field_path(path, "start"), start);
    num_leading_spaces_stripped_ = static_cast<int>(start);
    after_strip_ = true;
  } else {
    return unsupported(type_path, type);
  }
  return Status::Ok();
}

std::string TokenDecoder::token_bytes(const std::string& token) const {
  std::string text = token;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kReplace:
        text = replace_all(text, step.from, step.to);
        break;
      case Step::Kind::kByteFallback: {
        const int byte = byte_token_value(text);
        if (byte >= 0) text.assign(1, static_cast<char>(byte));
        break;
      }
      case Step::Kind::kByteLevel: {
        std::string bytes;
        // A token outside the alphabet stays as it is.
        if (byte_level_decode(text, &bytes)) text = std::move(bytes);
        break;
      }
    }
  }
  return text;
}

}  // namespace pvllm
