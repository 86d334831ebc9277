#include "tests/util/sequence_driver.h"

namespace pvllm::testing {

Status SequenceDriver::step(const std::vector<int32_t>& ids, std::vector<float>* logits,
                            const std::function<void(BatchMetadata*)>& edit) {
  const int32_t bs = backend_->block_size();
  const int32_t n = static_cast<int32_t>(ids.size());
  const int32_t ctx = length_ + n;
  while (static_cast<int32_t>(blocks_.size()) * bs < ctx) {
    blocks_.push_back(static_cast<int32_t>(blocks_.size()));
  }
  if (static_cast<int32_t>(blocks_.size()) > backend_->num_blocks()) {
    return InvalidArgument("sequence driver: the backend's pool is too small");
  }
  BatchMetadata md;
  md.num_tokens = n;
  md.num_seqs = 1;
  md.input_ids = ids;
  for (int32_t j = 0; j < n; ++j) {
    const int32_t pos = length_ + j;
    md.positions.push_back(pos);
    md.slot_mapping.push_back(int64_t{blocks_[pos / bs]} * bs + pos % bs);
    md.logits_rows.push_back(j);
  }
  md.query_start = {0, n};
  md.context_lens = {ctx};
  md.max_blocks_per_seq = static_cast<int32_t>(blocks_.size());
  md.block_tables = blocks_;
  if (edit) edit(&md);
  logits->assign(static_cast<size_t>(n) * vocab_, 0.0f);
  PVLLM_RETURN_IF_ERROR(backend_->forward(md, logits->data()));
  length_ = ctx;
  return Status::Ok();
}

int32_t argmax(const float* values, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace pvllm::testing
