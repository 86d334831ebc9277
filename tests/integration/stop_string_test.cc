// Stop strings across token boundaries and inside UTF-8 characters: the
// engine holds back the tail of the streamed text that could still begin a
// stop string, so no event ever shows part of one, and no event splits a
// character. The model's draws are replaced by a script (the tokens of a
// known text, with emoji the tiny tokenizer only has as byte-fallback
// pieces), so the test knows exactly which text comes and where every token
// boundary falls.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/tokenizer/utf8.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/integration/engine_harness.h"
#include "tests/integration/forwarding_backend.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

// The CPU backend with each draw replaced by the script's token for the
// sample's step (the model still runs, so its KV cache is real).
class ScriptedBackend final : public ForwardingBackend {
 public:
  ScriptedBackend(std::unique_ptr<Backend> inner, const std::vector<int32_t>* script)
      : ForwardingBackend(std::move(inner)), script_(script) {}
  std::string name() const override { return "scripted " + inner().name(); }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    PVLLM_RETURN_IF_ERROR(inner().forward_sample(md, rows, out));
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t step = static_cast<size_t>(rows[i].step);
      (*out)[i].token_id = step < script_->size() ? (*script_)[step] : script_->back();
    }
    return Status::Ok();
  }

 private:
  const std::vector<int32_t>* script_;
};

class StopStringTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 256;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("stop_string_test"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  void SetUp() override {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 1;
    c.backend_factory = [this](const Model& m, const BackendOptions& o,
                               std::unique_ptr<Backend>* out) {
      std::unique_ptr<Backend> cpu;
      PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
      *out = std::make_unique<ScriptedBackend>(std::move(cpu), &script_);
      return Status::Ok();
    };
    engine_ = make_engine(c);
    ASSERT_NE(engine_, nullptr);
    ASSERT_TRUE(engine_->tokenizer()->encode(kText, false, &script_).ok());
    // What the script streams after the prompt: the decoded whole minus the
    // decoded prompt (the tokenizer's leading space included).
    std::vector<int32_t> prompt, all;
    ASSERT_TRUE(engine_->tokenizer()->encode(kPrompt, true, &prompt).ok());
    all = prompt;
    all.insert(all.end(), script_.begin(), script_.end());
    std::string whole, prompt_text;
    ASSERT_TRUE(engine_->tokenizer()->decode(all, &whole).ok());
    ASSERT_TRUE(engine_->tokenizer()->decode(prompt, &prompt_text).ok());
    ASSERT_EQ(whole.compare(0, prompt_text.size(), prompt_text), 0);
    text_ = whole.substr(prompt_text.size());
    ASSERT_NE(text_.find(kText), std::string::npos);
  }

  // Each event's text, in order, for one greedy request following the
  // script with `stops`; also checks every event is whole UTF-8.
  std::vector<std::string> run(const std::vector<std::string>& stops, FinishReason* finish) {
    SamplingParams p = greedy(static_cast<int32_t>(script_.size()));
    p.ignore_eos = true;
    p.stop = stops;
    uint64_t id = 0;
    EXPECT_TRUE(engine_->submit_text(kPrompt, p, 0, &id).ok());
    std::vector<std::string> texts;
    *finish = FinishReason::kNone;
    for (const Output& ev : run_events(engine_.get())) {
      EXPECT_TRUE(is_valid_utf8(ev.text)) << "event " << texts.size() << " cuts a character";
      texts.push_back(ev.text);
      if (ev.finish_reason != FinishReason::kNone) *finish = ev.finish_reason;
    }
    return texts;
  }

  static std::string joined(const std::vector<std::string>& texts) {
    std::string s;
    for (const std::string& t : texts) s += t;
    return s;
  }

  // 🎉 and 🚀 are outside the tokenizer's corpus: four byte pieces each.
  static constexpr const char* kPrompt = "Once";
  static constexpr const char* kText = "the café said 你好 🎉🚀 to a naïve dog 😀 and smiled.";
  static std::string* model_dir_;
  std::vector<int32_t> script_;
  std::string text_;  // what the script streams
  std::unique_ptr<Engine> engine_;
};

std::string* StopStringTest::model_dir_ = nullptr;

TEST_F(StopStringTest, TheScriptStreamsItsTextWhole) {
  // The premise: emoji come as several tokens each, so their bytes cross
  // token boundaries.
  std::vector<int32_t> emoji;
  ASSERT_TRUE(engine_->tokenizer()->encode("🎉", false, &emoji).ok());
  ASSERT_GE(emoji.size(), 4u) << "🎉 is not byte pieces in this tokenizer";
  FinishReason finish;
  const std::vector<std::string> texts = run({}, &finish);
  EXPECT_EQ(finish, FinishReason::kLength);
  EXPECT_EQ(joined(texts), text_);
  EXPECT_GT(texts.size(), 10u);
}

TEST_F(StopStringTest, MultiByteStopStringsEndTheTextBeforeThemAndNeverStream) {
  const std::string& text = text_;
  for (const std::string stop :
       {"🎉", "🎉🚀", "é s", "你好", "好 🎉", "ï", "naïve dog 😀", "😀 and", "\xF0\x9F\x9A\x80 to"}) {
    SCOPED_TRACE(stop);
    const size_t at = text.find(stop);
    ASSERT_NE(at, std::string::npos);
    FinishReason finish;
    const std::vector<std::string> texts = run({stop}, &finish);
    EXPECT_EQ(finish, FinishReason::kStop);
    // Nothing of the stop string was streamed before it was seen: the
    // events join to exactly the text before it.
    EXPECT_EQ(joined(texts), text.substr(0, at));
  }
}

TEST_F(StopStringTest, APartialMatchThatDivergesIsReleased) {
  // Each stop string begins like a part of the text and then differs: the
  // held-back bytes must all come out, and the request runs to its length.
  const std::string& text = text_;
  FinishReason finish;
  const std::vector<std::string> texts = run({"🎉🎉", "你好吗", "naïve cat", "😀!"}, &finish);
  EXPECT_EQ(finish, FinishReason::kLength);
  EXPECT_EQ(joined(texts), text);
}

TEST_F(StopStringTest, TheEarliestOfSeveralStopStringsWins) {
  const std::string& text = text_;
  FinishReason finish;
  // The longer one (held back longest) comes later in the text.
  const std::vector<std::string> texts = run({"to a naïve dog 😀", "你"}, &finish);
  EXPECT_EQ(finish, FinishReason::kStop);
  EXPECT_EQ(joined(texts), text.substr(0, text.find("你")));
}

TEST_F(StopStringTest, TextStreamsWhileNoStopStringCanStillMatch) {
  // With a 4-byte stop string at most 3 bytes (rounded back to a character
  // boundary) are held back: before the stop string, text reaches the
  // caller token by token rather than all at the end.
  const std::string& text = text_;
  FinishReason finish;
  const std::vector<std::string> texts = run({"😀"}, &finish);
  ASSERT_EQ(finish, FinishReason::kStop);
  size_t non_empty = 0;
  for (size_t i = 0; i + 1 < texts.size(); ++i) non_empty += texts[i].empty() ? 0 : 1;
  EXPECT_GT(non_empty, texts.size() / 2) << "the held-back tail swallowed the stream";
  EXPECT_EQ(joined(texts), text.substr(0, text.find("😀")));
}

}  // namespace
}  // namespace pvllm::testing
