// Output constraints: what a request asks its text to match (a JSON
// schema, any JSON object, a GBNF grammar, a regular expression or one of
// a list of choices), compiled once into a Grammar and cached by its text,
// and the per-sequence TokenMatcher that says which tokens may come next.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "core/structured/constraint_spec.h"
#include "core/structured/grammar.h"
#include "core/structured/matcher.h"
#include "core/structured/token_mask.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {

// The grammar text of a spec (GBNF); errors as the front ends give them.
Status constraint_to_gbnf(const ConstraintSpec& spec, std::string* gbnf);

// A compiled constraint, shared by every sequence that asks for the same
// one: its grammar and the token masks of the states seen so far.
class CompiledConstraint {
 public:
  CompiledConstraint(Grammar grammar, std::shared_ptr<const VocabTrie> trie)
      : grammar_(std::move(grammar)), trie_(std::move(trie)) {}

  const Grammar& grammar() const { return grammar_; }
  const VocabTrie& trie() const { return *trie_; }
  size_t mask_words() const { return (static_cast<size_t>(trie_->vocab_size()) + 63) / 64; }

  using Mask = std::shared_ptr<const std::vector<uint64_t>>;
  Mask find_mask(const std::string& key) const;
  void store_mask(const std::string& key, Mask mask) const;

  // Bytes of masks kept at most; the cache starts over beyond it.
  static constexpr size_t kMaskCacheBytes = size_t{64} << 20;

 private:
  Grammar grammar_;
  std::shared_ptr<const VocabTrie> trie_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Mask> masks_;
  mutable size_t mask_bytes_ = 0;
};

// Compiles specs against one vocabulary, caching by kind and text.
class ConstraintCompiler {
 public:
  // token_bytes: as VocabTrie takes them (the tokenizer's token_bytes).
  explicit ConstraintCompiler(std::vector<std::string> token_bytes)
      : token_bytes_(std::move(token_bytes)) {}

  // Malformed constraints are InvalidArgument naming the position;
  // unimplemented features Unsupported naming them.
  Status compile(const ConstraintSpec& spec, std::shared_ptr<const CompiledConstraint>* out);

  // The cache starts over past either bound (its grammars' bytes are
  // counted roughly: elements, rule tables, character sets).
  static constexpr size_t kMaxCached = 256;
  static constexpr size_t kMaxCachedBytes = size_t{64} << 20;
  size_t num_cached() const { return cache_.size(); }
  // Drops every cached constraint (and so their masks); the vocabulary
  // trie stays.
  void clear_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    cache_.clear();
    cached_bytes_ = 0;
  }
  size_t cached_bytes() const { return cached_bytes_; }

 private:
  std::mutex mu_;
  std::vector<std::string> token_bytes_;
  std::shared_ptr<const VocabTrie> trie_;  // built on first use
  std::unordered_map<std::string, std::shared_ptr<const CompiledConstraint>> cache_;
  size_t cached_bytes_ = 0;
};

// One sequence's progress through a constraint, token by token. The text
// it matches is the generated text as the detokenizer writes it: with
// `leading_spaces` spaces stripped from its start (the tokenizer's dummy
// prefix after BOS).
class TokenMatcher {
 public:
  TokenMatcher(std::shared_ptr<const CompiledConstraint> constraint, int leading_spaces);

  // The tokens that may come next, as a bitmask of mask_words() words
  // (bit i of word w: token 64 w + i). End-of-sequence tokens are not in
  // it: the caller allows them when can_end().
  CompiledConstraint::Mask allowed();
  // Advances over `token`; false (and no change) when the constraint
  // refuses it.
  bool accept(int32_t token);
  bool can_end() const { return matcher_.can_end(state_); }
  bool must_end() const { return matcher_.must_end(state_); }
  size_t mask_words() const { return constraint_->mask_words(); }
  // Whether the grammar outgrew the matcher's work limits (Matcher::
  // set_budget): allowed() is then empty and accept() false, and this says
  // why.
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  // Expansion steps one mask may take, and one token.
  static constexpr uint64_t kMaskBudget = 50'000'000;
  static constexpr uint64_t kTokenBudget = 2'000'000;

 private:
  void fail();

  std::shared_ptr<const CompiledConstraint> constraint_;
  Matcher matcher_;
  MatchState state_;
  int spaces_ = 0;
  std::string error_;
};

}  // namespace pvllm::structured
