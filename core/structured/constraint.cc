#include "core/structured/constraint.h"

#include <algorithm>

#include "core/structured/json_schema.h"
#include "core/structured/regex_grammar.h"
#include "core/structured/token_mask.h"
#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {
namespace {

bool valid_utf8(std::string_view s) {
  Utf8Decoder d;
  uint32_t cp = 0;
  for (char c : s) {
    if (d.feed(static_cast<uint8_t>(c), &cp) == Utf8Decoder::kInvalid) return false;
  }
  return d.need == 0;
}

Status choices_to_gbnf(const std::vector<std::string>& choices, std::string* gbnf) {
  if (choices.empty()) return InvalidArgument("choice: the list of choices is empty");
  std::string rule = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      return InvalidArgument("choice: choice " + std::to_string(i) + " is empty");
    }
    if (!valid_utf8(choices[i])) {
      return InvalidArgument("choice: choice " + std::to_string(i) + " is not valid UTF-8");
    }
    rule += (i ? " | " : "") + gbnf_literal(choices[i]);
  }
  *gbnf = rule + "\n";
  return Status::Ok();
}

std::string cache_key(const ConstraintSpec& spec) {
  std::string key = std::to_string(static_cast<int>(spec.kind)) +
                    (spec.json_whitespace ? "w" : "") + (spec.json_unlisted_properties ? "u" : "") +
                    (spec.json_any_order ? "o:" : ":");
  if (spec.kind != ConstraintKind::kChoice) return key + spec.text;
  for (const std::string& c : spec.choices) key += std::to_string(c.size()) + ":" + c;
  return key;
}

}  // namespace

Status constraint_to_gbnf(const ConstraintSpec& spec, std::string* gbnf) {
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      return json_schema_to_gbnf(spec.text, gbnf,
                                 {.whitespace = spec.json_whitespace,
                                  .unlisted_properties = spec.json_unlisted_properties,
                                  .any_order = spec.json_any_order});
    case ConstraintKind::kJsonObject:
      *gbnf = json_object_gbnf({.whitespace = spec.json_whitespace});
      return Status::Ok();
    case ConstraintKind::kGrammar:
      *gbnf = spec.text;
      return Status::Ok();
    case ConstraintKind::kRegex:
      return regex_to_gbnf(spec.text, gbnf);
    case ConstraintKind::kChoice:
      return choices_to_gbnf(spec.choices, gbnf);
    case ConstraintKind::kNone:
      break;
  }
  return InvalidArgument("constraint: unknown kind " + std::to_string(static_cast<int>(spec.kind)));
}

CompiledConstraint::Mask CompiledConstraint::find_mask(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(key);
  return it == masks_.end() ? nullptr : it->second;
}

void CompiledConstraint::store_mask(const std::string& key, Mask mask) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = mask->size() * sizeof(uint64_t) + key.size();
  if (mask_bytes_ + bytes > kMaskCacheBytes) {
    masks_.clear();
    mask_bytes_ = 0;
  }
  if (masks_.emplace(key, std::move(mask)).second) mask_bytes_ += bytes;
}

Status ConstraintCompiler::compile(const ConstraintSpec& spec,
                                   std::shared_ptr<const CompiledConstraint>* out) {
  std::string key = cache_key(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      *out = it->second;
      return Status::Ok();
    }
  }
  std::string gbnf;
  Status s = constraint_to_gbnf(spec, &gbnf);
  if (!s.ok()) return s;
  Grammar grammar;
  s = parse_gbnf(gbnf, &grammar);
  if (!s.ok()) return s;
  {
    // A grammar whose very start outgrows the matcher's limits is refused
    // here rather than failing every request later.
    Matcher probe(&grammar);
    probe.set_budget(TokenMatcher::kTokenBudget);
    probe.initial();
    if (probe.exhausted()) {
      return Unsupported("constraint: the grammar is too ambiguous to follow: more than " +
                         std::to_string(Matcher::kMaxStacks) + " parses at its start");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!trie_) trie_ = std::make_shared<const VocabTrie>(token_bytes_);
  auto compiled = std::make_shared<const CompiledConstraint>(std::move(grammar), trie_);
  size_t bytes = key.size() + compiled->grammar().elements.size() * sizeof(Element);
  for (const auto& rule : compiled->grammar().rules) bytes += rule.size() * sizeof(uint32_t) + 32;
  for (const CharSet& set : compiled->grammar().char_sets) {
    bytes += set.ranges.size() * sizeof(CharRange) + sizeof(CharSet);
  }
  if (cache_.size() >= kMaxCached || cached_bytes_ + bytes > kMaxCachedBytes) {
    cache_.clear();
    cached_bytes_ = 0;
  }
  if (cache_.emplace(key, compiled).second) cached_bytes_ += bytes;
  *out = compiled;
  return Status::Ok();
}

TokenMatcher::TokenMatcher(std::shared_ptr<const CompiledConstraint> constraint, int leading_spaces)
    : constraint_(std::move(constraint)),
      matcher_(&constraint_->grammar()),
      spaces_(leading_spaces) {
  matcher_.set_budget(kTokenBudget);
  state_ = matcher_.initial();
  if (matcher_.exhausted()) fail();
}

void TokenMatcher::fail() {
  error_ = "the output constraint is too ambiguous to follow (more than " +
           std::to_string(Matcher::kMaxStacks) + " parses at once, or too much work for one token)";
}

CompiledConstraint::Mask TokenMatcher::allowed() {
  if (failed()) return std::make_shared<const std::vector<uint64_t>>(mask_words(), 0);
  std::string key = std::to_string(spaces_) + "|" + matcher_.key(state_);
  CompiledConstraint::Mask mask = constraint_->find_mask(key);
  if (mask) return mask;
  auto words = std::make_shared<std::vector<uint64_t>>(mask_words(), 0);
  matcher_.set_budget(kMaskBudget);
  compute_token_mask(&matcher_, state_, spaces_, constraint_->trie(), words->data());
  if (matcher_.exhausted()) {  // a mask cut short: neither used nor cached
    fail();
    std::fill(words->begin(), words->end(), 0);
    return words;
  }
  constraint_->store_mask(key, words);
  return words;
}

bool TokenMatcher::accept(int32_t token) {
  const VocabTrie& trie = constraint_->trie();
  if (token < 0 || token >= trie.vocab_size()) return false;
  std::string_view b = trie.bytes(token);
  if (b.empty()) return false;
  int spaces = spaces_;
  while (spaces > 0 && !b.empty() && b.front() == ' ') {
    b.remove_prefix(1);
    --spaces;
  }
  if (b.empty()) {
    spaces_ = spaces;
    return true;
  }
  if (failed()) return false;
  matcher_.set_budget(kTokenBudget);
  MatchState s = state_, next;
  for (char c : b) {
    matcher_.advance(s, static_cast<uint8_t>(c), &next);
    if (matcher_.exhausted()) fail();
    if (next.dead()) return false;
    std::swap(s, next);
  }
  state_ = std::move(s);
  spaces_ = 0;
  if (matcher_.arena_size() > (1u << 16)) matcher_.compact(&state_);
  return true;
}

}  // namespace pvllm::structured
