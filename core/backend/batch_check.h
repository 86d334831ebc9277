// The one check every backend runs on a batch before touching memory with
// it: sizes consistent, each row's position and slot the ones its
// sequence's block table gives, block ids inside the pool, token ids inside
// the vocabulary, logits rows inside the batch. A batch the engine builds
// always passes; a wrong one (a bookkeeping bug, a test backend's caller)
// is INVALID_ARGUMENT naming the sequence and row, never a wild write.
#pragma once

#include <cstdint>

#include "core/backend/backend.h"
#include "core/base/status.h"

namespace pvllm {

// What a batch is checked against.
struct BatchLimits {
  int32_t num_blocks = 0;      // the KV pool's blocks
  int32_t block_size = 16;     // tokens per block
  int32_t vocab_size = 0;      // token ids in [0, vocab_size)
  int32_t sliding_window = 0;  // blocks wholly before the window may be released (-1)
};

Status check_batch(const BatchMetadata& md, const BatchLimits& limits);

}  // namespace pvllm
