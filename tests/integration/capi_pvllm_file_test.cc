// A .pvllm model file through the C ABI (0.7): pvllm_engine_create serves it
// like its source folder, pvllm_model_inspect reads its header, the
// model_checksums field is honoured and range-checked, and a caller built
// against 0.6 (whose struct ends before the field) gets the default.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/model/pvllm_file.h"
#include "tests/integration/capi_generate.h"
#include "tests/util/pvllm_file_edit.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

namespace fs = std::filesystem;

class CapiPvllmFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("capi_pvllm");
    fs::create_directories(dir_ + "/hf");
    folder_ = write_tiny_hf_model(dir_ + "/hf", TinyModelSpec());
    file_ = dir_ + "/tiny.pvllm";
    convert_model(folder_, file_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static pvllm_engine_params params(const std::string& path) {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof(p));
    p.model_path = path.c_str();
    p.device = "cpu";
    p.num_threads = 1;
    p.kv_cache_bytes = 8 << 20;
    return p;
  }

  // Greedy ids of a text prompt, or the create status when it fails.
  static pvllm_status generate(const pvllm_engine_params& p, std::vector<int32_t>* ids,
                               std::string* message) {
    return generate_greedy(p, 10, ids, message);
  }

  std::string dir_, folder_, file_;
};

TEST_F(CapiPvllmFileTest, ServesTheFoldersTokensUnderEveryChecksumMode) {
  std::vector<int32_t> want;
  std::string message;
  ASSERT_EQ(generate(params(folder_), &want, &message), PVLLM_STATUS_OK) << message;
  ASSERT_EQ(want.size(), 10u);
  for (int64_t mode :
       {PVLLM_MODEL_CHECKSUMS_FULL, PVLLM_MODEL_CHECKSUMS_LAZY, PVLLM_MODEL_CHECKSUMS_NONE}) {
    pvllm_engine_params p = params(file_);
    p.model_checksums = mode;
    std::vector<int32_t> got;
    ASSERT_EQ(generate(p, &got, &message), PVLLM_STATUS_OK) << message;
    EXPECT_EQ(got, want) << "mode " << mode;
  }
}

TEST_F(CapiPvllmFileTest, ModelChecksumsIsRangeCheckedAndDefaultsToFull) {
  pvllm_engine_params d;
  pvllm_engine_params_init(&d, sizeof(d));
  EXPECT_EQ(d.model_checksums, PVLLM_MODEL_CHECKSUMS_FULL);
  for (int64_t bad : {int64_t{-1}, int64_t{3}, int64_t{1} << 40}) {
    pvllm_engine_params p = params(file_);
    p.model_checksums = bad;
    std::vector<int32_t> ids;
    std::string message;
    EXPECT_EQ(generate(p, &ids, &message), PVLLM_STATUS_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find("params->model_checksums must be"), std::string::npos) << message;
  }
  // A 0.6 caller's struct ends before the field: whatever lies beyond its
  // struct_size is not read.
  std::string bytes = read_bytes(file_);
  bytes[bytes.size() - 1] ^= 0x40;  // the last tensor: the packed head
  write_bytes(file_, bytes);
  pvllm_engine_params old = params(file_);
  old.struct_size = offsetof(pvllm_engine_params, model_checksums);
  old.model_checksums = PVLLM_MODEL_CHECKSUMS_NONE;
  std::vector<int32_t> ids;
  std::string message;
  EXPECT_EQ(generate(old, &ids, &message), PVLLM_STATUS_CORRUPT_MODEL) << message;
  EXPECT_NE(message.find("lm_head.weight does not match its checksum"), std::string::npos)
      << message;
  pvllm_engine_params off = params(file_);
  off.model_checksums = PVLLM_MODEL_CHECKSUMS_NONE;
  EXPECT_EQ(generate(off, &ids, &message), PVLLM_STATUS_OK) << message;
}

TEST_F(CapiPvllmFileTest, InspectAndEstimateReadTheHeader) {
  pvllm_model_info* raw = nullptr;
  pvllm_error* error = nullptr;
  ASSERT_EQ(pvllm_model_inspect(file_.c_str(), &raw, &error), PVLLM_STATUS_OK)
      << take_message(error);
  pvllm_model_config c;
  pvllm_model_config_init(&c, sizeof(c));
  ASSERT_EQ(pvllm_model_info_config(raw, &c, nullptr), PVLLM_STATUS_OK);
  EXPECT_STREQ(c.format, "pvllm");
  EXPECT_EQ(c.num_layers, 2);
  // The packed file's tensors: per layer two norms and four matrices, plus
  // the embedding, the final norm and the packed head.
  EXPECT_EQ(pvllm_model_info_num_tensors(raw), 2u * 6 + 3);
  pvllm_model_info_free(raw);
  pvllm_engine_params p = params(file_);
  pvllm_memory_estimate e;
  pvllm_memory_estimate_init(&e, sizeof(e));
  ASSERT_EQ(pvllm_estimate_memory(&p, &e, nullptr), PVLLM_STATUS_OK);
  // The weights are the tensor table's bytes, as stored.
  std::shared_ptr<MappedFile> f;
  pvllm_format::FileHeader h;
  ASSERT_TRUE(pvllm_format::open_file(file_, &f, &h).ok());
  uint64_t stored = 0;
  for (const auto& t : h.tensors) stored += t.size;
  EXPECT_EQ(e.weight_bytes, stored);
  EXPECT_GT(e.weight_bytes, 0u);
}

}  // namespace
}  // namespace pvllm::testing
