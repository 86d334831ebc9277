// Chat templates loaded from model folders render byte for byte as
// @huggingface/jinja renders them (tests/data/chat_goldens/<model>.json):
// the four pinned reference tokenizer packages (found through
// PVLLM_REFERENCE_TOKENIZERS) and the tiny template in tests/data. Also how
// templates are found in a folder.
#include "core/chat/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/chat_golden_util.h"
#include "tests/util/tiny_model.h"

namespace pvllm::chat {
namespace {

namespace fs = std::filesystem;

ChatRequest request_of(const nlohmann::ordered_json& c) {
  ChatRequest r;
  r.messages = c["messages"];
  r.tools = c.value("tools", nlohmann::ordered_json());
  r.extra_context = c.value("extra", nlohmann::ordered_json::object());
  r.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  return r;
}

void expect_golden(const std::string& folder, const std::string& golden_name) {
  const nlohmann::ordered_json golden = testing::read_chat_golden(golden_name);
  ASSERT_TRUE(golden.is_object()) << "cannot read chat_goldens/" << golden_name << ".json";
  ChatTemplates templates;
  ASSERT_TRUE(ChatTemplates::load(folder, &templates).ok());
  EXPECT_EQ(templates.bos_token(), golden["special_tokens"].value("bos_token", ""));
  EXPECT_EQ(templates.eos_token(), golden["special_tokens"].value("eos_token", ""));
  if (!golden["has_template"].get<bool>()) {
    std::string out;
    const Status st = templates.apply(ChatRequest{}, &out);
    EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.message();
    return;
  }
  ASSERT_FALSE(golden["cases"].empty());
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(golden_name + " / " + c["name"].get<std::string>());
    std::string out;
    const Status st = templates.apply(request_of(c), &out);
    if (c.contains("error")) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
          << "the reference failed with \"" << c["error"] << "\"; got " << st.message() << out;
    } else {
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(out, c["expected"].get<std::string>());
    }
  }
}

class ReferenceTemplateTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceTemplateTest, RendersAsTheReference) {
  const char* packages = std::getenv("PVLLM_REFERENCE_TOKENIZERS");
  if (packages == nullptr || packages[0] == '\0') {
    GTEST_SKIP() << "PVLLM_REFERENCE_TOKENIZERS is not set (bash scripts/reference/install.sh)";
  }
  if (testing::test_data_dir().empty())
    GTEST_SKIP() << "PVLLM_TEST_DATA is not set (run through ctest)";
  expect_golden(std::string(packages) + "/tokenizer-" + GetParam() + "/models", GetParam());
}

INSTANTIATE_TEST_SUITE_P(Packages, ReferenceTemplateTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3"));

TEST(ChatTemplateTest, TinyTemplateRendersAsTheReference) {
  if (testing::test_data_dir().empty())
    GTEST_SKIP() << "PVLLM_TEST_DATA is not set (run through ctest)";
  expect_golden(testing::test_data_dir() + "/chat_template_tiny", "tiny");
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string render(const ChatTemplates& t, const std::string& name = "", bool with_tools = false) {
  ChatRequest r;
  r.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  r.template_name = name;
  if (with_tools) r.tools = nlohmann::ordered_json::array();
  std::string out;
  const Status st = t.apply(r, &out);
  return st.ok() ? out : "error: " + st.message();
}

TEST(ChatTemplateTest, JinjaFileWinsOverTokenizerConfig) {
  const fs::path dir = testing::make_temp_dir("chat_jinja_file");
  write(dir / "tokenizer_config.json", R"({"chat_template": "config {{ messages[0].content }}"})");
  write(dir / "chat_template.jinja", "file {{ messages[0].content }}\n");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load(dir.string(), &t).ok());
  EXPECT_EQ(render(t), "file hi");
}

TEST(ChatTemplateTest, NamedTemplatesAndToolUse) {
  const fs::path dir = testing::make_temp_dir("chat_named");
  write(dir / "tokenizer_config.json", R"({"chat_template": [
      {"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"},
      {"name": "rag", "template": "R"}]})");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load(dir.string(), &t).ok());
  EXPECT_EQ(render(t), "D");
  EXPECT_EQ(render(t, "", /*with_tools=*/true), "T");
  EXPECT_EQ(render(t, "rag"), "R");
  EXPECT_NE(render(t, "nope").find("no chat template named 'nope'"), std::string::npos);
  EXPECT_EQ(t.names(), (std::vector<std::string>{"default", "rag", "tool_use"}));
}

TEST(ChatTemplateTest, SingleFileModelLooksBesideIt) {
  const fs::path dir = testing::make_temp_dir("chat_bin");
  write(dir / "model.bin", "not read");
  write(dir / "tokenizer_config.json",
        R"({"bos_token": {"content": "<s>"}, "chat_template": "{{ bos_token }}x"})");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load((dir / "model.bin").string(), &t).ok());
  EXPECT_EQ(render(t), "<s>x");
}

TEST(ChatTemplateTest, FolderWithoutTemplateIsNotFoundAtApply) {
  const fs::path dir = testing::make_temp_dir("chat_none");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load(dir.string(), &t).ok());
  EXPECT_TRUE(t.empty());
  std::string out;
  EXPECT_EQ(t.apply(ChatRequest{}, &out).code(), StatusCode::kNotFound);
  EXPECT_EQ(ChatTemplates::load((dir / "missing").string(), &t).code(), StatusCode::kNotFound);
}

TEST(ChatTemplateTest, MalformedConfigIsCorrupt) {
  const fs::path dir = testing::make_temp_dir("chat_corrupt");
  write(dir / "tokenizer_config.json", "{\"chat_template\": ");
  ChatTemplates t;
  EXPECT_EQ(ChatTemplates::load(dir.string(), &t).code(), StatusCode::kCorruptModel);
  write(dir / "tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_EQ(ChatTemplates::load(dir.string(), &t).code(), StatusCode::kCorruptModel);
}

TEST(ChatTemplateTest, MalformedTemplateListsAndConfigsAreCorruptNamingTheFile) {
  const fs::path dir = testing::make_temp_dir("chat_corrupt_list");
  ChatTemplates t;
  for (const char* text :
       {R"({"chat_template": [{"name": 5, "template": "x"}]})",
        R"({"chat_template": [{"name": "default"}]})", R"({"chat_template": ["x"]})", "[1]"}) {
    SCOPED_TRACE(text);
    write(dir / "tokenizer_config.json", text);
    const Status st = ChatTemplates::load(dir.string(), &t);
    EXPECT_EQ(st.code(), StatusCode::kCorruptModel);
    EXPECT_NE(st.message().find("tokenizer_config.json"), std::string::npos) << st.message();
  }
}

TEST(ChatTemplateTest, RequestsTheTemplateCannotTakeAreRefused) {
  const fs::path dir = testing::make_temp_dir("chat_bad_request");
  write(dir / "tokenizer_config.json", R"({"chat_template": "x"})");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load(dir.string(), &t).ok());
  std::string out;
  ChatRequest r;
  r.messages = 5;
  Status st = t.apply(r, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("messages must be a JSON array"), std::string::npos);
  for (const char* key : {"messages", "tools", "add_generation_prompt"}) {
    SCOPED_TRACE(key);
    ChatRequest e;
    e.extra_context = {{key, 1}};
    st = t.apply(e, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(std::string("extra context variable '") + key + "'"),
              std::string::npos)
        << st.message();
  }
  ChatRequest parsed;
  st = parse_chat_request("[]", "[", nullptr, &parsed);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tools_json"), std::string::npos) << st.message();
  st = parse_chat_request("[]", nullptr, "{", &parsed);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("extra_context_json"), std::string::npos) << st.message();
}

TEST(ChatTemplateTest, UnsupportedTemplateFailsAtApplyNotAtLoad) {
  const fs::path dir = testing::make_temp_dir("chat_unsupported");
  write(dir / "tokenizer_config.json", R"({"chat_template": "{% include 'x' %}"})");
  ChatTemplates t;
  ASSERT_TRUE(ChatTemplates::load(dir.string(), &t).ok());
  std::string out;
  const Status st = t.apply(ChatRequest{}, &out);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("'include'"), std::string::npos) << st.message();
}

TEST(ChatTemplateTest, BadRequestJson) {
  ChatRequest r;
  EXPECT_EQ(parse_chat_request("[", nullptr, nullptr, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_chat_request("{}", nullptr, nullptr, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_chat_request("[1]", nullptr, nullptr, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_chat_request("[]", "{}", nullptr, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_chat_request("[]", nullptr, "[]", &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_chat_request(nullptr, nullptr, nullptr, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(parse_chat_request("[]", "null", R"({"enable_thinking": false})", &r).ok());
}

}  // namespace
}  // namespace pvllm::chat
