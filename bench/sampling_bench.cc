// Sampling cost of one decode step, old path against new (run by hand):
//
//   old  the logits of every row go to the host (fp32, pageable memory) and
//        the host sampler draws each row there, one after another, with the
//        chosen token's logprob as the old engine always computed it;
//   new  the host packs the rows' parameters (SamplingPlan), the device
//        samples, and only the token ids (and asked-for logprobs) come back.
//
// For 256 rows at a 32k and a 128k vocabulary (Llama 2 and Llama 3), with
// three mixes of parameters: "greedy", "top-p" (temperature 0.8, top-p
// 0.95) and "penalized" (top-p plus repetition 1.1, presence 0.2 and
// frequency 0.2 over a 1024-token prompt and 256 generated tokens). Prints host milliseconds per
// step and the bytes that cross the bus per step; --json PATH writes them.
//
// Without a GPU only the host side runs: the old path's host sampling, and
// the new path's packing and unpacking (the device's results are stood in
// for). With a GPU both paths run for real, copies and kernel included.
//
//   sampling_bench [--rows N] [--vocab V[,V...]] [--json PATH]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "core/sample/sampler.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_plan.h"

namespace {

using pvllm::SampleResult;
using pvllm::SampleRow;
using pvllm::SamplingParams;
using pvllm::SamplingPlan;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Median of `reps` timings of fn, in milliseconds, after one warm-up call.
template <typename Fn>
double median_ms(int reps, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const Clock::time_point start = Clock::now();
    fn();
    t.push_back(ms_since(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One step's sample rows with their token histories.
struct Step {
  std::deque<SamplingParams> params;
  std::vector<std::vector<int32_t>> prompts, outputs;
  std::vector<SampleRow> rows;
};

enum class Mix { kGreedy, kTopP, kPenalized };
const char* mix_name(Mix m) {
  return m == Mix::kGreedy ? "greedy" : m == Mix::kTopP ? "top-p" : "penalized";
}

Step make_step(int32_t num_rows, int32_t vocab, Mix mix) {
  const bool penalized = mix == Mix::kPenalized;
  Step s;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  s.prompts.resize(num_rows);
  s.outputs.resize(num_rows);
  for (int32_t r = 0; r < num_rows; ++r) {
    SamplingParams p;
    p.temperature = mix == Mix::kGreedy ? 0.0f : 0.8f;
    p.top_p = mix == Mix::kGreedy ? 1.0f : 0.95f;
    if (penalized) {
      p.repetition_penalty = 1.1f;
      p.presence_penalty = 0.2f;
      p.frequency_penalty = 0.2f;
      for (int i = 0; i < 1024; ++i) s.prompts[r].push_back(id(rng));
      for (int i = 0; i < 256; ++i) s.outputs[r].push_back(id(rng));
    }
    s.params.push_back(p);
  }
  for (int32_t r = 0; r < num_rows; ++r) {
    SampleRow row;
    row.logits_index = r;
    row.params = &s.params[r];
    row.seed = 1000 + r;
    row.sample_index = 0;
    row.step = static_cast<int32_t>(s.outputs[r].size());
    row.prompt_ids = s.prompts[r];
    row.output_ids = s.outputs[r];
    s.rows.push_back(row);
  }
  return s;
}

struct Result {
  int32_t vocab = 0;
  std::string mix;
  double old_host_ms = 0.0;    // host sampling (plus the logits copy with a GPU)
  double old_copy_ms = 0.0;    // the logits copy alone (GPU only)
  size_t old_bytes = 0;        // device to host
  double new_host_ms = 0.0;    // pack + unpack (the whole step's sampling with a GPU)
  double new_kernel_ms = 0.0;  // the sampling kernel alone (GPU only)
  size_t new_bytes_in = 0;     // host to device
  size_t new_bytes_out = 0;    // device to host
};

Result run_case(int32_t num_rows, int32_t vocab, Mix mix, bool gpu) {
  Result res;
  res.vocab = vocab;
  res.mix = mix_name(mix);
  const size_t num_logits = static_cast<size_t>(num_rows) * vocab;
  std::vector<float> logits(num_logits);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (float& v : logits) v = dist(rng);
  Step step = make_step(num_rows, vocab, mix);
  std::vector<int32_t> device_rows(static_cast<size_t>(num_rows));
  for (int32_t r = 0; r < num_rows; ++r) device_rows[r] = r;

  // ---- old: all logits to the host, the host sampler per row.
  res.old_bytes = num_logits * sizeof(float);
  float* d_logits = nullptr;
  std::vector<float> host_logits(num_logits);  // pageable, as the old engine's buffer
  if (gpu) {
    BENCH_CHECK(cudaMalloc(&d_logits, res.old_bytes));
    BENCH_CHECK(cudaMemcpy(d_logits, logits.data(), res.old_bytes, cudaMemcpyHostToDevice));
    res.old_copy_ms = median_ms(5, [&] {
      BENCH_CHECK(cudaMemcpy(host_logits.data(), d_logits, res.old_bytes, cudaMemcpyDeviceToHost));
    });
  } else {
    host_logits = logits;
  }
  // The old engine computed the chosen token's logprob for every row,
  // asked for or not: its rows ask for it here, so the cost is the old one.
  std::deque<SamplingParams> old_params(step.params.begin(), step.params.end());
  std::vector<SampleRow> old_rows = step.rows;
  for (size_t r = 0; r < old_rows.size(); ++r) {
    old_params[r].logprobs = std::max(old_params[r].logprobs, 0);
    old_rows[r].params = &old_params[r];
  }
  std::vector<SampleResult> old_out(step.rows.size());
  res.old_host_ms = median_ms(3,
                              [&] {
                                for (size_t r = 0; r < step.rows.size(); ++r) {
                                  old_out[r] =
                                      pvllm::sample_row(host_logits.data(), vocab, old_rows[r]);
                                }
                              }) +
                    res.old_copy_ms;

  // ---- new: pack, (sample on the device,) unpack.
  SamplingPlan plan;
  plan.build(step.rows, device_rows, vocab);
  res.new_bytes_in = plan.inputs().size();
  res.new_bytes_out = plan.output_bytes();
  std::vector<SampleResult> new_out;
  if (!gpu) {
    std::vector<unsigned char> outputs(plan.output_bytes(), 0);  // stands in for the device's
    res.new_host_ms = median_ms(50, [&] {
      plan.build(step.rows, device_rows, vocab);
      plan.read_results(step.rows, outputs.data(), &new_out);
    });
  } else {
    cudaStream_t stream = nullptr;
    BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned char *h_in = nullptr, *h_out = nullptr;
    void *d_in = nullptr, *d_out = nullptr, *d_ws = nullptr;
    // Penalty tokens make the inputs vary a little per step: room to spare.
    const size_t in_cap = plan.inputs().size() * 2 + 4096;
    const size_t ws = pvllm::pvllm_cuda_sampling_workspace_bytes(plan.num_penalty_slots(), vocab);
    BENCH_CHECK(cudaMallocHost(&h_in, in_cap));
    BENCH_CHECK(cudaMallocHost(&h_out, plan.output_bytes()));
    BENCH_CHECK(cudaMalloc(&d_in, in_cap));
    BENCH_CHECK(cudaMalloc(&d_out, plan.output_bytes()));
    BENCH_CHECK(cudaMalloc(&d_ws, std::max<size_t>(ws, 16)));
    cudaEvent_t k0, k1;
    BENCH_CHECK(cudaEventCreate(&k0));
    BENCH_CHECK(cudaEventCreate(&k1));
    std::vector<double> kernel_ms;
    res.new_host_ms = median_ms(20, [&] {
      plan.build(step.rows, device_rows, vocab);
      std::memcpy(h_in, plan.inputs().data(), plan.inputs().size());
      BENCH_CHECK(
          cudaMemcpyAsync(d_in, h_in, plan.inputs().size(), cudaMemcpyHostToDevice, stream));
      pvllm::DeviceSamplingParams p;
      plan.bind(d_in, d_out, d_logits, d_ws, ws, &p);
      BENCH_CHECK(cudaEventRecord(k0, stream));
      BENCH_CHECK(pvllm::pvllm_cuda_sample(p, stream));
      BENCH_CHECK(cudaEventRecord(k1, stream));
      BENCH_CHECK(
          cudaMemcpyAsync(h_out, d_out, plan.output_bytes(), cudaMemcpyDeviceToHost, stream));
      BENCH_CHECK(cudaStreamSynchronize(stream));
      plan.read_results(step.rows, h_out, &new_out);
      float ms = 0.0f;
      BENCH_CHECK(cudaEventElapsedTime(&ms, k0, k1));
      kernel_ms.push_back(ms);
    });
    std::sort(kernel_ms.begin(), kernel_ms.end());
    res.new_kernel_ms = kernel_ms[kernel_ms.size() / 2];
    // The two paths must agree, or the figures compare different work.
    int32_t num_differ = 0;
    for (size_t r = 0; r < new_out.size(); ++r)
      num_differ += new_out[r].token_id != old_out[r].token_id;
    if (num_differ > 0) {
      std::fprintf(stderr, "warning: %d of %zu rows drew different tokens on the device\n",
                   num_differ, new_out.size());
    }
    BENCH_CHECK(cudaEventDestroy(k0));
    BENCH_CHECK(cudaEventDestroy(k1));
    BENCH_CHECK(cudaFreeHost(h_in));
    BENCH_CHECK(cudaFreeHost(h_out));
    BENCH_CHECK(cudaFree(d_in));
    BENCH_CHECK(cudaFree(d_out));
    BENCH_CHECK(cudaFree(d_ws));
    BENCH_CHECK(cudaFree(d_logits));
    BENCH_CHECK(cudaStreamDestroy(stream));
  }
  return res;
}

std::string device_name(bool* gpu) {
  int n = 0;
  *gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  if (!*gpu) {
    cudaGetLastError();
    return "none (host side only)";
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

void write_json(const std::string& path, const std::string& device, int32_t rows,
                const std::vector<Result>& results) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"bench\": \"sampling\",\n  \"device\": \"%s\",\n  \"rows\": %d,\n",
               device.c_str(), rows);
  std::fprintf(f, "  \"cases\": [\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"vocab\": %d, \"mix\": \"%s\", \"old_host_ms\": %.4f, \"old_copy_ms\": "
                 "%.4f, \"old_bytes\": %zu, \"new_host_ms\": %.4f, \"new_kernel_ms\": %.4f, "
                 "\"new_bytes_in\": %zu, \"new_bytes_out\": %zu}%s\n",
                 r.vocab, r.mix.c_str(), r.old_host_ms, r.old_copy_ms, r.old_bytes, r.new_host_ms,
                 r.new_kernel_ms, r.new_bytes_in, r.new_bytes_out,
                 i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  int32_t rows = 256;
  std::vector<int32_t> vocabs = {32000, 128256};
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
      rows = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--vocab") == 0 && i + 1 < argc) {
      vocabs.clear();
      std::stringstream list(argv[++i]);
      for (std::string v; std::getline(list, v, ',');) vocabs.push_back(std::atoi(v.c_str()));
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--rows N] [--vocab V[,V...]] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  bool gpu = false;
  const std::string device = device_name(&gpu);
  std::printf("sampling one decode step of %d rows; device: %s\n\n", rows, device.c_str());
  std::printf(
      "| vocab | mix | old: host ms/step | old: bytes/step | new: host ms/step | "
      "new: kernel ms | new: bytes/step (in + out) |\n");
  std::printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::vector<Result> results;
  for (int32_t vocab : vocabs) {
    for (Mix mix : {Mix::kGreedy, Mix::kTopP, Mix::kPenalized}) {
      const Result r = run_case(rows, vocab, mix, gpu);
      std::printf("| %d | %s | %.2f | %zu | %.4f | %s | %zu + %zu |\n", r.vocab, r.mix.c_str(),
                  r.old_host_ms, r.old_bytes, r.new_host_ms,
                  gpu ? std::to_string(r.new_kernel_ms).c_str() : "-", r.new_bytes_in,
                  r.new_bytes_out);
      std::fflush(stdout);
      results.push_back(r);
    }
  }
  if (!json_path.empty()) write_json(json_path, device, rows, results);
  return 0;
}
