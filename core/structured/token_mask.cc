#include "core/structured/token_mask.h"

#include <vector>

namespace pvllm::structured {

void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask) {
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  const std::vector<int32_t>& ids = trie.token_ids();
  // level[d]: the state after the first d bytes of the current path;
  // stripped[d]: whether those d bytes are all leading spaces dropped.
  std::vector<MatchState> level(trie.max_depth() + 1);
  std::vector<uint8_t> stripped(trie.max_depth() + 1, 0);
  level[0] = state;
  stripped[0] = leading_spaces > 0;
  for (size_t i = 0; i < nodes.size();) {
    const VocabTrie::Node& n = nodes[i];
    uint32_t d = n.depth;
    stripped[d] = stripped[d - 1] && n.byte == ' ' && static_cast<int>(d) <= leading_spaces;
    if (stripped[d]) {
      level[d] = level[0];
    } else {
      matcher->advance(level[d - 1], n.byte, &level[d]);
      if (level[d].dead()) {
        i = n.subtree_end;
        continue;
      }
    }
    for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
      auto id = static_cast<uint32_t>(ids[t]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

}  // namespace pvllm::structured
