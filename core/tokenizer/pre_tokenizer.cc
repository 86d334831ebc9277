// The pre-tokenizers of tokenizer.json.
#include "core/tokenizer/pre_tokenizer.h"

#include <utility>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/regex.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;

// GPT-2's word pattern, which ByteLevel applies when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What happens to the matches of a split pattern.
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

Status parse_behavior(const json& config, const std::string& path, SplitBehavior* out) {
  std::string name;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "behavior", &name));
  if (name == "Isolated")
    *out = SplitBehavior::kIsolated;
  else if (name == "Removed")
    *out = SplitBehavior::kRemoved;
  else if (name == "MergedWithPrevious")
    *out = SplitBehavior::kMergedWithPrevious;
  else if (name == "MergedWithNext")
    *out = SplitBehavior::kMergedWithNext;
  else if (name == "Contiguous")
    *out = SplitBehavior::kContiguous;
  else
    return unsupported(field_path(path, "behavior"), name);
  return Status::Ok();
}

// One stretch of a split text: a match of the pattern or the gap between two.
struct Part {
  std::string text;
  bool is_match;
};

// `text` as alternating gaps and matches of `regex` (none empty).
Status split_parts(const Regex& regex, const std::string& text, std::vector<Part>* parts) {
  std::vector<std::pair<size_t, size_t>> matches;
  PVLLM_RETURN_IF_ERROR(regex.find_all(text, &matches));
  size_t pos = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > pos) parts->push_back({text.substr(pos, begin - pos), false});
    parts->push_back({text.substr(begin, end - begin), true});
    pos = end;
  }
  if (pos < text.size()) parts->push_back({text.substr(pos), false});
  return Status::Ok();
}

// Cuts `text` at the matches of `regex`, placing each match per `behavior`;
// appends the pieces to *out.
Status split_text(const Regex& regex, SplitBehavior behavior, const std::string& text,
                  std::vector<std::string>* out) {
  std::vector<Part> parts;
  PVLLM_RETURN_IF_ERROR(split_parts(regex, text, &parts));
  const size_t first = out->size();
  bool previous_match = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& part = parts[i];
    const bool extends_last =
        out->size() > first &&
        ((behavior == SplitBehavior::kMergedWithPrevious && part.is_match && !previous_match) ||
         (behavior == SplitBehavior::kContiguous && part.is_match && previous_match) ||
         (behavior == SplitBehavior::kMergedWithNext && !part.is_match && previous_match));
    previous_match = part.is_match;
    if (behavior == SplitBehavior::kRemoved && part.is_match) continue;
    if (extends_last) {
      out->back() += part.text;
    } else {
      out->push_back(std::move(part.text));
    }
  }
  return Status::Ok();
}

class Split : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> regex, SplitBehavior behavior)
      : regex_(std::move(regex)), behavior_(behavior) {}
  Status apply(std::vector<std::string>* pieces, bool) const override {
    std::vector<std::string> out;
    for (const std::string& piece : *pieces) {
      PVLLM_RETURN_IF_ERROR(split_text(*regex_, behavior_, piece, &out));
    }
    *pieces = std::move(out);
    return Status::Ok();
  }

 private:
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
};

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  Status apply(std::vector<std::string>* pieces, bool) const override {
    std::vector<std::string> words;
    for (std::string& piece : *pieces) {
      if (add_prefix_space_ && (piece.empty() || piece.front() != ' ')) piece = " " + piece;
      if (regex_) {
        PVLLM_RETURN_IF_ERROR(split_text(*regex_, SplitBehavior::kIsolated, piece, &words));
      } else {
        words.push_back(std::move(piece));
      }
    }
    pieces->clear();
    for (const std::string& word : words) {
      pieces->emplace_back();
      byte_level_encode(word, &pieces->back());
    }
    return Status::Ok();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // null without use_regex
};

enum class PrependScheme { kAlways, kFirst, kNever };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  Status apply(std::vector<std::string>* pieces, bool first_segment) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pieces->size(); ++i) {
      std::string text = replace_spaces((*pieces)[i]);
      const bool prepend = scheme_ == PrependScheme::kAlways ||
                           (scheme_ == PrependScheme::kFirst && first_segment && i == 0);
      if (prepend && text.compare(0, replacement_.size(), replacement_) != 0) {
        text.insert(0, replacement_);
      }
      if (split_) {
        split_before_replacements(text, &out);
      } else {
        out.push_back(std::move(text));
      }
    }
    *pieces = std::move(out);
    return Status::Ok();
  }

 private:
  std::string replace_spaces(const std::string& text) const {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
      if (c == ' ') {
        out += replacement_;
      } else {
        out.push_back(c);
      }
    }
    return out;
  }
  // Each piece starts at a replacement character (MergedWithNext).
  void split_before_replacements(const std::string& text, std::vector<std::string>* out) const {
    size_t start = 0;
    for (size_t hit = text.find(replacement_, 1); hit != std::string::npos;
         hit = text.find(replacement_, hit + replacement_.size())) {
      if (hit > start) out->push_back(text.substr(start, hit - start));
      start = hit;
    }
    if (start < text.size()) out->push_back(text.substr(start));
  }

  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  Status apply(std::vector<std::string>* pieces, bool first_segment) const override {
    for (const auto& step : steps_) PVLLM_RETURN_IF_ERROR(step->apply(pieces, first_segment));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Status parse_split(const json& config, const std::string& path,
                   std::unique_ptr<PreTokenizer>* out) {
  PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "invert", {false}));
  std::string pattern;
  bool is_regex = false;
  PVLLM_RETURN_IF_ERROR(read_pattern(config, path, &pattern, &is_regex));
  SplitBehavior behavior = SplitBehavior::kIsolated;
  PVLLM_RETURN_IF_ERROR(parse_behavior(config, path, &behavior));
  std::unique_ptr<Regex> regex;
  PVLLM_RETURN_IF_ERROR(Regex::compile(pattern, /*literal=*/!is_regex, &regex));
  *out = std::make_unique<Split>(std::move(regex), behavior);
  return Status::Ok();
}

Status parse_byte_level(const json& config, const std::string& path,
                        std::unique_ptr<PreTokenizer>* out) {
  bool add_prefix_space = false, use_regex = false;
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "add_prefix_space", true, &add_prefix_space));
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "use_regex", true, &use_regex));
  std::unique_ptr<Regex> regex;
  if (use_regex) PVLLM_RETURN_IF_ERROR(Regex::compile(kGpt2Pattern, false, &regex));
  *out = std::make_unique<ByteLevel>(add_prefix_space, std::move(regex));
  return Status::Ok();
}

Status parse_metaspace(const json& config, const std::string& path,
                       std::unique_ptr<PreTokenizer>* out) {
  std::string replacement;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "replacement", &replacement));
  if (replacement.empty()) return malformed(field_path(path, "replacement"), "is empty");
  PrependScheme scheme = PrependScheme::kAlways;
  if (config.contains("prepend_scheme") && !config["prepend_scheme"].is_null()) {
    std::string name;
    PVLLM_RETURN_IF_ERROR(read_string(config, path, "prepend_scheme", &name));
    if (name == "always")
      scheme = PrependScheme::kAlways;
    else if (name == "first")
      scheme = PrependScheme::kFirst;
    else if (name == "never")
      scheme = PrependScheme::kNever;
    else
      return unsupported(field_path(path, "prepend_scheme"), name);
  } else {
    bool add_prefix_space = true;  // the field older files carry instead
    PVLLM_RETURN_IF_ERROR(read_bool(config, path, "add_prefix_space", true, &add_prefix_space));
    scheme = add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  bool split = true;
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "split", true, &split));
  *out = std::make_unique<Metaspace>(std::move(replacement), scheme, split);
  return Status::Ok();
}

Status parse_digits(const json& config, const std::string& path,
                    std::unique_ptr<PreTokenizer>* out) {
  bool individual = false;
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "individual_digits", false, &individual));
  std::unique_ptr<Regex> regex;
  PVLLM_RETURN_IF_ERROR(Regex::compile(individual ? R"(\p{N})" : R"(\p{N}+)", false, &regex));
  *out = std::make_unique<Split>(std::move(regex), SplitBehavior::kIsolated);
  return Status::Ok();
}

Status parse_sequence(const json& config, const std::string& path,
                      std::unique_ptr<PreTokenizer>* out) {
  const json* items = nullptr;
  PVLLM_RETURN_IF_ERROR(read_array(config, path, "pretokenizers", &items));
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (size_t i = 0; i < items->size(); ++i) {
    std::unique_ptr<PreTokenizer> step;
    PVLLM_RETURN_IF_ERROR(
        parse_pre_tokenizer((*items)[i], index_path(field_path(path, "pretokenizers"), i), &step));
    if (step) steps.push_back(std::move(step));
  }
  *out = std::make_unique<SequencePreTokenizer>(std::move(steps));
  return Status::Ok();
}

}  // namespace

Status parse_pre_tokenizer(const json& config, const std::string& path,
                           std::unique_ptr<PreTokenizer>* out) {
  out->reset();
  if (config.is_null()) return Status::Ok();
  if (!config.is_object()) return malformed(path, "is not an object");
  std::string type;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "type", &type));
  if (type == "Split") return parse_split(config, path, out);
  if (type == "ByteLevel") return parse_byte_level(config, path, out);
  if (type == "Metaspace") return parse_metaspace(config, path, out);
  if (type == "Digits") return parse_digits(config, path, out);
  if (type == "Sequence") return parse_sequence(config, path, out);
  return unsupported(field_path(path, "type"), type);
}

}  // namespace pvllm
