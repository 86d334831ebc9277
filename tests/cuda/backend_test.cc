// The CUDA backend (libpvllm_cuda.so, opened through core/backend_loader)
// against the CPU backend on one tiny random bf16 model: prefill chunks,
// decode steps, a mixed batch, copy-on-write copies, and CUDA graph replay
// against eager launches. Every test skips where no CUDA device is present.
#include "core/backend/backend.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend_loader.h"
#include "core/backend/cuda_module_interface.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/tiny_batches.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kMaxModelLen = 256;

// Logits bound, relative to the row's largest |logit|. The GPU keeps
// weights and every activation in bf16 (8 significant bits: each rounding
// is <= 2^-9 relative) and the CPU keeps activations in fp32; over 2 layers
// of a dozen rounded tensors each, with fp32 accumulation on both sides,
// the logits drift by a few bf16 ulps of their scale: 3e-2 is ~15 ulps.
constexpr float kRelTol = 3e-2f;

using cuda_test::prompt;
using cuda_test::Seq;

class BackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    // The module is named by $PVLLM_CUDA_BACKEND (ctest and gpu_check.sh set it).
    testing::TinyModelSpec spec;
    spec.hidden_size = 256;
    spec.num_heads = 4;  // head_dim 64: on the attention kernels' list
    spec.num_kv_heads = 2;
    spec.intermediate_size = 512;
    spec.num_layers = 2;
    spec.max_position_embeddings = kMaxModelLen;
    spec.dtype = DType::kBF16;  // both backends see the same weights
    spec.tie_word_embeddings = false;
    const std::string dir =
        testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_cuda_backend_test"), spec);
    std::unique_ptr<Model> model;
    const Status s = load_model(dir, &model);
    ASSERT_TRUE(s.ok()) << s.message();
    model_ = model.release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  static std::unique_ptr<Backend> make_cpu() {
    std::unique_ptr<Backend> b;
    const Status s = cuda_test::make_cpu_backend(*model_, kBlockSize, kNumBlocks, &b);
    EXPECT_TRUE(s.ok()) << s.message();
    return b;
  }

  static std::unique_ptr<Backend> make_cuda(bool graphs, int32_t dtype = 1) {
    std::unique_ptr<Backend> b;
    const Status s = cuda_test::make_cuda_backend(*model_, kBlockSize, kNumBlocks, kMaxModelLen,
                                                  graphs, &b, dtype);
    EXPECT_TRUE(s.ok()) << s.message();
    return b;
  }

  int32_t vocab() const { return model_->config.vocab_size; }

  BatchMetadata make_batch(std::vector<Seq*> seqs, std::vector<int32_t> num_new) {
    return cuda_test::make_batch(std::move(seqs), std::move(num_new), kBlockSize, &next_block_);
  }
  std::vector<float> run(Backend* b, const BatchMetadata& md) {
    return cuda_test::run(b, md, vocab());
  }
  float max_rel_error(const std::vector<float>& ref, const std::vector<float>& got) const {
    return cuda_test::max_rel_error(ref, got, vocab());
  }
  std::pair<int32_t, float> top(const std::vector<float>& logits, size_t r) const {
    return cuda_test::top(logits, r, vocab());
  }

  static Model* model_;
  int32_t next_block_ = 0;
};

Model* BackendTest::model_ = nullptr;

TEST_F(BackendTest, LogitsMatchTheCpuThroughPrefillAndDecode) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto cpu = make_cpu();
  auto gpu = make_cuda(/*graphs=*/false);
  ASSERT_TRUE(cpu && gpu);
  EXPECT_EQ(gpu->num_blocks(), kNumBlocks);
  EXPECT_EQ(gpu->block_size(), kBlockSize);

  // Two prompts prefilled in one batch (one spans three blocks, one a
  // partial block), then a third prompt in two chunks, the second chunk
  // batched with decodes of the first two (decodes first).
  Seq a{prompt(37, 1, vocab())}, b{prompt(9, 2, vocab())}, c{prompt(70, 3, vocab())};
  BatchMetadata md = make_batch({&a, &b}, {37, 9});
  std::vector<float> ref = run(cpu.get(), md), got = run(gpu.get(), md);
  EXPECT_LE(max_rel_error(ref, got), kRelTol) << "prefill";

  md = make_batch({&c}, {40});  // a middle chunk: no logits, K/V only
  EXPECT_TRUE(md.logits_rows.empty());
  run(cpu.get(), md);
  run(gpu.get(), md);

  int32_t num_greedy_checked = 0;
  for (int step = 0; step < 6; ++step) {
    // Teacher-force the CPU's greedy token into both, compare the GPU's.
    const auto [ta, gap_a] = top(ref, 0);
    const auto [tb, gap_b] = top(ref, 1);
    const auto [ga, gap_ga] = top(got, 0);
    const auto [gb, gap_gb] = top(got, 1);
    // Greedy tokens agree wherever the CPU's choice is not a near tie: each
    // logit is within kRelTol of the scale, so a gap above twice that
    // cannot flip.
    const float margin = 2 * kRelTol;
    if (gap_a > margin) {
      EXPECT_EQ(ga, ta) << "step " << step << " seq a";
      ++num_greedy_checked;
    }
    if (gap_b > margin) {
      EXPECT_EQ(gb, tb) << "step " << step << " seq b";
      ++num_greedy_checked;
    }
    a.tokens.push_back(ta);
    b.tokens.push_back(tb);
    if (step == 0) {
      md = make_batch({&a, &b, &c}, {1, 1, 30});  // mixed: decodes, then a prefill chunk
      ASSERT_EQ(md.logits_rows.size(), 3u);
    } else {
      md = make_batch({&a, &b}, {1, 1});
    }
    ref = run(cpu.get(), md);
    got = run(gpu.get(), md);
    EXPECT_LE(max_rel_error(ref, got), kRelTol) << "step " << step;
  }
  EXPECT_GE(num_greedy_checked, 2) << "too many near ties to check greedy tokens";
}

// fp32 on the GPU (IEEE, no TF32; attention through the generic kernels)
// against the CPU, which computes in fp32 too: the same function summed in
// another order, so the logits agree to a few fp32 ulps of their scale and
// every greedy token agrees but for near ties of that size. Prefill,
// chunked prefill and decode, eager and replayed from graphs.
TEST_F(BackendTest, Fp32LogitsMatchTheCpuToFp32Rounding) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  constexpr float kFp32RelTol = 1e-4f;
  for (bool graphs : {false, true}) {
    next_block_ = 0;
    auto cpu = make_cpu();
    auto gpu = make_cuda(graphs, /*dtype=*/3);
    ASSERT_TRUE(cpu && gpu);
    Seq a{prompt(37, 1, vocab())}, b{prompt(9, 2, vocab())}, c{prompt(70, 3, vocab())};
    BatchMetadata md = make_batch({&a, &b}, {37, 9});
    std::vector<float> ref = run(cpu.get(), md), got = run(gpu.get(), md);
    EXPECT_LE(max_rel_error(ref, got), kFp32RelTol) << "prefill, graphs " << graphs;
    md = make_batch({&c}, {40});
    run(cpu.get(), md);
    run(gpu.get(), md);
    for (int step = 0; step < 6; ++step) {
      for (size_t r = 0; r < 2; ++r) {
        const auto [want, gap] = top(ref, r);
        if (gap > 2 * kFp32RelTol) {
          EXPECT_EQ(top(got, r).first, want) << "step " << step << " row " << r;
        }
      }
      a.tokens.push_back(top(ref, 0).first);
      b.tokens.push_back(top(ref, 1).first);
      md = step == 0 ? make_batch({&a, &b, &c}, {1, 1, 30}) : make_batch({&a, &b}, {1, 1});
      ref = run(cpu.get(), md);
      got = run(gpu.get(), md);
      EXPECT_LE(max_rel_error(ref, got), kFp32RelTol) << "step " << step << ", graphs " << graphs;
    }
  }
}

TEST_F(BackendTest, CudaGraphReplayMatchesEager) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto eager = make_cuda(/*graphs=*/false);
  auto graphs = make_cuda(/*graphs=*/true);
  ASSERT_TRUE(eager && graphs);
  // Three sequences: decode batches of 3 replay the bucket-4 graph with
  // one padding row; later a batch of 1 uses the bucket-1 graph.
  Seq s[3] = {{prompt(20, 4, vocab())}, {prompt(33, 5, vocab())}, {prompt(5, 6, vocab())}};
  BatchMetadata md = make_batch({&s[0], &s[1], &s[2]}, {20, 33, 5});
  std::vector<float> e = run(eager.get(), md), g = run(graphs.get(), md);
  EXPECT_EQ(e, g) << "prefill takes the same eager path in both";
  for (int step = 0; step < 8; ++step) {
    std::vector<Seq*> seqs;
    std::vector<int32_t> ones;
    const int32_t n = step < 5 ? 3 : 1;
    for (int32_t i = 0; i < n; ++i) {
      s[i].tokens.push_back(top(e, static_cast<size_t>(i)).first);
      seqs.push_back(&s[i]);
      ones.push_back(1);
    }
    md = make_batch(seqs, ones);
    e = run(eager.get(), md);
    g = run(graphs.get(), md);
    // The graph runs the same kernels on the same data except that its
    // decode split plan is made for max_model_len and its GEMMs see a
    // padded batch; both change only fp32 summation order, so at most a
    // bf16 rounding flips: far inside the CPU bound.
    EXPECT_LE(max_rel_error(e, g), kRelTol / 3) << "step " << step;
    for (int32_t i = 0; i < n; ++i) {
      const auto [te, gap] = top(e, static_cast<size_t>(i));
      if (gap > 2 * kRelTol / 3) {
        EXPECT_EQ(top(g, static_cast<size_t>(i)).first, te) << "step " << step;
      }
    }
  }
}

// forward_sample draws on the device what the host sampler draws on the
// logits forward() returns for the same batches: eager prefill and graph
// decode (a bucket-4 graph with a padding row, so logits rows are not
// compact), rows sharing a logits row, penalties and logprobs.
TEST_F(BackendTest, DeviceSamplingMatchesHostSamplingOfTheSameLogits) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto with_logits = make_cuda(/*graphs=*/true);
  auto sampling = make_cuda(/*graphs=*/true);
  ASSERT_TRUE(with_logits && sampling);
  std::vector<SamplingParams> params(5);
  params[0].temperature = 0.0f;
  params[1].temperature = 0.8f;
  params[1].top_p = 0.9f;
  params[1].logprobs = 5;
  params[2].temperature = 0.0f;
  params[2].repetition_penalty = 1.4f;
  params[2].logprobs = 0;
  params[3].temperature = 1.1f;
  params[3].top_k = 20;
  params[3].presence_penalty = 0.5f;
  params[3].frequency_penalty = 0.3f;
  params[4].min_p = 0.05f;
  Seq s[3] = {{prompt(20, 8, vocab())}, {prompt(41, 9, vocab())}, {prompt(7, 10, vocab())}};
  std::vector<int32_t> outputs[3];
  BatchMetadata md = make_batch({&s[0], &s[1], &s[2]}, {20, 41, 7});
  const int32_t prompt_lens[3] = {20, 41, 7};
  int32_t num_penalty_moves = 0;
  for (int step = 0; step < 6; ++step) {
    const std::vector<float> logits = run(with_logits.get(), md);
    std::vector<SampleRow> rows;
    for (int32_t i = 0; i < 3; ++i) {
      // Two draws per sequence, as the n samples of a first token would.
      for (int32_t k = 0; k < 2; ++k) {
        SampleRow r;
        r.logits_index = i;
        r.params = &params[(i + k + step) % params.size()];
        r.seed = 99;
        r.sample_index = k;
        r.step = step;
        r.prompt_ids = std::span<const int32_t>(s[i].tokens).first(prompt_lens[i]);
        r.output_ids = outputs[i];
        rows.push_back(r);
      }
    }
    std::vector<SampleResult> got;
    const Status st = sampling->forward_sample(md, rows, &got);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(got.size(), rows.size());
    for (size_t j = 0; j < rows.size(); ++j) {
      const SampleResult want = sample_row(logits.data(), vocab(), rows[j]);
      EXPECT_EQ(got[j].token_id, want.token_id) << "step " << step << " row " << j;
      if (rows[j].params->logprobs >= 0) {
        EXPECT_NEAR(got[j].logprob, want.logprob, 1e-5) << "step " << step << " row " << j;
      }
      ASSERT_EQ(got[j].top_logprobs.size(), want.top_logprobs.size());
      for (size_t t = 0; t < want.top_logprobs.size(); ++t) {
        EXPECT_EQ(got[j].top_logprobs[t].token_id, want.top_logprobs[t].token_id);
      }
      if (rows[j].params->repetition_penalty != 1.0f &&
          want.token_id != top(logits, static_cast<size_t>(rows[j].logits_index)).first) {
        ++num_penalty_moves;
      }
    }
    // Teacher-force each sequence's first draw into both backends.
    std::vector<Seq*> seqs;
    for (int32_t i = 0; i < 3; ++i) {
      s[i].tokens.push_back(got[2 * i].token_id);
      outputs[i].push_back(got[2 * i].token_id);
      seqs.push_back(&s[i]);
    }
    md = make_batch(seqs, {1, 1, 1});
  }
  EXPECT_GT(num_penalty_moves, 0) << "the repetition penalty never changed a greedy pick";
}

// A graph bucket first replayed with long block tables, then with short
// ones: only the scheduled width goes over, and entries left from the
// longer tables must never be read.
TEST_F(BackendTest, GraphReplayWithNarrowerBlockTablesMatchesEager) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto eager = make_cuda(/*graphs=*/false);
  auto graphs = make_cuda(/*graphs=*/true);
  ASSERT_TRUE(eager && graphs);
  Seq long_a{prompt(90, 11, vocab())}, long_b{prompt(70, 12, vocab())};
  Seq short_a{prompt(3, 13, vocab())}, short_b{prompt(12, 14, vocab())};
  BatchMetadata md = make_batch({&long_a, &long_b, &short_a, &short_b}, {90, 70, 3, 12});
  std::vector<float> e = run(eager.get(), md), g = run(graphs.get(), md);
  for (int step = 0; step < 4; ++step) {
    // Alternate: the long pair (6 blocks wide), then the short pair (1).
    Seq* x = step % 2 == 0 ? &long_a : &short_a;
    Seq* y = step % 2 == 0 ? &long_b : &short_b;
    x->tokens.push_back(1 + step);
    y->tokens.push_back(2 + step);
    md = make_batch({x, y}, {1, 1});
    EXPECT_EQ(md.max_blocks_per_seq, step % 2 == 0 ? 6 : 1);
    e = run(eager.get(), md);
    g = run(graphs.get(), md);
    EXPECT_LE(max_rel_error(e, g), kRelTol / 3) << "step " << step;
  }
}

TEST_F(BackendTest, CopiedBlocksDecodeLikeTheOriginal) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto gpu = make_cuda(/*graphs=*/true);
  ASSERT_TRUE(gpu);
  Seq a{prompt(27, 7, vocab())};
  BatchMetadata md = make_batch({&a}, {27});
  const std::vector<float> first = run(gpu.get(), md);
  // Fork: every block of a copied to fresh blocks, as copy-on-write does.
  Seq fork = a;
  fork.blocks.clear();
  std::vector<BlockCopy> copies;
  for (int32_t blk : a.blocks) {
    fork.blocks.push_back(next_block_++);
    copies.push_back({blk, fork.blocks.back()});
  }
  const Status s = gpu->copy_blocks(copies);
  ASSERT_TRUE(s.ok()) << s.message();
  const int32_t next = top(first, 0).first;
  a.tokens.push_back(next);
  fork.tokens.push_back(next);
  md = make_batch({&a, &fork}, {1, 1});
  const std::vector<float> both = run(gpu.get(), md);
  // Same K/V bytes, same query, same kernel: bit-identical rows.
  EXPECT_TRUE(std::equal(both.begin(), both.begin() + vocab(), both.begin() + vocab()));
}

// Preemption by swap: a sequence's blocks go to the pinned swap space, the
// pool blocks are overwritten by another sequence, and the blocks come back
// into other pool blocks; its next decode step is bit-identical to the
// same step on a copy that never left the device.
TEST_F(BackendTest, SwappedBlocksComeBackBitForBit) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto gpu = make_cuda(/*graphs=*/false);
  ASSERT_TRUE(gpu);
  int32_t num_swap = 0;
  Status s = gpu->reserve_swap_space(int64_t{1} << 20, &num_swap);
  ASSERT_TRUE(s.ok()) << s.message();
  Seq a{prompt(40, 11, vocab())};
  BatchMetadata md = make_batch({&a}, {40});
  const std::vector<float> first = run(gpu.get(), md);
  ASSERT_GE(num_swap, static_cast<int32_t>(a.blocks.size()));
  // A copy that stays on the device, for the reference step.
  Seq stay = a;
  stay.blocks.clear();
  std::vector<BlockCopy> copies, out, in;
  for (int32_t blk : a.blocks) {
    stay.blocks.push_back(next_block_++);
    copies.push_back({blk, stay.blocks.back()});
  }
  ASSERT_TRUE(gpu->copy_blocks(copies).ok());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    out.push_back({a.blocks[i], static_cast<int32_t>(num_swap - 1 - i)});  // reversed slots
  }
  s = gpu->swap_blocks(out, SwapDirection::kOut);
  ASSERT_TRUE(s.ok()) << s.message();
  // Another sequence overwrites the freed blocks.
  Seq other{prompt(40, 12, vocab())};
  other.blocks = a.blocks;
  BatchMetadata md_other = make_batch({&other}, {40});
  run(gpu.get(), md_other);
  // Back, into fresh blocks.
  Seq back = a;
  back.blocks.clear();
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    back.blocks.push_back(next_block_++);
    in.push_back({static_cast<int32_t>(num_swap - 1 - i), back.blocks.back()});
  }
  s = gpu->swap_blocks(in, SwapDirection::kIn);
  ASSERT_TRUE(s.ok()) << s.message();
  const int32_t next = top(first, 0).first;
  stay.tokens.push_back(next);
  back.tokens.push_back(next);
  md = make_batch({&stay, &back}, {1, 1});
  const std::vector<float> both = run(gpu.get(), md);
  EXPECT_TRUE(std::equal(both.begin(), both.begin() + vocab(), both.begin() + vocab()))
      << "the swapped blocks did not come back as they left";
  // A slot or block out of range is refused.
  s = gpu->swap_blocks({{0, num_swap}}, SwapDirection::kOut);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
}

TEST_F(BackendTest, BadTokenIdIsAnErrorNotACrash) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  auto gpu = make_cuda(/*graphs=*/false);
  ASSERT_TRUE(gpu);
  Seq a{{1, 2, vocab() + 5}};
  BatchMetadata md = make_batch({&a}, {3});
  std::vector<float> logits(static_cast<size_t>(vocab()));
  EXPECT_EQ(gpu->forward(md, logits.data()).code(), StatusCode::kInvalidArgument);
  // The backend still serves the next batch.
  Seq b{{1, 2, 3}};
  md = make_batch({&b}, {3});
  EXPECT_TRUE(gpu->forward(md, logits.data()).ok());
}

TEST_F(BackendTest, UnsupportedBlockSizeIsUnsupported) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  const CudaModule* module = nullptr;
  ASSERT_TRUE(CudaModule::get(&module).ok());
  CudaBackendOptions o;
  o.block_size = 8;
  o.num_blocks = 16;
  std::unique_ptr<Backend> b;
  const Status s = module->create_backend(*model_, o, &b);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(b, nullptr);
}

}  // namespace
}  // namespace pvllm
