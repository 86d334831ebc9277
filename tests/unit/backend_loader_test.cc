// select_device and open_backend (core/backend/backend_loader.h) without a
// GPU: the CPU backend by name on the caller's pool, asked for only when a
// host backend opens; the factory hook, which gets the weights row-major;
// and what "cuda" and "auto" do when no CUDA device is usable (those skip
// on a machine with one). tests/integration/cuda_module_test.cc drives the
// CUDA path and the fallback through a fake module.
#include "core/backend/backend_loader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/registry.h"
#include "core/model/model.h"
#include "core/model/pvllm_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

using testing::make_temp_dir;
using testing::TinyModelSpec;
using testing::write_tiny_hf_model;

class BackendLoaderTest : public ::testing::Test {
 protected:
  // A tiny model as a packed .pvllm file: its projections in the CPU
  // backend's panel layout, which only the CPU backend reads.
  static void SetUpTestSuite() {
    const std::string hf =
        write_tiny_hf_model(make_temp_dir("pvllm_backend_loader_hf"), TinyModelSpec{});
    std::unique_ptr<Model> model;
    ASSERT_TRUE(load_model(hf, &model).ok());
    path_ = new std::string(make_temp_dir("pvllm_backend_loader_test") + "/m.pvllm");
    ASSERT_TRUE(write_pvllm(model.get(), *path_, ConvertOptions()).ok());
  }
  static void TearDownTestSuite() {
    delete path_;
    path_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(path_, nullptr) << "the suite's model was not written";
    ASSERT_TRUE(load_model(*path_, &model_).ok());
    ASSERT_TRUE(model_->weights.is_packed());
  }

  // Options whose host pool is `num_blocks` blocks; host_asks_ counts the
  // times open_backend asks for it.
  OpenBackendOptions host_options(int32_t num_blocks) {
    OpenBackendOptions o;
    o.num_threads = 1;
    o.host_num_blocks = [this, num_blocks](int32_t* n) {
      ++host_asks_;
      *n = num_blocks;
      return Status::Ok();
    };
    return o;
  }

  static bool cuda_usable() {
    DeviceSpec device;
    return select_device("cuda", &device).ok();
  }

  static std::string* path_;
  std::unique_ptr<Model> model_;
  int host_asks_ = 0;
};

std::string* BackendLoaderTest::path_ = nullptr;

TEST_F(BackendLoaderTest, SelectDeviceParsesTheDeviceString) {
  DeviceSpec device{DeviceSpec::Kind::kAuto, 3};
  ASSERT_TRUE(select_device("cpu", &device).ok());
  EXPECT_EQ(device.kind, DeviceSpec::Kind::kCpu);
  EXPECT_EQ(device.index, 0);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", ""}) {
    const Status st = select_device(bad, &device);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find(std::string("got \"") + bad + "\""), std::string::npos)
        << st.message();
  }
}

TEST_F(BackendLoaderTest, TheCpuDeviceOpensTheRegisteredCpuBackendOnTheCallersPool) {
  OpenBackendOptions o = host_options(8);
  o.block_size = 32;
  std::unique_ptr<Backend> backend;
  bool on_cuda = true;
  ASSERT_TRUE(open_backend({DeviceSpec::Kind::kCpu, 0}, model_.get(), o, &backend, &on_cuda).ok());
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name().rfind("cpu", 0), 0u) << backend->name();
  EXPECT_EQ(backend->num_blocks(), 8);
  EXPECT_EQ(backend->block_size(), 32);
  EXPECT_FALSE(on_cuda);
  EXPECT_EQ(host_asks_, 1);
  // The CPU backend reads the panel layout as mapped: nothing was unpacked.
  EXPECT_TRUE(model_->weights.is_packed());
}

TEST_F(BackendLoaderTest, TheCallersPlanRefusingIsTheFailure) {
  OpenBackendOptions o;
  o.host_num_blocks = [](int32_t*) { return OutOfMemory("the plan says no"); };
  std::unique_ptr<Backend> backend;
  const Status st = open_backend({DeviceSpec::Kind::kCpu, 0}, model_.get(), o, &backend);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(st.message(), "the plan says no");
  EXPECT_EQ(backend, nullptr);
}

TEST_F(BackendLoaderTest, AHostBackendNeedsThePoolsSize) {
  std::unique_ptr<Backend> backend;
  const Status st =
      open_backend({DeviceSpec::Kind::kCpu, 0}, model_.get(), OpenBackendOptions(), &backend);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("host_num_blocks"), std::string::npos) << st.message();
  EXPECT_EQ(backend, nullptr);
}

// The factory serves whatever the device says (it is not looked at: no
// module is asked), on the caller's pool, with the weights row-major.
TEST_F(BackendLoaderTest, TheFactoryServesInsteadOfTheDeviceWithRowMajorWeights) {
  OpenBackendOptions o = host_options(6);
  o.block_size = 32;
  BackendOptions seen;
  bool saw_packed = true;
  o.factory = [&](const Model& m, const BackendOptions& bo, std::unique_ptr<Backend>* out) {
    seen = bo;
    saw_packed = m.weights.is_packed();
    return create_backend("cpu", m, bo, out);
  };
  std::unique_ptr<Backend> backend;
  bool on_cuda = true;
  ASSERT_TRUE(open_backend({DeviceSpec::Kind::kCuda, 5}, model_.get(), o, &backend, &on_cuda).ok());
  ASSERT_NE(backend, nullptr);
  EXPECT_FALSE(on_cuda);
  EXPECT_FALSE(saw_packed);
  EXPECT_EQ(seen.num_blocks, 6);
  EXPECT_EQ(seen.block_size, 32);
  EXPECT_EQ(seen.num_threads, 1);
  EXPECT_EQ(host_asks_, 1);
}

TEST_F(BackendLoaderTest, AFactoryThatMakesNoBackendIsAnInternalError) {
  OpenBackendOptions o = host_options(6);
  o.factory = [](const Model&, const BackendOptions&, std::unique_ptr<Backend>*) {
    return Status::Ok();
  };
  std::unique_ptr<Backend> backend;
  const Status st = open_backend({DeviceSpec::Kind::kCpu, 0}, model_.get(), o, &backend);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(), "the backend factory returned no backend");
}

TEST_F(BackendLoaderTest, CudaWithoutAUsableDeviceIsUnsupportedWithTheReason) {
  if (cuda_usable()) GTEST_SKIP() << "a CUDA device is usable here";
  DeviceSpec device;
  Status st = select_device("cuda", &device);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message().rfind("device \"cuda:0\": ", 0), 0u) << st.message();
  // open_backend on its own says why too (no module, no driver, no device),
  // and never asks for a host pool.
  std::unique_ptr<Backend> backend;
  bool on_cuda = true;
  st =
      open_backend({DeviceSpec::Kind::kCuda, 0}, model_.get(), host_options(8), &backend, &on_cuda);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_FALSE(st.message().empty());
  EXPECT_EQ(backend, nullptr);
  EXPECT_FALSE(on_cuda);
  EXPECT_EQ(host_asks_, 0);
}

TEST_F(BackendLoaderTest, AutoWithoutAUsableDeviceLandsOnTheCpu) {
  if (cuda_usable()) GTEST_SKIP() << "a CUDA device is usable here";
  // Settled before loading: "auto" is the CPU.
  DeviceSpec device;
  ASSERT_TRUE(select_device("auto", &device).ok());
  EXPECT_EQ(device.kind, DeviceSpec::Kind::kCpu);
  std::unique_ptr<Backend> backend;
  bool on_cuda = true;
  ASSERT_TRUE(open_backend(device, model_.get(), host_options(8), &backend, &on_cuda).ok());
  EXPECT_EQ(backend->name().rfind("cpu", 0), 0u) << backend->name();
  EXPECT_FALSE(on_cuda);
  // An unsettled "auto" falls back as well: the module is missing or finds
  // no device (UNSUPPORTED either way).
  backend.reset();
  on_cuda = true;
  ASSERT_TRUE(
      open_backend({DeviceSpec::Kind::kAuto, 0}, model_.get(), host_options(8), &backend, &on_cuda)
          .ok());
  EXPECT_EQ(backend->name().rfind("cpu", 0), 0u) << backend->name();
  EXPECT_FALSE(on_cuda);
  EXPECT_EQ(host_asks_, 2);
}

}  // namespace
}  // namespace pvllm
