// ModelRunner: turns the scheduler's decision into the flat arrays a
// backend consumes (DESIGN.md: "ModelRunner.prepare(batch) ──▶
// BatchMetadata"). Pure host code; no state between steps.
#pragma once

#include "core/backend/backend.h"
#include "core/kv/kv_cache_manager.h"
#include "core/sched/scheduler.h"

namespace pvllm {

// Fills `md` for `batch`: one row per new token of every scheduled
// sequence, in batch order; a logits row for every sequence that samples
// (its last row), in batch order.
void prepare_batch(const ScheduledBatch& batch, const KvCacheManager& kv_cache, BatchMetadata* md);

}  // namespace pvllm
