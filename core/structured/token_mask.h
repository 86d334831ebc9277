// Which tokens a grammar state lets through: one walk over the vocabulary
// trie, advancing the state byte by byte and skipping every subtree whose
// prefix the grammar refuses.
#pragma once

#include <cstdint>

#include "core/structured/matcher.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {

// Sets bit `id` of `mask` (trie.vocab_size() bits, cleared by the caller)
// for each token whose bytes, after up to `leading_spaces` leading spaces
// are dropped, continue `state`.
void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask);

}  // namespace pvllm::structured
