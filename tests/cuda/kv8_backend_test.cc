// The CUDA backend with an 8-bit KV pool (kv_cache_dtype int8 or fp8_e4m3)
// on the tiny bf16 model of backend_test.cc:
//  - at create (no GPU needed, the module is opened by $PVLLM_CUDA_BACKEND):
//    which kv_cache_dtype the backend refuses, by the core rule
//    (cuda_kv_cache_dtype), and that an 8-bit pool lifts the fast kernels'
//    block-size limit (the generic kernels serve it);
//  - on a GPU: logits against the CPU backend (int8: the same encoding),
//    the pool's bytes per block against the memory estimate's, and blocks
//    copied and swapped as raw bytes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/backend/cuda_module_interface.h"
#include "core/engine/engine_config.h"
#include "core/kv/kv_cache_dtype.h"
#include "core/model/model.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/tiny_batches.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kMaxModelLen = 256;

using cuda_test::prompt;
using cuda_test::Seq;

// int8 on both backends: the GPU quantizes bf16 rows, the CPU fp32 rows, so
// a code may differ by one here and there; the bf16 bound of backend_test
// (3e-2 of the row's scale) holds with room. fp8 e4m3 keeps 3 mantissa
// bits (half a step is 2^-4 relative) against the CPU's fp32 cache: a
// looser bound, still far below what a wrong scale or row would do.
constexpr float kInt8RelTol = 3e-2f;
constexpr float kFp8RelTol = 1e-1f;

class Kv8BackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    spec.hidden_size = 256;
    spec.num_heads = 4;  // head_dim 64: the fast kernels' shape, which 8-bit caches leave
    spec.num_kv_heads = 2;
    spec.intermediate_size = 512;
    spec.num_layers = 2;
    spec.max_position_embeddings = kMaxModelLen;
    spec.dtype = DType::kBF16;
    spec.tie_word_embeddings = false;
    dir_ = new std::string(
        testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_cuda_kv8_test"), spec));
    std::unique_ptr<Model> model;
    const Status s = load_model(*dir_, &model);
    ASSERT_TRUE(s.ok()) << s.message();
    model_ = model.release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  // The module's create with `kv` (and dtype 1, bf16) over a small pool.
  static Status create(KvCacheDtype kv, int32_t block_size, std::unique_ptr<Backend>* out,
                       int32_t dtype = 1) {
    const CudaModule* module = nullptr;
    PVLLM_RETURN_IF_ERROR(CudaModule::get(&module));
    CudaBackendOptions o;
    o.block_size = block_size;
    o.num_blocks = 16;
    o.dtype = dtype;
    o.kv_cache_dtype = static_cast<int32_t>(kv);
    o.max_num_batched_tokens = 64;
    o.max_num_seqs = 4;
    o.max_model_len = kMaxModelLen;
    o.enable_cuda_graphs = 0;
    return module->create_backend(*model_, o, out);
  }

  std::unique_ptr<Backend> make_cuda(KvCacheDtype kv, bool graphs) {
    std::unique_ptr<Backend> b;
    const Status s = cuda_test::make_cuda_backend(*model_, kBlockSize, kNumBlocks, kMaxModelLen,
                                                  graphs, &b, /*dtype=*/1, kv);
    EXPECT_TRUE(s.ok()) << s.message();
    return b;
  }
  std::unique_ptr<Backend> make_cpu(KvCacheDtype kv) {
    std::unique_ptr<Backend> b;
    const Status s = cuda_test::make_cpu_backend(*model_, kBlockSize, kNumBlocks, &b, kv);
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

  static Model* model_;
  static std::string* dir_;  // the model's folder, for the memory estimate
  int32_t next_block_ = 0;
};

Model* Kv8BackendTest::model_ = nullptr;
std::string* Kv8BackendTest::dir_ = nullptr;

// check_shapes resolves kv_cache_dtype before touching a device, so these
// run on any machine: a refusal names the kv_cache_dtype; a dtype the
// backend serves gets past it (to the device check, without a GPU).
TEST_F(Kv8BackendTest, CreateRefusesOnlyTheDtypesTheCudaPoolDoesNotStore) {
  ASSERT_NE(model_, nullptr);
  const CudaModule* module = nullptr;
  const Status loaded = CudaModule::get(&module);
  if (!loaded.ok()) GTEST_SKIP() << "no CUDA module: " << loaded.message();
  const bool has_device = cuda_test::missing_device_reason().empty();
  struct Case {
    KvCacheDtype kv;
    int32_t dtype;
    bool served;
  };
  const Case cases[] = {
      {KvCacheDtype::kAuto, 1, true},    {KvCacheDtype::kInt8, 1, true},
      {KvCacheDtype::kFp8E4M3, 1, true}, {KvCacheDtype::kBF16, 1, true},
      {KvCacheDtype::kF16, 1, false},    {KvCacheDtype::kF32, 1, false},
      {KvCacheDtype::kF16, 2, true},     {KvCacheDtype::kBF16, 2, false},
      {KvCacheDtype::kF32, 3, true},     {KvCacheDtype::kInt8, 3, true},
      {KvCacheDtype::kBF16, 3, false},   {KvCacheDtype::kFp8E4M3, 2, true},
  };
  for (const Case& c : cases) {
    std::unique_ptr<Backend> b;
    const Status s = create(c.kv, kBlockSize, &b, c.dtype);
    const std::string what =
        std::string(kv_cache_dtype_name(c.kv)) + " at dtype " + std::to_string(c.dtype);
    if (c.served) {
      EXPECT_EQ(s.message().find("kv_cache_dtype"), std::string::npos)
          << what << ": " << s.message();
      if (has_device) {
        EXPECT_TRUE(s.ok()) << what << ": " << s.message();
      }
    } else {
      EXPECT_EQ(s.code(), StatusCode::kUnsupported) << what << ": " << s.message();
      EXPECT_NE(s.message().find(std::string("kv_cache_dtype ") + kv_cache_dtype_name(c.kv)),
                std::string::npos)
          << s.message();
      EXPECT_EQ(b, nullptr);
    }
  }
  std::unique_ptr<Backend> b;
  const Status s = create(static_cast<KvCacheDtype>(7), kBlockSize, &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
}

// bf16 at head_dim 64 runs the fast kernels, which serve block sizes 16,
// 32 and 256 only; an 8-bit pool is read by the generic kernels, which take
// any.
TEST_F(Kv8BackendTest, AnEightBitPoolTakesAnyBlockSize) {
  ASSERT_NE(model_, nullptr);
  const CudaModule* module = nullptr;
  const Status loaded = CudaModule::get(&module);
  if (!loaded.ok()) GTEST_SKIP() << "no CUDA module: " << loaded.message();
  std::unique_ptr<Backend> b;
  Status s = create(KvCacheDtype::kAuto, 8, &b);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("block_size"), std::string::npos) << s.message();
  for (KvCacheDtype kv : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    s = create(kv, 8, &b);
    EXPECT_EQ(s.message().find("block_size"), std::string::npos) << s.message();
    if (cuda_test::missing_device_reason().empty()) {
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
}

// Prefill, a chunked prefill and decode steps, against the CPU backend.
TEST_F(Kv8BackendTest, LogitsFollowTheCpuBackend) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  for (KvCacheDtype kv : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    SCOPED_TRACE(kv_cache_dtype_name(kv));
    next_block_ = 0;
    const float tol = kv == KvCacheDtype::kInt8 ? kInt8RelTol : kFp8RelTol;
    auto cpu = make_cpu(kv == KvCacheDtype::kInt8 ? KvCacheDtype::kInt8 : KvCacheDtype::kF32);
    auto gpu = make_cuda(kv, /*graphs=*/true);
    ASSERT_TRUE(cpu && gpu);
    Seq a{prompt(37, 1, vocab())}, b{prompt(9, 2, vocab())}, c{prompt(70, 3, vocab())};
    BatchMetadata md = make_batch({&a, &b}, {37, 9});
    std::vector<float> ref = run(cpu.get(), md), got = run(gpu.get(), md);
    EXPECT_LE(cuda_test::max_rel_error(ref, got, vocab()), tol) << "prefill";
    md = make_batch({&c}, {40});
    run(cpu.get(), md);
    run(gpu.get(), md);
    for (int step = 0; step < 5; ++step) {
      a.tokens.push_back(cuda_test::top(ref, 0, vocab()).first);
      b.tokens.push_back(cuda_test::top(ref, 1, vocab()).first);
      md = step == 0 ? make_batch({&a, &b, &c}, {1, 1, 30}) : make_batch({&a, &b}, {1, 1});
      ref = run(cpu.get(), md);
      got = run(gpu.get(), md);  // decode steps after the first replay graphs
      EXPECT_LE(cuda_test::max_rel_error(ref, got, vocab()), tol) << "step " << step;
    }
  }
}

// What the pool allocates per block (the bytes a block moves when swapped)
// is what pvllm_estimate_memory reports for device "cuda", and the pool has
// the blocks the estimate counts when their number is fixed.
TEST_F(Kv8BackendTest, ThePoolsBlockIsTheEstimatesBlock) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  const ModelConfig& m = model_->config;
  for (KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    auto gpu = make_cuda(kv, /*graphs=*/false);
    ASSERT_TRUE(gpu);
    EngineConfig config;
    config.model_path = *dir_;
    config.device = "cuda";
    config.dtype = 1;
    config.block_size = kBlockSize;
    config.num_kv_blocks = kNumBlocks;
    config.kv_cache_dtype = kv;
    MemoryEstimate e;
    const Status st = estimate_memory(config, &e);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(gpu->preemption_costs().block_bytes, e.kv_bytes_per_block) << kv_cache_dtype_name(kv);
    EXPECT_EQ(gpu->num_blocks(), e.num_blocks);
    KvCacheDtype resolved = KvCacheDtype::kAuto;
    ASSERT_TRUE(cuda_kv_cache_dtype(kv, DType::kBF16, &resolved).ok());
    const size_t want = kv_bytes_per_block(m, kBlockSize, resolved);
    const size_t per_head = kv_cache_dtype_is_8bit(resolved) ? size_t{kBlockSize} * (m.head_dim + 2)
                                                             : size_t{kBlockSize} * m.head_dim * 2;
    EXPECT_EQ(want, size_t{2} * m.num_layers * m.num_kv_heads * per_head);
    EXPECT_EQ(gpu->preemption_costs().block_bytes, want) << kv_cache_dtype_name(kv);
  }
}

// Copy-on-write copies and swaps move an 8-bit block's codes and scales as
// bytes: a copy decodes bit for bit like the original.
TEST_F(Kv8BackendTest, CopiedAndSwappedBlocksDecodeLikeTheOriginal) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  ASSERT_NE(model_, nullptr);
  for (KvCacheDtype kv : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    SCOPED_TRACE(kv_cache_dtype_name(kv));
    next_block_ = 0;
    auto gpu = make_cuda(kv, /*graphs=*/false);
    ASSERT_TRUE(gpu);
    int32_t num_swap = 0;
    ASSERT_TRUE(gpu->reserve_swap_space(int64_t{1} << 20, &num_swap).ok());
    Seq a{prompt(40, 7, vocab())};
    const std::vector<float> first = run(gpu.get(), make_batch({&a}, {40}));
    ASSERT_GE(num_swap, static_cast<int32_t>(a.blocks.size()));
    Seq copy = a, back = a;
    copy.blocks.clear();
    back.blocks.clear();
    std::vector<BlockCopy> copies, out, in;
    for (size_t i = 0; i < a.blocks.size(); ++i) {
      copy.blocks.push_back(next_block_++);
      copies.push_back({a.blocks[i], copy.blocks.back()});
      out.push_back({a.blocks[i], static_cast<int32_t>(i)});
      back.blocks.push_back(next_block_++);
      in.push_back({static_cast<int32_t>(i), back.blocks.back()});
    }
    ASSERT_TRUE(gpu->copy_blocks(copies).ok());
    ASSERT_TRUE(gpu->swap_blocks(out, SwapDirection::kOut).ok());
    ASSERT_TRUE(gpu->swap_blocks(in, SwapDirection::kIn).ok());
    const int32_t next = cuda_test::top(first, 0, vocab()).first;
    for (Seq* s : {&a, &copy, &back}) s->tokens.push_back(next);
    const std::vector<float> rows = run(gpu.get(), make_batch({&a, &copy, &back}, {1, 1, 1}));
    const size_t v = static_cast<size_t>(vocab());
    EXPECT_TRUE(std::equal(rows.begin(), rows.begin() + v, rows.begin() + v)) << "copied";
    EXPECT_TRUE(std::equal(rows.begin(), rows.begin() + v, rows.begin() + 2 * v)) << "swapped";
  }
}

}  // namespace
}  // namespace pvllm
