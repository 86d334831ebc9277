// Reading every weight page at create, so a large model's disk reads happen
// there (with progress) rather than inside the first step; a lazily checked
// .pvllm file's tensors are checked by this same read (model.h).
#pragma once

#include <functional>

#include "core/base/status.h"
#include "core/model/model.h"

namespace pvllm {

// Reads (or checks) every tensor of `model`, on up to `num_threads` threads
// (0: every core) when there is enough to read, and calls `progress` with
// the fraction done on the calling thread. CORRUPT_MODEL for a tensor whose
// checksum does not match.
Status read_weights(const Model& model, int num_threads,
                    const std::function<void(float fraction)>& progress);

}  // namespace pvllm
