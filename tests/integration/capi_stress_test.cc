// Hammers one engine through the C ABI from many threads at once: one
// thread steps, several submit, two poll, one aborts. Whatever the
// interleaving, every sample of every submitted request must end with
// exactly one finish event, and no event may name an unknown request.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <pvllm/pvllm.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

struct FinishEvent {
  uint64_t request_id;
  int32_t sample_index;
  int32_t finish_reason;
};

struct Submitted {
  int32_t n = 1;
  bool abort_accepted = false;  // pvllm_abort returned OK for it
};

std::string error_text(pvllm_error* error) {
  std::string text = pvllm_error_message(error);
  pvllm_error_free(error);
  return text;
}

TEST(CapiStressTest, ConcurrentSubmitPollAbortFinishEverySampleExactlyOnce) {
  const std::string model_dir =
      write_tiny_hf_model(make_temp_dir("pvllm_capi_stress"), TinyModelSpec{});
  pvllm_engine_params params;
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_dir.c_str();
  params.num_kv_blocks = 48;  // small, so the scheduler has to make requests wait
  params.block_size = 8;
  params.max_num_seqs = 8;
  params.num_threads = 1;
  pvllm_engine* raw_engine = nullptr;
  pvllm_error* error = nullptr;
  ASSERT_EQ(pvllm_engine_create(&params, &raw_engine, &error), PVLLM_STATUS_OK)
      << error_text(error);
  pvllm::cxx::EnginePtr engine(raw_engine);

  constexpr int kNumSubmitters = 4;
  constexpr int kRequestsPerSubmitter = 15;
  constexpr int kNumPollers = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);

  std::mutex mu;
  std::map<uint64_t, Submitted> submitted;  // under mu
  std::vector<uint64_t> submitted_ids;      // under mu; what the aborter picks from
  std::vector<std::string> failures;        // under mu
  auto record_failure = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(std::move(what));
  };

  std::atomic<int> num_submitters_running{kNumSubmitters};
  std::atomic<bool> stepping_done{false};

  std::vector<std::thread> threads;
  for (int s = 0; s < kNumSubmitters; ++s) {
    threads.emplace_back([&, s] {
      std::mt19937 rng(100 + s);
      const char* prompts[] = {"Once upon a time", "The cat", "A dog ran to the park and",
                               "She said hello"};
      for (int i = 0; i < kRequestsPerSubmitter; ++i) {
        pvllm_sampling_params sampling;
        pvllm_sampling_params_init(&sampling, sizeof sampling);
        sampling.temperature = (i % 2 == 0) ? 0.0f : 0.8f;
        sampling.max_tokens = 2 + static_cast<int32_t>(rng() % 10);
        sampling.n = 1 + static_cast<int32_t>(rng() % 2);
        sampling.ignore_eos = static_cast<uint8_t>(rng() % 2);
        pvllm_request request;
        pvllm_request_init(&request, sizeof request);
        request.prompt_text = prompts[rng() % 4];
        request.sampling = &sampling;
        request.priority = static_cast<int32_t>(rng() % 3);
        uint64_t id = 0;
        pvllm_error* err = nullptr;
        const pvllm_status status = pvllm_submit(engine.get(), &request, &id, &err);
        if (status != PVLLM_STATUS_OK) {
          record_failure("submit: " + error_text(err));
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          if (submitted.count(id) != 0) failures.push_back("id reused: " + std::to_string(id));
          submitted[id].n = sampling.n;
          submitted_ids.push_back(id);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
      }
      num_submitters_running.fetch_sub(1);
    });
  }

  // The stepping thread: runs until the submitters are done and nothing is
  // left unfinished.
  threads.emplace_back([&] {
    for (;;) {
      const bool submitters_done = num_submitters_running.load() == 0;
      int32_t num_unfinished = 0;
      pvllm_error* err = nullptr;
      if (pvllm_step(engine.get(), &num_unfinished, &err) != PVLLM_STATUS_OK) {
        record_failure("step: " + error_text(err));
        break;
      }
      if (submitters_done && num_unfinished == 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        record_failure("deadline passed with " + std::to_string(num_unfinished) +
                       " requests unfinished");
        break;
      }
      if (num_unfinished == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    stepping_done.store(true);
  });

  std::vector<std::vector<FinishEvent>> finishes(kNumPollers);
  std::vector<std::vector<uint64_t>> seen_ids(kNumPollers);
  for (int p = 0; p < kNumPollers; ++p) {
    threads.emplace_back([&, p] {
      auto drain = [&] {
        pvllm_output_batch* batch = nullptr;
        pvllm_error* err = nullptr;
        // One poller takes everything, the other small slices.
        if (pvllm_poll(engine.get(), p == 0 ? 0 : 3, &batch, &err) != PVLLM_STATUS_OK) {
          record_failure("poll: " + error_text(err));
          return size_t{0};
        }
        const size_t size = pvllm_output_batch_size(batch);
        for (size_t i = 0; i < size; ++i) {
          const pvllm_output* o = pvllm_output_batch_get(batch, i);
          seen_ids[p].push_back(o->request_id);
          if (o->finish_reason != PVLLM_FINISH_NONE) {
            finishes[p].push_back({o->request_id, o->sample_index, o->finish_reason});
          }
        }
        pvllm_output_batch_free(batch);
        return size;
      };
      while (!stepping_done.load()) {
        drain();
        std::this_thread::yield();
      }
      while (drain() > 0) {
      }
    });
  }

  // The aborter: aborts a random known request now and then.
  threads.emplace_back([&] {
    std::mt19937 rng(7);
    while (!stepping_done.load()) {
      uint64_t id = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!submitted_ids.empty()) id = submitted_ids[rng() % submitted_ids.size()];
      }
      if (id != 0 && rng() % 3 == 0) {
        pvllm_error* err = nullptr;
        const pvllm_status status = pvllm_abort(engine.get(), id, &err);
        if (status == PVLLM_STATUS_OK) {
          std::lock_guard<std::mutex> lock(mu);
          submitted[id].abort_accepted = true;
        } else if (status != PVLLM_STATUS_NOT_FOUND) {
          record_failure(std::string("abort: ") + pvllm_status_to_string(status));
        }
        pvllm_error_free(err);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });

  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  ASSERT_EQ(submitted.size(), static_cast<size_t>(kNumSubmitters * kRequestsPerSubmitter));

  for (const auto& ids : seen_ids) {
    for (uint64_t id : ids) EXPECT_EQ(submitted.count(id), 1u) << "event for unknown id " << id;
  }
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> reasons;
  for (const auto& list : finishes) {
    for (const FinishEvent& f : list)
      reasons[{f.request_id, f.sample_index}].push_back(f.finish_reason);
  }
  int num_aborted = 0;
  for (const auto& [id, info] : submitted) {
    for (int32_t sample = 0; sample < info.n; ++sample) {
      const std::vector<int32_t>& r = reasons[{id, sample}];
      ASSERT_EQ(r.size(), 1u) << "request " << id << " sample " << sample;
      if (info.abort_accepted) {
        EXPECT_TRUE(r[0] == PVLLM_FINISH_ABORT || r[0] == PVLLM_FINISH_STOP ||
                    r[0] == PVLLM_FINISH_LENGTH)
            << "request " << id << " finished with " << r[0];
        num_aborted += r[0] == PVLLM_FINISH_ABORT;
      } else {
        EXPECT_TRUE(r[0] == PVLLM_FINISH_STOP || r[0] == PVLLM_FINISH_LENGTH)
            << "request " << id << " (never aborted) finished with " << r[0];
      }
    }
  }
  size_t num_expected_samples = 0;
  for (const auto& [id, info] : submitted) num_expected_samples += static_cast<size_t>(info.n);
  EXPECT_EQ(reasons.size(), num_expected_samples) << "finish events for samples that do not exist";

  pvllm_stats stats;
  pvllm_stats_init(&stats, sizeof stats);
  ASSERT_EQ(pvllm_get_stats(engine.get(), &stats, &error), PVLLM_STATUS_OK) << error_text(error);
  EXPECT_EQ(stats.num_requests_finished, static_cast<int64_t>(submitted.size()));
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_waiting, 0);
  EXPECT_EQ(stats.num_blocks_used, 0);
  RecordProperty("aborted_samples", num_aborted);
}

}  // namespace
