// Reads fuzz input as a stream of choices: each call takes the next bytes
// (zeros once the input is spent), so that every input is a valid program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pvllm::fuzz {

class ByteStream {
 public:
  ByteStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // A value in [0, n) (n > 0).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(u32() % n); }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  uint64_t u64() { return (static_cast<uint64_t>(u32()) << 32) | u32(); }
  // An int32 in [lo, hi].
  int32_t range(int32_t lo, int32_t hi) {
    return lo + static_cast<int32_t>(below(static_cast<uint32_t>(hi - lo + 1)));
  }
  // A float from a table of edge cases and ordinary values.
  float number() {
    static const float kValues[] = {0.0f,
                                    -0.0f,
                                    1.0f,
                                    0.5f,
                                    2.0f,
                                    -1.0f,
                                    1e-8f,
                                    1e30f,
                                    0.95f,
                                    100.0f,
                                    1.2f,
                                    -100.0f,
                                    1e-45f,
                                    0.7f,
                                    __builtin_inff(),
                                    -__builtin_inff(),
                                    __builtin_nanf("")};
    return kValues[below(sizeof(kValues) / sizeof(kValues[0]))];
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace pvllm::fuzz
