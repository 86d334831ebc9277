// The stages of Engine::create as EngineConfig::progress reports them. Each
// stage has a name (what the callback receives) and a share of the whole;
// a stage that reports its own progress (the layers read so far) moves the
// fraction through its share, so the fractions only ever grow.
#pragma once

#include <array>
#include <functional>
#include <utility>

namespace pvllm {

enum class CreateStage : int {
  kLoadingModel = 0,  // parsing files and mapping weights, or making random ones
  kReadingWeights,    // touching every weight page, layer by layer
  kQuantizing,        // EngineConfig::quantize: quantizing the weight matrices
  kLoadingTokenizer,
  kOpeningBackend,  // the backend, its weights and the KV pool
  kReady,
};

class CreateProgress {
 public:
  explicit CreateProgress(std::function<void(float, const char*)> callback)
      : callback_(std::move(callback)) {}

  // Reports `stage`, `done` (0..1) of the way through it.
  void report(CreateStage stage, float done = 0.0f) const {
    if (!callback_) return;
    const int index = static_cast<int>(stage);
    float before = 0.0f;
    for (int i = 0; i < index; ++i) before += kStages[i].share;
    callback_(before + kStages[index].share * done, kStages[index].name);
  }

 private:
  struct Stage {
    const char* name;
    float share;  // of the whole; the shares add up to 1
  };
  static constexpr std::array<Stage, 6> kStages = {{
      {"loading model", 0.05f},
      {"reading weights", 0.40f},
      {"quantizing weights", 0.10f},
      {"loading tokenizer", 0.05f},
      {"opening the backend and allocating the KV cache", 0.40f},
      {"ready", 0.0f},
  }};

  std::function<void(float, const char*)> callback_;
};

}  // namespace pvllm
