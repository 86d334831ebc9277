// resolve_model_files: the one rule for what a model path names, and the
// loaders, tokenizer and chat templates that follow it.
#include "core/model/model_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/model/model.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("model_files"); }

  // A llama2.c checkpoint in its own folder, with tokenizer.model beside it.
  std::string llama2c_folder(const std::string& name) {
    const std::string folder = dir_ + "/" + name;
    fs::create_directories(folder);
    return testing::write_tiny_llama2c_model(folder, testing::TinyModelSpec{});
  }

  static void touch(const fs::path& path, const std::string& text = "x") {
    std::ofstream(path, std::ios::binary) << text;
  }

  static ModelFiles resolve_or_die(const std::string& path) {
    ModelFiles files;
    const Status st = resolve_model_files(path, &files);
    EXPECT_TRUE(st.ok()) << st.message();
    return files;
  }

  std::string dir_;
};

TEST_F(ModelFilesTest, Llama2cBinFindsTheTokenizerBesideIt) {
  const std::string bin = llama2c_folder("a");
  const ModelFiles files = resolve_or_die(bin);
  EXPECT_EQ(files.kind, ModelFiles::Kind::kLlama2c);
  EXPECT_EQ(files.weights, bin);
  EXPECT_EQ(fs::path(files.tokenizer).filename(), "tokenizer.model");
}

TEST_F(ModelFilesTest, AFolderHoldingOneBinIsThatCheckpoint) {
  const std::string bin = llama2c_folder("b");
  const std::string folder = fs::path(bin).parent_path().string();
  // llama2.c's own tokenizer files are not checkpoints.
  touch(fs::path(folder) / "tok512.bin");
  touch(fs::path(folder) / "tokenizer.bin");
  const ModelFiles files = resolve_or_die(folder);
  EXPECT_EQ(files.kind, ModelFiles::Kind::kLlama2c);
  EXPECT_EQ(files.weights, bin);
  EXPECT_EQ(files.path, folder);
  std::unique_ptr<Model> model;
  const Status st = load_model(folder, &model);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(model->format, ModelFormat::kLlama2c);
  EXPECT_EQ(fs::path(model->tokenizer_path).filename(), "tokenizer.model");
}

TEST_F(ModelFilesTest, TheOnlyDotModelFileIsTheTokenizerWhenNoneIsNamedTokenizer) {
  const std::string bin = llama2c_folder("c");
  const fs::path folder = fs::path(bin).parent_path();
  fs::rename(folder / "tokenizer.model", folder / "tok512.model");
  EXPECT_EQ(fs::path(resolve_or_die(bin).tokenizer).filename(), "tok512.model");
  touch(folder / "other.model");  // two candidates: none is guessed
  EXPECT_EQ(resolve_or_die(bin).tokenizer, "");
}

TEST_F(ModelFilesTest, AFolderWithTwoCheckpointsAsksWhichOne) {
  const std::string bin = llama2c_folder("d");
  const fs::path folder = fs::path(bin).parent_path();
  fs::copy_file(bin, folder / "second.bin");
  ModelFiles files;
  const Status st = resolve_model_files(folder.string(), &files);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("name the one to use"), std::string::npos) << st.message();
}

TEST_F(ModelFilesTest, HuggingFaceFolder) {
  fs::create_directories(dir_ + "/hf");
  const std::string folder = testing::write_tiny_hf_model(dir_ + "/hf", testing::TinyModelSpec{});
  const ModelFiles files = resolve_or_die(folder);
  EXPECT_EQ(files.kind, ModelFiles::Kind::kHuggingFace);
  EXPECT_EQ(files.weights, folder);
  EXPECT_EQ(fs::path(files.tokenizer).filename(), "tokenizer.model");
}

TEST_F(ModelFilesTest, ATokenizerAloneServesTokenizingButNotLoading) {
  const fs::path folder = fs::path(dir_) / "tok";
  fs::create_directories(folder);
  fs::copy_file(testing::tiny_tokenizer_path(), folder / "tokenizer.model");
  for (const std::string& path : {folder.string(), (folder / "tokenizer.model").string()}) {
    SCOPED_TRACE(path);
    const ModelFiles files = resolve_or_die(path);
    EXPECT_EQ(files.kind, ModelFiles::Kind::kTokenizerOnly);
    EXPECT_FALSE(files.has_weights());
    std::unique_ptr<Model> model;
    const Status st = load_model(path, &model);
    EXPECT_EQ(st.code(), StatusCode::kNotFound);
    EXPECT_NE(st.message().find("no weights"), std::string::npos) << st.message();
  }
}

TEST_F(ModelFilesTest, AFolderOfChatTemplatesAloneResolves) {
  const fs::path folder = fs::path(dir_) / "chat";
  fs::create_directories(folder);
  touch(folder / "chat_template.jinja", "{{ messages[0].content }}");
  const ModelFiles files = resolve_or_die(folder.string());
  EXPECT_EQ(files.kind, ModelFiles::Kind::kTokenizerOnly);
  EXPECT_EQ(files.tokenizer, "");
}

TEST_F(ModelFilesTest, WhatIsNotAModelSaysWhatWasLookedFor) {
  ModelFiles files;
  Status st = resolve_model_files(dir_ + "/missing", &files);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  const fs::path empty = fs::path(dir_) / "empty";
  fs::create_directories(empty);
  st = resolve_model_files(empty.string(), &files);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("tokenizer.model"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(".pvllm"), std::string::npos) << st.message();
  touch(empty / "notes.txt");
  st = resolve_model_files((empty / "notes.txt").string(), &files);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("llama2.c"), std::string::npos) << st.message();
  EXPECT_EQ(resolve_model_files("", &files).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pvllm
