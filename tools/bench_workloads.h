// Seeded synthetic workloads for `pvllm bench`. Prompts are random token
// ids (generation ignores EOS), so only lengths and arrival times matter.
//
// Time is counted in engine steps, not seconds: request i is submitted
// before the first step whose index is >= arrival_step. A step-based clock
// makes a trace identical for every allocator and machine, so paged and
// contiguous runs see the same offered load; throughput is still measured
// in wall-clock seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pvllm_cli {

struct BenchRequest {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 1;
  int32_t n = 1;
  int64_t arrival_step = 0;
};

struct WorkloadOptions {
  std::string name = "chat";  // chat | nano | shared-prefix | parallel | fixed
  uint64_t seed = 0;
  int32_t num_requests = 0;  // 0 = the workload's default
  int32_t context = 0;       // the model's usable context (max_model_len)
  int32_t vocab_size = 0;
  double rate = 0.0;                 // arrivals per step for chat / shared-prefix; 0 = default
  int32_t n = 0;                     // samples per request; 0 = default (4 for parallel, else 1)
  int32_t input_len = 512;           // fixed
  int32_t output_len = 128;          // fixed
  int32_t system_prompt_len = 1024;  // shared-prefix, before scaling to the context
};

// The names `make_workload` accepts, for --help and validation.
const std::vector<std::string>& workload_names();

// Builds the requests of a workload, lengths scaled to fit `context`
// (prompt + output <= context). Returns false with *error for bad options.
bool make_workload(const WorkloadOptions& o, std::vector<BenchRequest>* out, std::string* error);

// The factor `nano` scales nano-vllm's lengths by: 1 (the exact workload)
// when the context holds 2048 tokens, less for shorter contexts.
double nano_length_scale(int32_t context);

// One line that says what the workload is, with its effective parameters
// (and, for nano, whether its lengths were scaled).
std::string describe_workload(const WorkloadOptions& o, const std::vector<BenchRequest>& reqs);

}  // namespace pvllm_cli
