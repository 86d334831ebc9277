// What storing the KV cache in f16, bf16 or int8 costs in accuracy on the
// CPU backend (docs/memory.md):
//
//  1. Long generations: the fp32 cache decodes greedily, one token per
//     step, from a short prompt; each other dtype is fed the same tokens
//     one per step (teacher forced) and its next-token distribution at
//     every step is compared with the fp32 cache's: KL(P_f32 || P_dtype) in
//     double over the whole vocabulary (mean, by quarter of the context,
//     99th percentile and largest) and how often the top tokens agree.
//  2. The greedy goldens (llama2.c's run.c on stories260K): how many cases
//     each dtype reproduces token for token, and where the others diverge.
//  3. The int8 scale's width: the reconstruction error of rows whose
//     codes are computed against an fp16 scale (what the cache stores)
//     against an fp32 one, over rows of many magnitudes.
//
// Usage: kv_dtype_accuracy [--model NAME=PATH]... [--tokens NAME=N]...
//                          [--prompt NAME=ID,ID,...]... (default 1,20,134,265,396)
//                          [--golden GOLDEN.json --golden-model PATH]
//                          [--threads N] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/engine/engine.h"
#include "core/kv/kv_cache_dtype.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/kv_encode.h"
#include "tests/util/kld_eval.h"
#include "tests/util/sequence_driver.h"

namespace {

using nlohmann::ordered_json;
using pvllm::KvCacheDtype;
using pvllm::Status;
namespace pt = pvllm::testing;

const KvCacheDtype kLowDtypes[] = {KvCacheDtype::kF16, KvCacheDtype::kBF16, KvCacheDtype::kInt8};

bool check(const Status& s, const std::string& what) {
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what.c_str(), s.message().c_str());
  return s.ok();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A backend over `model` with the cache in `dtype`, holding `tokens`.
Status open(const pvllm::Model& model, KvCacheDtype dtype, int32_t tokens, int32_t threads,
            std::unique_ptr<pvllm::Backend>* out) {
  pvllm::BackendOptions o;
  o.block_size = 16;
  o.num_blocks = (tokens + o.block_size - 1) / o.block_size;
  o.num_threads = threads;
  o.kv_cache_dtype = dtype;
  return pvllm::create_cpu_backend(model, o, out);
}

// The prompt, then `steps` greedy tokens one per step with the fp32 cache;
// *logits gets the distribution before each generated token, [steps, vocab].
Status generate_f32(const pvllm::Model& model, const std::vector<int32_t>& prompt, int32_t steps,
                    int32_t threads, std::vector<int32_t>* generated, std::vector<float>* logits) {
  const int32_t vocab = model.config.vocab_size;
  std::unique_ptr<pvllm::Backend> backend;
  PVLLM_RETURN_IF_ERROR(open(model, KvCacheDtype::kF32, static_cast<int32_t>(prompt.size()) + steps,
                             threads, &backend));
  pt::SequenceDriver driver(backend.get(), vocab);
  std::vector<float> step_logits;
  PVLLM_RETURN_IF_ERROR(driver.step(prompt, &step_logits));
  logits->assign(static_cast<size_t>(steps) * vocab, 0.0f);
  for (int32_t s = 0; s < steps; ++s) {
    const float* last = step_logits.data() + (step_logits.size() / vocab - 1) * vocab;
    std::copy(last, last + vocab, logits->begin() + int64_t{s} * vocab);
    const int32_t next = pt::argmax(last, vocab);
    generated->push_back(next);
    if (s + 1 < steps) PVLLM_RETURN_IF_ERROR(driver.step({next}, &step_logits));
  }
  return Status::Ok();
}

// The same prompt and tokens through a cache of `dtype`, one token per step.
Status teacher_forced(const pvllm::Model& model, KvCacheDtype dtype,
                      const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated,
                      int32_t threads, std::vector<float>* logits) {
  const int32_t vocab = model.config.vocab_size;
  const auto steps = static_cast<int32_t>(generated.size());
  std::unique_ptr<pvllm::Backend> backend;
  PVLLM_RETURN_IF_ERROR(
      open(model, dtype, static_cast<int32_t>(prompt.size()) + steps, threads, &backend));
  pt::SequenceDriver driver(backend.get(), vocab);
  std::vector<float> step_logits;
  PVLLM_RETURN_IF_ERROR(driver.step(prompt, &step_logits));
  logits->assign(static_cast<size_t>(steps) * vocab, 0.0f);
  for (int32_t s = 0; s < steps; ++s) {
    const float* last = step_logits.data() + (step_logits.size() / vocab - 1) * vocab;
    std::copy(last, last + vocab, logits->begin() + int64_t{s} * vocab);
    if (s + 1 < steps) PVLLM_RETURN_IF_ERROR(driver.step({generated[s]}, &step_logits));
  }
  return Status::Ok();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::min<double>(v.size() - 1, std::floor(p * v.size())));
  return v[i];
}

// Part 1 for one model: a long generation from each prompt.
bool study_model(const std::string& name, const std::string& path,
                 const std::vector<std::vector<int32_t>>& prompts, int32_t steps, int32_t threads,
                 ordered_json* out) {
  std::unique_ptr<pvllm::Model> model;
  if (!check(pvllm::load_model(path, &model), path)) return false;
  const int32_t vocab = model->config.vocab_size;
  const int32_t max_len = model->config.max_position_embeddings;
  ordered_json m;
  m["path"] = path;
  m["layers"] = model->config.num_layers;
  m["head_dim"] = model->config.head_dim;
  m["prompts"] = prompts;
  std::vector<std::vector<int32_t>> generated(prompts.size());
  std::vector<std::vector<float>> base(prompts.size());
  std::vector<int32_t> lengths;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int32_t n = std::min<int32_t>(steps, max_len - static_cast<int32_t>(prompts[i].size()));
    lengths.push_back(n);
    if (!check(generate_f32(*model, prompts[i], n, threads, &generated[i], &base[i]),
               name + " f32")) {
      return false;
    }
  }
  m["steps"] = lengths;
  std::printf("%s: %zu prompts, %d steps each, with the fp32 cache in %.1f s\n", name.c_str(),
              prompts.size(), lengths.empty() ? 0 : lengths[0], seconds_since(t0));
  std::vector<double> lp(vocab), lq(vocab);
  for (KvCacheDtype dtype : kLowDtypes) {
    t0 = std::chrono::steady_clock::now();
    std::vector<double> kl;
    int64_t same_top = 0;
    double quarter_sum[4] = {};
    int32_t quarter_count[4] = {};
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<float> low;
      if (!check(teacher_forced(*model, dtype, prompts[i], generated[i], threads, &low),
                 name + " " + pvllm::kv_cache_dtype_name(dtype))) {
        return false;
      }
      for (int32_t s = 0; s < lengths[i]; ++s) {
        const float* b = base[i].data() + int64_t{s} * vocab;
        const float* q = low.data() + int64_t{s} * vocab;
        pt::log_softmax(b, vocab, lp.data());
        pt::log_softmax(q, vocab, lq.data());
        double d = 0.0;
        for (int32_t v = 0; v < vocab; ++v) d += std::exp(lp[v]) * (lp[v] - lq[v]);
        kl.push_back(std::max(0.0, d));
        same_top += pt::argmax(b, vocab) == pt::argmax(q, vocab);
        const int32_t quarter = std::min(3, 4 * s / lengths[i]);
        quarter_sum[quarter] += kl.back();
        ++quarter_count[quarter];
      }
    }
    const auto count = static_cast<int64_t>(kl.size());
    double mean = 0.0;
    for (double x : kl) mean += x;
    mean /= static_cast<double>(count);
    ordered_json d;
    d["mean_kld"] = mean;
    d["kld_by_quarter"] = ordered_json::array();
    for (int q = 0; q < 4; ++q) {
      d["kld_by_quarter"].push_back(quarter_count[q] ? quarter_sum[q] / quarter_count[q] : 0.0);
    }
    d["p99_kld"] = percentile(kl, 0.99);
    d["max_kld"] = *std::max_element(kl.begin(), kl.end());
    d["same_top"] = static_cast<double>(same_top) / static_cast<double>(count);
    d["positions"] = count;
    m["dtypes"][pvllm::kv_cache_dtype_name(dtype)] = d;
    std::printf(
        "  %-5s mean KLD %.3g (by quarter %.3g %.3g %.3g %.3g), p99 %.3g, max %.3g, "
        "same top token %.2f%%, %.1f s\n",
        pvllm::kv_cache_dtype_name(dtype), mean, d["kld_by_quarter"][0].get<double>(),
        d["kld_by_quarter"][1].get<double>(), d["kld_by_quarter"][2].get<double>(),
        d["kld_by_quarter"][3].get<double>(), d["p99_kld"].get<double>(),
        d["max_kld"].get<double>(), 100.0 * static_cast<double>(same_top) / count,
        seconds_since(t0));
  }
  (*out)[name] = m;
  return true;
}

// Part 2: each dtype over the run.c goldens, all cases batched.
bool study_goldens(const std::string& golden_path, const std::string& model_path,
                   ordered_json* out) {
  std::ifstream in(golden_path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", golden_path.c_str());
    return false;
  }
  const nlohmann::json golden = nlohmann::json::parse(in);
  std::printf("\ngoldens (%s, %zu cases):\n", golden_path.c_str(), golden["cases"].size());
  for (KvCacheDtype dtype :
       {KvCacheDtype::kF32, KvCacheDtype::kF16, KvCacheDtype::kBF16, KvCacheDtype::kInt8}) {
    pvllm::EngineConfig c;
    c.model_path = model_path;
    c.device = "cpu";
    c.kv_cache_dtype = dtype;
    std::unique_ptr<pvllm::Engine> engine;
    if (!check(pvllm::Engine::create(c, &engine), "engine")) return false;
    std::vector<uint64_t> ids;
    std::vector<std::vector<int32_t>> want;
    for (const auto& g : golden["cases"]) {
      auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
      auto gen = g["generated_ids"].get<std::vector<int32_t>>();
      // run.c lists the BOS that stops a case; pvllm does not report it.
      if (g["stopped_on_bos"].get<bool>() && !gen.empty() && gen.back() == 1) gen.pop_back();
      pvllm::SamplingParams p;
      p.temperature = 0.0f;
      p.max_tokens = g["steps"].get<int32_t>() - static_cast<int32_t>(prompt.size()) + 1;
      p.stop_token_ids = {1};
      uint64_t id = 0;
      if (!check(engine->submit_tokens(prompt, p, 0, &id), "submit")) return false;
      ids.push_back(id);
      want.push_back(gen);
    }
    std::vector<std::vector<int32_t>> got(ids.size());
    while (engine->has_unfinished()) {
      if (!check(engine->step(), "step")) return false;
      std::vector<pvllm::Output> events;
      engine->poll(&events);
      for (const pvllm::Output& e : events) {
        const size_t i = std::find(ids.begin(), ids.end(), e.request_id) - ids.begin();
        got[i].insert(got[i].end(), e.token_ids.begin(), e.token_ids.end());
      }
    }
    int identical = 0;
    int64_t tokens = 0, tokens_before_divergence = 0;
    ordered_json divergences = ordered_json::array();
    for (size_t i = 0; i < ids.size(); ++i) {
      tokens += static_cast<int64_t>(want[i].size());
      const size_t common = std::min(got[i].size(), want[i].size());
      const size_t first =
          std::mismatch(got[i].begin(), got[i].begin() + common, want[i].begin()).first -
          got[i].begin();
      if (got[i] == want[i]) {
        ++identical;
        tokens_before_divergence += static_cast<int64_t>(want[i].size());
      } else {
        tokens_before_divergence += static_cast<int64_t>(first);
        divergences.push_back({{"case", i}, {"at", first}, {"of", want[i].size()}});
      }
    }
    ordered_json d;
    d["identical_cases"] = identical;
    d["cases"] = ids.size();
    d["tokens_before_divergence"] = tokens_before_divergence;
    d["reference_tokens"] = tokens;
    d["divergences"] = divergences;
    (*out)[pvllm::kv_cache_dtype_name(dtype)] = d;
    std::printf(
        "  %-5s %d of %zu cases identical to run.c; %lld of %lld tokens before the first "
        "divergence;%s\n",
        pvllm::kv_cache_dtype_name(dtype), identical, ids.size(),
        static_cast<long long>(tokens_before_divergence), static_cast<long long>(tokens),
        divergences.empty() ? " none differ" : "");
    for (const auto& v : divergences) {
      std::printf("        case %d diverges at token %d of %d\n", v["case"].get<int>(),
                  v["at"].get<int>(), v["of"].get<int>());
    }
  }
  return true;
}

// Part 3: int8 rows against an fp16 scale (stored) and an fp32 one.
void study_scales(ordered_json* out) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf(
      "\nint8 scale width (head_dim 64, 20000 rows per magnitude; RMS error / RMS value):\n");
  for (float sigma : {1e-4f, 1e-3f, 1e-2f, 0.1f, 1.0f, 10.0f, 100.0f}) {
    double err16 = 0.0, err32 = 0.0, energy = 0.0;
    std::vector<float> x(64);
    int8_t codes[64];
    uint16_t scale = 0;
    for (int r = 0; r < 20000; ++r) {
      // Mostly normal values, a few heavy-tailed outliers as K rows have.
      for (float& v : x) v = sigma * normal(rng) * (rng() % 16 == 0 ? 6.0f : 1.0f);
      pvllm::cpu::encode_kv_row(KvCacheDtype::kInt8, x.data(), 64, codes, &scale);
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const float d32 = amax / 127.0f;
      for (int i = 0; i < 64; ++i) {
        const float back16 = pvllm::cpu::decode_kv_value(KvCacheDtype::kInt8, codes, i, scale);
        const float q32 = d32 > 0 ? std::clamp(std::nearbyint(x[i] / d32), -127.0f, 127.0f) : 0.0f;
        err16 += std::pow(double{back16} - x[i], 2);
        err32 += std::pow(double{q32} * d32 - x[i], 2);
        energy += double{x[i]} * x[i];
      }
    }
    const double rel16 = std::sqrt(err16 / energy), rel32 = std::sqrt(err32 / energy);
    ordered_json s;
    s["sigma"] = sigma;
    s["fp16_scale_rel_rms"] = rel16;
    s["fp32_scale_rel_rms"] = rel32;
    out->push_back(s);
    std::printf("  sigma %-7g fp16 scale %.5f, fp32 scale %.5f (ratio %.4f)\n", sigma, rel16, rel32,
                rel16 / rel32);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> models;
  std::vector<std::pair<std::string, int32_t>> steps;
  std::vector<std::pair<std::string, std::vector<int32_t>>> prompts;
  std::string golden, golden_model, json_path;
  int32_t threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto split = [](const std::string& s) {
      const size_t eq = s.find('=');
      return std::pair{s.substr(0, eq), eq == std::string::npos ? "" : s.substr(eq + 1)};
    };
    if (a == "--model" && has) {
      models.push_back(split(argv[++i]));
    } else if (a == "--tokens" && has) {
      const auto [n, v] = split(argv[++i]);
      steps.emplace_back(n, std::atoi(v.c_str()));
    } else if (a == "--prompt" && has) {
      const auto [n, v] = split(argv[++i]);
      std::vector<int32_t> ids;
      for (size_t at = 0; at < v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        ids.push_back(std::atoi(v.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
      prompts.emplace_back(n, ids);
    } else if (a == "--golden" && has) {
      golden = argv[++i];
    } else if (a == "--golden-model" && has) {
      golden_model = argv[++i];
    } else if (a == "--threads" && has) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--json" && has) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: kv_dtype_accuracy [--model NAME=PATH]... [--tokens NAME=N]... "
                   "[--prompt NAME=ID,ID,...]... "
                   "[--golden GOLDEN.json --golden-model PATH] [--threads N] [--json OUT]\n");
      return 2;
    }
  }
  ordered_json result;
  result["threads"] = threads;
  for (const auto& [name, path] : models) {
    int32_t n = 1024;
    for (const auto& [k, v] : steps) {
      if (k == name) n = v;
    }
    std::vector<std::vector<int32_t>> mine;
    for (const auto& [k, ids] : prompts) {
      if (k == name) mine.push_back(ids);
    }
    if (mine.empty()) mine.push_back({1, 3 + 17, 3 + 131, 3 + 262, 3 + 393});
    if (!study_model(name, path, mine, n, threads, &result["long_generations"])) return 1;
  }
  if (!golden.empty() && !study_goldens(golden, golden_model, &result["goldens"])) return 1;
  study_scales(&result["int8_scale"]);
  if (!json_path.empty()) {
    std::ofstream(json_path) << result.dump(1) << "\n";
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}
