// The normalizers of tokenizer.json.
#include "core/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "core/tokenizer/pieces.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;

// A Unicode normalization form through utf8proc.
class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(utf8proc_option_t options) : options_(options) {}
  Status apply(std::string* text) const override {
    if (text->empty()) return Status::Ok();
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text->data()),
                     static_cast<utf8proc_ssize_t>(text->size()), &mapped, options_);
    if (length < 0) {
      return InvalidArgument(std::string("cannot normalize the text: ") + utf8proc_errmsg(length));
    }
    text->assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
    std::free(mapped);
    return Status::Ok();
  }

 private:
  utf8proc_option_t options_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  Status apply(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
    return Status::Ok();
  }

 private:
  std::string prefix_;
};

class ReplaceString : public Normalizer {
 public:
  ReplaceString(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  Status apply(std::string* text) const override {
    if (!from_.empty() && text->find(from_) != std::string::npos) {
      *text = replace_all(*text, from_, to_);
    }
    return Status::Ok();
  }

 private:
  std::string from_, to_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  Status apply(std::string* text) const override {
    for (const auto& step : steps_) PVLLM_RETURN_IF_ERROR(step->apply(text));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

Status parse_replace(const json& config, const std::string& path,
                     std::unique_ptr<Normalizer>* out) {
  std::string pattern, content;
  bool is_regex = false;
  PVLLM_RETURN_IF_ERROR(read_pattern(config, path, &pattern, &is_regex));
  if (is_regex) return unsupported(field_path(path, "pattern"), config["pattern"]);
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "content", &content));
  *out = std::make_unique<ReplaceString>(std::move(pattern), std::move(content));
  return Status::Ok();
}

Status parse_sequence(const json& config, const std::string& path,
                      std::unique_ptr<Normalizer>* out) {
  const json* items = nullptr;
  PVLLM_RETURN_IF_ERROR(read_array(config, path, "normalizers", &items));
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (size_t i = 0; i < items->size(); ++i) {
    std::unique_ptr<Normalizer> step;
    PVLLM_RETURN_IF_ERROR(
        parse_normalizer((*items)[i], index_path(field_path(path, "normalizers"), i), &step));
    if (step) steps.push_back(std::move(step));
  }
  *out = std::make_unique<SequenceNormalizer>(std::move(steps));
  return Status::Ok();
}

}  // namespace

Status parse_normalizer(const json& config, const std::string& path,
                        std::unique_ptr<Normalizer>* out) {
  out->reset();
  if (config.is_null()) return Status::Ok();
  if (!config.is_object()) return malformed(path, "is not an object");
  std::string type;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "type", &type));
  const auto stable = static_cast<int>(UTF8PROC_STABLE);
  auto form = [&](int options) {
    *out = std::make_unique<UnicodeForm>(static_cast<utf8proc_option_t>(stable | options));
    return Status::Ok();
  };
  if (type == "NFC") return form(UTF8PROC_COMPOSE);
  if (type == "NFD") return form(UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return form(UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return form(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Prepend") {
    std::string prefix;
    PVLLM_RETURN_IF_ERROR(read_string(config, path, "prepend", &prefix));
    *out = std::make_unique<Prepend>(std::move(prefix));
    return Status::Ok();
  }
  if (type == "Replace") return parse_replace(config, path, out);
  if (type == "Sequence") return parse_sequence(config, path, out);
  return unsupported(field_path(path, "type"), type);
}

}  // namespace pvllm
