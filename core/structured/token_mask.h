// Which tokens a grammar state lets through: one walk over the vocabulary
// trie, advancing the state byte by byte and skipping every subtree whose
// prefix the grammar refuses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/structured/matcher.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {

// Sets bit `id` of `mask` (trie.vocab_size() bits, cleared by the caller)
// for each token whose bytes, after up to `leading_spaces` leading spaces
// are dropped, continue `state`. The walk memoizes the states it meets and
// their transitions by byte (so a node usually costs one table lookup), up
// to `max_memo_states` states (1 KiB each); a grammar that needs more is
// walked again advancing every node's own state.
inline constexpr size_t kMaxMemoStates = size_t{1} << 14;
void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask,
                        size_t max_memo_states = kMaxMemoStates);

}  // namespace pvllm::structured
