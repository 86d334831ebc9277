// pvllm_engine_params.random_weights through the C ABI: a model built in
// memory from a shape name, token-id prompts, the tokenizer error for text,
// the estimate and inspection of shapes, and the struct_size protocol for
// the appended field.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string take_message(pvllm_error* e) {
  std::string m = e != nullptr ? pvllm_error_message(e) : "";
  pvllm_error_free(e);
  return m;
}

pvllm_engine_params tiny_params() {
  pvllm_engine_params p;
  pvllm_engine_params_init(&p, sizeof p);
  p.random_weights = "tiny";
  p.num_kv_blocks = 256;
  p.num_threads = 1;
  return p;
}

// Greedy tokens for one token-id prompt, stepping to completion.
std::vector<int32_t> generate(pvllm_engine* engine, const std::vector<int32_t>& prompt,
                              int32_t max_tokens) {
  pvllm_sampling_params sp;
  pvllm_sampling_params_init(&sp, sizeof sp);
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  pvllm_request req;
  pvllm_request_init(&req, sizeof req);
  req.prompt_token_ids = prompt.data();
  req.num_prompt_token_ids = prompt.size();
  req.sampling = &sp;
  uint64_t id = 0;
  pvllm_error* err = nullptr;
  EXPECT_EQ(pvllm_submit(engine, &req, &id, &err), PVLLM_STATUS_OK) << take_message(err);
  std::vector<int32_t> tokens;
  bool finished = false;
  for (int i = 0; i < 1000 && !finished; ++i) {
    EXPECT_EQ(pvllm_step(engine, nullptr, nullptr), PVLLM_STATUS_OK);
    pvllm_output_batch* batch = nullptr;
    EXPECT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
    for (size_t k = 0; k < pvllm_output_batch_size(batch); ++k) {
      const pvllm_output* o = pvllm_output_batch_get(batch, k);
      if (o->request_id != id) continue;
      tokens.insert(tokens.end(), o->token_ids, o->token_ids + o->num_token_ids);
      if (o->finish_reason != PVLLM_FINISH_NONE) finished = true;
    }
    pvllm_output_batch_free(batch);
  }
  EXPECT_TRUE(finished);
  return tokens;
}

TEST(CapiRandomWeightsTest, DefaultIsNullAndAShapeBuildsAnEngineWithoutAPath) {
  pvllm_engine_params p;
  std::memset(&p, 0xAB, sizeof p);
  pvllm_engine_params_init(&p, sizeof p);
  EXPECT_EQ(p.random_weights, nullptr);
  p = tiny_params();
  p.model_path = nullptr;
  pvllm_engine* engine = nullptr;
  pvllm_error* err = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, &err), PVLLM_STATUS_OK) << take_message(err);
  const std::vector<int32_t> a = generate(engine, {1, 5, 9}, 5);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(generate(engine, {1, 5, 9}, 5), a) << "greedy on one model is repeatable";
  pvllm_engine_destroy(engine);
}

TEST(CapiRandomWeightsTest, TextPromptIsTokenizerError) {
  pvllm_engine_params p = tiny_params();
  pvllm_engine* engine = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
  pvllm_request req;
  pvllm_request_init(&req, sizeof req);
  req.prompt_text = "Once upon a time";
  uint64_t id = 0;
  pvllm_error* err = nullptr;
  EXPECT_EQ(pvllm_submit(engine, &req, &id, &err), PVLLM_STATUS_TOKENIZER_ERROR);
  EXPECT_NE(take_message(err).find("token ids"), std::string::npos);
  pvllm_engine_destroy(engine);
}

TEST(CapiRandomWeightsTest, UnknownShapeIsInvalidArgumentListingShapes) {
  pvllm_engine_params p = tiny_params();
  p.random_weights = "huge";
  pvllm_engine* engine = nullptr;
  pvllm_error* err = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &err), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  const std::string m = take_message(err);
  EXPECT_NE(m.find("llama-3-8b"), std::string::npos) << m;
}

TEST(CapiRandomWeightsTest, OlderCallersWithoutTheFieldStillNeedAModelPath) {
  // A caller built before random_weights existed passes the old size; the
  // library must not read the field and must still require model_path.
  pvllm_engine_params p = tiny_params();
  p.struct_size = static_cast<uint32_t>(offsetof(pvllm_engine_params, random_weights));
  p.model_path = nullptr;
  pvllm_engine* engine = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
}

TEST(CapiRandomWeightsTest, AStructSizeEndingInsideAFieldIsRefused) {
  // A struct_size that cuts random_weights in two would make the library
  // read a pointer half the caller's and half the default's (found by
  // fuzz/fuzz_capi). No header ever had such a size: INVALID_ARGUMENT.
  pvllm_engine_params p = tiny_params();
  p.struct_size = static_cast<uint32_t>(offsetof(pvllm_engine_params, random_weights) + 4);
  pvllm_engine* engine = nullptr;
  pvllm_error* err = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &err), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  const std::string m = take_message(err);
  EXPECT_NE(m.find("random_weights"), std::string::npos) << m;
}

TEST(CapiRandomWeightsTest, EstimateAndInspectWorkForBigShapesWithoutAllocating) {
  pvllm_engine_params p;
  pvllm_engine_params_init(&p, sizeof p);
  p.random_weights = "llama-3-8b";
  p.max_model_len = 1024;  // what the default 64 MiB KV budget holds for this shape
  pvllm_memory_estimate e;
  pvllm_memory_estimate_init(&e, sizeof e);
  pvllm_error* err = nullptr;
  // 15 GiB of bf16 weights: OK where the machine holds them, OUT_OF_MEMORY
  // naming them where it does not; never an allocation.
  const pvllm_status st = pvllm_estimate_memory(&p, &e, &err);
  if (st == PVLLM_STATUS_OUT_OF_MEMORY) {
    const std::string m = take_message(err);
    EXPECT_NE(m.find("weights 15316 MiB"), std::string::npos) << m;
  } else {
    ASSERT_EQ(st, PVLLM_STATUS_OK) << take_message(err);
    EXPECT_EQ(e.weight_bytes, uint64_t{8030261248} * 2);
    EXPECT_GT(e.activation_bytes, 0u);
  }

  pvllm_model_info* info = nullptr;
  ASSERT_EQ(pvllm_model_inspect_random("llama-2-7b", &info, &err), PVLLM_STATUS_OK)
      << take_message(err);
  pvllm_model_config c;
  pvllm_model_config_init(&c, sizeof c);
  ASSERT_EQ(pvllm_model_info_config(info, &c, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(pvllm_model_info_num_tensors(info), size_t{2 + 32 * 9 + 1});
  pvllm_tensor_info t;
  ASSERT_EQ(pvllm_model_info_tensor(info, 0, &t, nullptr), PVLLM_STATUS_OK);
  EXPECT_STREQ(t.dtype, "BF16");
  pvllm_model_info_free(info);
  EXPECT_EQ(pvllm_model_inspect_random("nope", &info, nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(info, nullptr);
}

}  // namespace
