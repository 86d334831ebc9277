#include "core/structured/vocab_trie.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {

VocabTrie::VocabTrie(const std::vector<std::string>& token_bytes)
    : bytes_(token_bytes), vocab_size_(static_cast<int32_t>(token_bytes.size())) {
  std::vector<int32_t> order(token_bytes.size());
  std::iota(order.begin(), order.end(), 0);
  order.erase(std::remove_if(order.begin(), order.end(),
                             [&](int32_t id) { return token_bytes[id].empty(); }),
              order.end());
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  std::vector<uint32_t> path;  // node index per depth - 1
  std::string_view previous;
  for (int32_t id : order) {
    std::string_view b = token_bytes[id];
    size_t common = 0;
    while (common < b.size() && common < previous.size() && common < path.size() &&
           b[common] == previous[common]) {
      ++common;
    }
    while (path.size() > common) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t i = common; i < b.size(); ++i) {
      Node n;
      n.byte = static_cast<uint8_t>(b[i]);
      n.depth = static_cast<uint32_t>(i + 1);
      n.tokens_begin = n.tokens_end = static_cast<uint32_t>(token_ids_.size());
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& last = nodes_[path.back()];
    if (last.tokens_begin == last.tokens_end)
      last.tokens_begin = static_cast<uint32_t>(token_ids_.size());
    token_ids_.push_back(id);
    last.tokens_end = static_cast<uint32_t>(token_ids_.size());
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(b.size()));
    previous = b;
  }
  while (!path.empty()) {
    nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
    path.pop_back();
  }
  std::fill(std::begin(first_byte_node_), std::end(first_byte_node_), -1);
  for (size_t i = 0; i < nodes_.size(); i = nodes_[i].subtree_end) {
    first_byte_node_[nodes_[i].byte] = static_cast<int32_t>(i);
  }
  // Whether each node's path is text: in pre-order, a node's parent is the
  // last node met one level up, whose decoder state is kept per depth.
  std::vector<Utf8Decoder> decoder(max_depth_ + 1);
  std::vector<uint8_t> text_path(max_depth_ + 1, 1);
  std::vector<uint32_t> chars(max_depth_ + 1, 0);  // complete characters
  uint8_t first = 0;                               // the path's first byte
  for (Node& n : nodes_) {
    const uint32_t d = n.depth;
    if (d == 1) first = n.byte;
    Utf8Decoder next = decoder[d - 1];
    uint32_t cp = 0;
    const Utf8Decoder::Result r = next.feed(n.byte, &cp);
    const bool ok =
        text_path[d - 1] && r != Utf8Decoder::kInvalid && (n.byte >= 0x80 || is_plain(n.byte));
    if (!ok && text_path[d - 1]) {
      frontier_.push_back({static_cast<uint32_t>(&n - nodes_.data()), chars[d - 1],
                           decoder[d - 1].need == 0, first});
    }
    text_path[d] = ok;
    decoder[d] = next;
    chars[d] = chars[d - 1] + (r == Utf8Decoder::kChar);
    n.text = ok;
    n.chars = chars[d] + (next.need > 0);
  }
  // A node's subtree is plain when its children are plain bytes with plain
  // subtrees: from the back, children come after their parent.
  for (size_t i = nodes_.size(); i-- > 0;) {
    Node& n = nodes_[i];
    for (size_t c = i + 1; c < n.subtree_end; c = nodes_[c].subtree_end) {
      if (!is_plain(nodes_[c].byte) || !nodes_[c].plain_below) n.plain_below = false;
    }
  }
  // Whether each node's tail is text, from the back: a child's byte read
  // from a character's start either completes a character (then the
  // child's own tail_text holds for the rest) or starts one, whose
  // continuation bytes below are read on, at most three levels.
  std::function<bool(size_t, Utf8Decoder)> continues = [&](size_t c, Utf8Decoder d) {
    uint32_t cp = 0;
    const uint8_t b = nodes_[c].byte;
    const Utf8Decoder::Result r = d.feed(b, &cp);
    if (r == Utf8Decoder::kInvalid || (b < 0x80 && !is_plain(b))) return false;
    if (r == Utf8Decoder::kChar) return nodes_[c].tail_text;
    for (size_t g = c + 1; g < nodes_[c].subtree_end; g = nodes_[g].subtree_end) {
      if (!continues(g, d)) return false;
    }
    return true;
  };
  for (size_t i = nodes_.size(); i-- > 0;) {
    for (size_t c = i + 1; c < nodes_[i].subtree_end && nodes_[i].tail_text;
         c = nodes_[c].subtree_end) {
      nodes_[i].tail_text = continues(c, Utf8Decoder{});
    }
  }
  // Text tokens by length, then each length's mask with the shorter ones.
  std::map<uint32_t, std::vector<int32_t>> by_length;
  for (const Node& n : nodes_) {
    if (!n.text) continue;
    for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
      by_length[n.chars].push_back(token_ids_[t]);
    }
  }
  const size_t words = (static_cast<size_t>(vocab_size_) + 63) / 64;
  text_masks_.emplace_back(0, std::vector<uint64_t>(words, 0));
  for (const auto& [length, ids] : by_length) {
    std::vector<uint64_t> mask = text_masks_.back().second;
    for (int32_t id : ids) {
      mask[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (static_cast<uint32_t>(id) & 63);
    }
    text_masks_.emplace_back(length, std::move(mask));
  }
  plain_mask_.assign((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const std::string& b = bytes_[static_cast<size_t>(id)];
    if (!b.empty() &&
        std::all_of(b.begin(), b.end(), [](char c) { return is_plain(static_cast<uint8_t>(c)); })) {
      plain_mask_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

uint32_t VocabTrie::subtree_tokens_end(size_t i) const {
  const uint32_t end = nodes_[i].subtree_end;
  return end < nodes_.size() ? nodes_[end].tokens_begin : static_cast<uint32_t>(token_ids_.size());
}

const std::vector<uint64_t>& VocabTrie::text_mask(uint32_t chars) const {
  // The last entry whose length is at most `chars`.
  auto it = std::upper_bound(text_masks_.begin(), text_masks_.end(), chars,
                             [](uint32_t c, const auto& entry) { return c < entry.first; });
  return std::prev(it)->second;
}

}  // namespace pvllm::structured
