// The C ABI under load: many threads submit requests of random lengths and
// priorities into an engine whose KV pool is too small for all of them (so
// admission waits and preemption happen), abort some, and each follows its
// own requests with pvllm_wait / pvllm_poll_request while one thread steps.
// Checks that every request ends exactly once, that every request not
// aborted gives exactly the tokens it gives when run calmly (alone, ample
// KV), that an aborted one gives a prefix of them, that the KV pool is whole
// at the end, and reports RSS after warm-up and at the end (failing on
// growth beyond 20% + 16 MiB when --check-rss is given).
//
//   pvllm_stress [--threads 16] [--requests 100000] [--seed 1] [--kv-blocks 24]
//                [--in-flight 4] [--check-rss]
// ctest runs it at a CI size; docs/guarantees.md has the full-size figures.
#include <pvllm/pvllm.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/tiny_model.h"

namespace {

struct Options {
  int threads = 16;
  int64_t requests = 100000;
  uint32_t seed = 1;
  int32_t kv_blocks = 24;
  int in_flight = 4;
  bool check_rss = false;
};

// A distinct request shape; requests draw one of these so that each calm
// reference is computed once.
struct Shape {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
  std::vector<int32_t> calm;  // the tokens of a calm run
};

std::atomic<int64_t> g_failures{0};
std::mutex g_print_mu;

void failure(const std::string& what) {
  if (g_failures.fetch_add(1) < 20) {
    std::lock_guard<std::mutex> lock(g_print_mu);
    std::fprintf(stderr, "pvllm_stress: FAIL: %s\n", what.c_str());
  }
}

int64_t rss_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGE_SIZE);
}

pvllm_engine* create(const std::string& model, int32_t kv_blocks) {
  pvllm_engine_params p;
  pvllm_engine_params_init(&p, sizeof p);
  p.model_path = model.c_str();
  p.device = "cpu";
  p.num_threads = 1;
  p.block_size = 16;
  p.max_model_len = 128;
  if (kv_blocks > 0) {
    p.num_kv_blocks = kv_blocks;
  } else {
    p.kv_cache_bytes = 64 << 20;
  }
  p.max_num_seqs = 32;
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  if (pvllm_engine_create(&p, &engine, &error) != PVLLM_STATUS_OK) {
    std::fprintf(stderr, "pvllm_stress: create: %s\n", pvllm_error_message(error));
    pvllm_error_free(error);
    return nullptr;
  }
  return engine;
}

uint64_t submit(pvllm_engine* engine, const Shape& s, int32_t priority) {
  pvllm_sampling_params sp;
  pvllm_sampling_params_init(&sp, sizeof sp);
  sp.temperature = 0.0f;
  sp.max_tokens = s.max_tokens;
  sp.ignore_eos = 1;
  pvllm_request r;
  pvllm_request_init(&r, sizeof r);
  r.prompt_token_ids = s.prompt.data();
  r.num_prompt_token_ids = s.prompt.size();
  r.sampling = &sp;
  r.priority = priority;
  r.delivery = PVLLM_DELIVERY_PER_REQUEST;
  uint64_t id = 0;
  pvllm_error* error = nullptr;
  if (pvllm_submit(engine, &r, &id, &error) != PVLLM_STATUS_OK) {
    failure(std::string("submit: ") + pvllm_error_message(error));
    pvllm_error_free(error);
    return 0;
  }
  return id;
}

// Takes what is there for `id`; true once its last event came.
bool take(pvllm_engine* engine, uint64_t id, std::vector<int32_t>* tokens, int32_t* reason,
          int* num_finals) {
  pvllm_output_batch* batch = nullptr;
  if (pvllm_poll_request(engine, id, 0, &batch, nullptr) != PVLLM_STATUS_OK) {
    failure("poll_request: request " + std::to_string(id) + " vanished before its last event");
    return true;
  }
  bool last = false;
  for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
    const pvllm_output* o = pvllm_output_batch_get(batch, i);
    tokens->insert(tokens->end(), o->token_ids, o->token_ids + o->num_token_ids);
    if (o->finish_reason != PVLLM_FINISH_NONE) {
      *reason = o->finish_reason;
      ++*num_finals;
    }
    if (o->request_finished) last = true;
  }
  pvllm_output_batch_free(batch);
  return last;
}

std::vector<int32_t> run_calm(pvllm_engine* engine, const Shape& s) {
  const uint64_t id = submit(engine, s, 0);
  std::vector<int32_t> tokens;
  int32_t reason = 0;
  int finals = 0;
  for (bool last = false; !last;) {
    if (pvllm_step(engine, nullptr, nullptr) != PVLLM_STATUS_OK) failure("calm step failed");
    last = take(engine, id, &tokens, &reason, &finals);
  }
  return tokens;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--threads") {
      o->threads = std::atoi(next());
    } else if (a == "--requests") {
      o->requests = std::atoll(next());
    } else if (a == "--seed") {
      o->seed = static_cast<uint32_t>(std::atoll(next()));
    } else if (a == "--kv-blocks") {
      o->kv_blocks = std::atoi(next());
    } else if (a == "--in-flight") {
      o->in_flight = std::atoi(next());
    } else if (a == "--check-rss") {
      o->check_rss = true;
    } else {
      std::fprintf(stderr, "pvllm_stress: unknown option %s\n", a.c_str());
      return false;
    }
  }
  return o->threads > 0 && o->requests > 0 && o->kv_blocks >= 8 && o->in_flight > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  pvllm::testing::TinyModelSpec spec;
  spec.max_position_embeddings = 128;
  const std::string model =
      pvllm::testing::write_tiny_hf_model(pvllm::testing::make_temp_dir("pvllm_stress"), spec);

  // 64 shapes: prompts of 2 to 60 tokens, 1 to 40 new tokens.
  std::mt19937 rng(o.seed);
  std::vector<Shape> shapes(64);
  for (Shape& s : shapes) {
    const int len = 2 + static_cast<int>(rng() % 59);
    s.prompt.push_back(1);
    for (int k = 1; k < len; ++k) s.prompt.push_back(3 + static_cast<int32_t>(rng() % 200));
    s.max_tokens = 1 + static_cast<int32_t>(rng() % 40);
  }
  {
    pvllm_engine* calm = create(model, 0);
    if (calm == nullptr) return 1;
    for (Shape& s : shapes) s.calm = run_calm(calm, s);
    pvllm_engine_destroy(calm);
  }

  pvllm_engine* engine = create(model, o.kv_blocks);
  if (engine == nullptr) return 1;
  std::atomic<bool> done{false};
  std::atomic<int64_t> next_request{0};
  std::atomic<int64_t> finished{0}, aborted{0}, tokens_out{0};
  std::atomic<int64_t> rss_after_warmup{0};
  const int64_t warmup = std::max<int64_t>(o.requests / 10, 1);
  const auto t0 = std::chrono::steady_clock::now();

  std::thread stepper([&] {
    while (!done.load()) {
      int32_t unfinished = 0;
      if (pvllm_step(engine, &unfinished, nullptr) != PVLLM_STATUS_OK) failure("step failed");
      if (unfinished == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });

  struct Live {
    uint64_t id = 0;
    const Shape* shape = nullptr;
    bool abort_it = false;
    bool aborted_ok = false;
    std::vector<int32_t> tokens;
    int32_t reason = 0;
    int finals = 0;
  };
  auto worker = [&](int index) {
    std::mt19937 wrng(o.seed * 7919u + static_cast<uint32_t>(index));
    std::deque<Live> live;
    for (;;) {
      while (static_cast<int>(live.size()) < o.in_flight) {
        const int64_t n = next_request.fetch_add(1);
        if (n >= o.requests) break;
        Live l;
        l.shape = &shapes[wrng() % shapes.size()];
        l.abort_it = wrng() % 5 == 0;
        l.id = submit(engine, *l.shape, static_cast<int32_t>(wrng() % 5) - 2);
        if (l.id != 0) live.push_back(std::move(l));
      }
      if (live.empty()) return;
      Live& l = live.front();
      if (l.abort_it && !l.aborted_ok) {
        const pvllm_status st = pvllm_abort(engine, l.id, nullptr);
        if (st == PVLLM_STATUS_OK) {
          l.aborted_ok = true;
        } else if (st == PVLLM_STATUS_NOT_FOUND) {
          l.abort_it = false;  // it had already finished: no abort to expect
        } else {
          failure("abort returned " + std::string(pvllm_status_to_string(st)));
        }
      }
      pvllm_wait(engine, l.id, 100, nullptr);
      if (!take(engine, l.id, &l.tokens, &l.reason, &l.finals)) {
        live.push_back(std::move(l));  // round-robin over this worker's requests
        live.pop_front();
        continue;
      }
      const std::string who = "request " + std::to_string(l.id);
      if (l.finals != 1) failure(who + " ended " + std::to_string(l.finals) + " times");
      const std::vector<int32_t>& calm = l.shape->calm;
      if (l.reason == PVLLM_FINISH_ABORT) {
        if (!l.aborted_ok) failure(who + " ended ABORT without an accepted abort");
        if (l.tokens.size() > calm.size() ||
            !std::equal(l.tokens.begin(), l.tokens.end(), calm.begin())) {
          failure(who + " (aborted) is not a prefix of its calm tokens");
        }
        aborted.fetch_add(1);
      } else {
        if (l.aborted_ok) failure(who + ": abort returned OK but it ended without ABORT");
        if (l.reason != PVLLM_FINISH_LENGTH)
          failure(who + " ended with reason " + std::to_string(l.reason));
        if (l.tokens != calm) failure(who + " differs from its calm run");
      }
      tokens_out.fetch_add(static_cast<int64_t>(l.tokens.size()));
      if (finished.fetch_add(1) + 1 == warmup) rss_after_warmup = rss_bytes();
      live.pop_front();
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < o.threads; ++i) workers.emplace_back(worker, i);
  for (std::thread& t : workers) t.join();
  done = true;
  stepper.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  pvllm_stats stats;
  pvllm_stats_init(&stats, sizeof stats);
  pvllm_get_stats(engine, &stats, nullptr);
  if (stats.num_blocks_used != 0) failure(std::to_string(stats.num_blocks_used) + " blocks held");
  if (stats.num_running != 0 || stats.num_waiting != 0) failure("requests left in the engine");
  if (finished.load() != o.requests) {
    failure(std::to_string(finished.load()) + " of " + std::to_string(o.requests) + " ended");
  }
  const int64_t rss_end = rss_bytes();
  pvllm_engine_destroy(engine);
  const int64_t warm = rss_after_warmup.load();
  std::printf(
      "pvllm_stress: %lld requests on %d threads (%d in flight each), %d KV blocks of 16: %.1f s, "
      "%.0f requests/s, %lld tokens, %lld aborted, %lld preemptions; RSS after warm-up %.1f "
      "MiB, at the end %.1f MiB; %lld failures\n",
      static_cast<long long>(o.requests), o.threads, o.in_flight, o.kv_blocks, seconds,
      static_cast<double>(o.requests) / seconds, static_cast<long long>(tokens_out.load()),
      static_cast<long long>(aborted.load()), static_cast<long long>(stats.num_preemptions),
      static_cast<double>(warm) / (1 << 20), static_cast<double>(rss_end) / (1 << 20),
      static_cast<long long>(g_failures.load()));
  if (o.check_rss && warm > 0 && rss_end > warm + warm / 5 + (int64_t{16} << 20)) {
    failure("RSS grew from " + std::to_string(warm) + " to " + std::to_string(rss_end));
  }
  return g_failures.load() == 0 ? 0 : 1;
}
