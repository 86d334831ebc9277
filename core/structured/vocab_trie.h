// The vocabulary as a byte trie in pre-order, for computing which tokens a
// grammar state allows: one walk visits each shared prefix once and skips
// a whole subtree as soon as its prefix is refused.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pvllm::structured {

class VocabTrie {
 public:
  struct Node {
    uint8_t byte = 0;
    uint32_t depth = 0;         // 1 for a token's first byte
    uint32_t subtree_end = 0;   // the index after this node's subtree
    uint32_t tokens_begin = 0;  // [begin, end) in token_ids(): tokens ending here
    uint32_t tokens_end = 0;
    // Every byte below this node is plain (is_plain): the subtree holds
    // only tokens that plain_mask() has, once the path to it is plain.
    bool plain_below = true;
    // The path to this node is text: plain bytes and whole non-ASCII
    // characters, the last of which may be cut short (valid UTF-8 so far).
    bool text = false;
    // For a text node: the characters its path holds, a cut-short last one
    // counted (the characters a state must take for it to continue).
    uint32_t chars = 0;
    // The bytes below this node, read from a character's start, are text:
    // from a state that every text character leads back to, the whole
    // subtree is allowed.
    bool tail_text = true;
  };

  // Printable ASCII but the quote and the backslash: what fills a JSON
  // string, and what a state inside one (or inside many patterns) takes
  // without changing.
  static bool is_plain(uint8_t b) { return b >= 0x20 && b < 0x7F && b != '"' && b != '\\'; }

  // token_bytes[id]: the bytes token `id` adds to the text. Tokens with
  // none (special and control tokens) are not in the trie: no constraint
  // lets them through (the engine adds end-of-sequence ids itself).
  explicit VocabTrie(const std::vector<std::string>& token_bytes);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t vocab_size() const { return vocab_size_; }
  uint32_t max_depth() const { return max_depth_; }
  // The tokens made of plain bytes only (vocab_size() bits).
  const std::vector<uint64_t>& plain_mask() const { return plain_mask_; }
  // The nodes where a path stops being text (Node::text) after a text
  // parent, in pre-order, with the characters the parent's path holds and
  // whether it ends between characters (else the node's byte breaks a
  // character off, and no grammar takes it). A walk from a state that
  // takes text alike visits only these.
  struct Frontier {
    uint32_t node = 0;
    uint32_t chars = 0;
    bool boundary = true;
    uint8_t first_byte = 0;  // the path's
  };
  const std::vector<Frontier>& frontier() const { return frontier_; }
  // The node of each first byte, -1 where no token starts with it.
  int32_t first_byte_node(uint8_t b) const { return first_byte_node_[b]; }
  // The tokens of node i's subtree are token_ids()[nodes()[i].tokens_begin,
  // subtree_tokens_end(i)): the trie is in the tokens' sorted order.
  uint32_t subtree_tokens_end(size_t i) const;
  // The text tokens (Node::text) of at most `chars` characters (a cut-short
  // last one counted): what a state inside a JSON string takes when `chars`
  // more characters may come, whatever they are. kAnyLength: all of them.
  static constexpr uint32_t kAnyLength = UINT32_MAX;
  const std::vector<uint64_t>& text_mask(uint32_t chars) const;
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  std::vector<std::string> bytes_;
  std::vector<uint64_t> plain_mask_;
  std::vector<Frontier> frontier_;
  int32_t first_byte_node_[256];
  // (characters, the text tokens of at most that many), for each length
  // some text token has, ascending; the first entry is (0, none).
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> text_masks_;
  int32_t vocab_size_ = 0;
  uint32_t max_depth_ = 0;
};

}  // namespace pvllm::structured
