// ModelRunner: turns the scheduler's decision into the flat arrays a
// backend consumes (DESIGN.md: "ModelRunner.prepare(batch) ──▶
// BatchMetadata"). Pure host code; no state between steps.
#pragma once

#include "core/backend/backend.h"
#include "core/kv/block_manager.h"
#include "core/sched/scheduler.h"

namespace pvllm {

// Fills `md` for `batch`: one row per new token of every scheduled
// sequence, in batch order; a logits row for every sequence that samples
// (its last row), in batch order.
void prepare_batch(const ScheduledBatch& batch, const BlockManager& block_manager,
                   BatchMetadata* md);

}  // namespace pvllm
