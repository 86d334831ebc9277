// The CPU kernels' instruction-set variants (kernels/cpu/isa.h): every
// variant this CPU can run gives the same bits as the others on the same
// inputs, the choice follows PVLLM_CPU_ISA, and a value naming no variant
// or one the CPU lacks is a clear status (the ctest runs cpu_isa_forced_*
// set it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend/registry.h"
#include "core/base/tensor.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_matrix.h"
#include "tests/util/cpu_variants.h"

namespace pvllm::cpu {
namespace {

#if defined(__x86_64__)
using testing::Variant;
using testing::variants;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(CpuIsaTest, EveryVariantGivesTheSameBits) {
  const std::vector<Variant> all = variants();
  ASSERT_TRUE(all[0].runs_here) << "an x86-64 machine below x86-64-v2";
  const int64_t n = 1000;  // not a multiple of 8 or 16: the tails count too
  const std::vector<float> a = random_floats(n, 1), rows = random_floats(n * 7, 2);
  const std::vector<float> weight = random_floats(n, 3);
  std::vector<float> ref_many(7), ref_norm(n), ref_axpy(n, 0.5f);
  all[0].table->dot_many(a.data(), rows.data(), 7, n, ref_many.data());
  const float ref_dot = all[0].table->dot(a.data(), rows.data(), n);
  all[0].table->rmsnorm(a.data(), weight.data(), 1, n, 1e-5f, ref_norm.data());
  all[0].table->axpy(0.25f, a.data(), ref_axpy.data(), n);
  int compared = 0;
  for (const Variant& v : all) {
    if (!v.runs_here) continue;
    ++compared;
    std::vector<float> many(7), norm(n), ax(n, 0.5f);
    const float d = v.table->dot(a.data(), rows.data(), n);
    v.table->dot_many(a.data(), rows.data(), 7, n, many.data());
    v.table->rmsnorm(a.data(), weight.data(), 1, n, 1e-5f, norm.data());
    v.table->axpy(0.25f, a.data(), ax.data(), n);
    EXPECT_EQ(std::memcmp(&d, &ref_dot, sizeof d), 0) << v.name << " dot";
    EXPECT_EQ(std::memcmp(many.data(), ref_many.data(), many.size() * 4), 0) << v.name;
    EXPECT_EQ(std::memcmp(norm.data(), ref_norm.data(), norm.size() * 4), 0) << v.name;
    EXPECT_EQ(std::memcmp(ax.data(), ref_axpy.data(), ax.size() * 4), 0) << v.name;
  }
  std::printf("variants compared on this CPU: %d of 3\n", compared);
}

// The GEMM (eight-lane tiles on AVX2, sixteen-lane ones on AVX-512) and the
// vector exp behind SiLU give the same bits on every variant too.
TEST(CpuIsaTest, EveryVariantMultipliesAndActivatesAlike) {
  const std::vector<Variant> all = variants();
  const int64_t in = 100, out = 75;  // a partial last panel, a partial group
  const std::vector<float> x = random_floats(7 * in, 4), values = random_floats(out * in, 5);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(&bytes[4 * i], &values[i], 4);
      } else {
        const uint16_t h =
            dtype == DType::kF16 ? float_to_fp16(values[i]) : float_to_bf16(values[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
    Tensor w;
    w.name = "w";
    w.dtype = dtype;
    w.shape = {out, in};
    w.data = bytes.data();
    PackedMatrix packed;
    ASSERT_TRUE(PackedMatrix::pack(w, nullptr, &packed).ok());
    for (int64_t n : {1, 3, 7}) {
      std::vector<float> ref(n * out);
      all[0].table->matmul(nullptr, x.data(), n, packed, ref.data());
      for (const Variant& v : all) {
        if (!v.runs_here) continue;
        std::vector<float> got(n * out), wide(n * out);
        v.table->matmul(nullptr, x.data(), n, packed, got.data());
        v.table->matmul_wide(nullptr, x.data(), n, packed, wide.data());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * 4), 0)
            << v.name << " " << dtype_name(dtype) << " n=" << n;
        EXPECT_EQ(std::memcmp(wide.data(), ref.data(), wide.size() * 4), 0)
            << v.name << " wide " << dtype_name(dtype) << " n=" << n;
      }
    }
  }
  std::vector<float> gate = random_floats(1003, 6), up = random_floats(1003, 7);
  for (float& g : gate) g *= 30.0f;  // exp over a wide range, both clamps
  std::vector<float> ref(gate.size());
  all[0].table->silu_mul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), ref.data());
  for (const Variant& v : all) {
    if (!v.runs_here) continue;
    std::vector<float> got(gate.size());
    v.table->silu_mul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), got.data());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * 4), 0) << v.name << " silu";
  }
}

TEST(CpuIsaTest, TheChoiceFollowsPvllmCpuIsa) {
  const char* forced = std::getenv("PVLLM_CPU_ISA");
  const std::string want = forced != nullptr ? forced : "";
  const Status st = cpu_isa_status();
  if (want.empty() || want == "auto") {
    ASSERT_TRUE(st.ok()) << st.message();
    // The best this CPU runs.
    const char* best = "x86-64-v2";
    for (const Variant& v : variants()) {
      if (v.runs_here) best = v.name;
    }
    EXPECT_STREQ(cpu_isa_name(active_cpu_isa()), best);
    return;
  }
  bool known = false;
  for (const Variant& v : variants()) {
    if (want != v.name) continue;
    known = true;
    if (v.runs_here) {
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(want, cpu_isa_name(active_cpu_isa()));
    } else {
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
      EXPECT_NE(st.message().find("cannot run"), std::string::npos) << st.message();
    }
  }
  if (!known) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("names no CPU kernel variant"), std::string::npos) << st.message();
  }
}
#else
TEST(CpuIsaTest, OneGenericVariant) { EXPECT_STREQ(cpu_isa_name(active_cpu_isa()), "generic"); }
#endif

// pvllm_cpu_isa asks the backend registry, which the CPU backend answers
// with the variant its kernels run (so the C ABI includes no kernel header).
TEST(CpuIsaTest, TheRegistryAnswersWithTheActiveVariant) {
  EXPECT_STREQ(cpu_backend_isa(), cpu_isa_name(active_cpu_isa()));
}

}  // namespace
}  // namespace pvllm::cpu
