// cpu_make_llama2c_model OUT.bin DIM HIDDEN LAYERS HEADS KV_HEADS VOCAB SEQ_LEN [SEED]
//
// Writes a llama2.c checkpoint (the legacy "v0" export: seven int32 header
// fields, then fp32 tensors, the classifier shared with the embedding) with
// random weights in the given shape: the benchmark models of
// scripts/bench_cpu.sh, readable by pvllm, llama2.c's run.c and llama.cpp's
// llama2.c converter alike. Matrices are uniform with standard deviation
// 0.02 and norm weights 1, so activations stay in a normal range.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// xorshift64*: fast, and enough for weights whose values do not matter.
struct Rng {
  uint64_t s;
  float uniform() {  // in [-1, 1)
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<float>((s * 0x2545F4914F6CDD1Dull) >> 40) * 0x1p-23f - 1.0f;
  }
};

bool write_floats(std::FILE* f, int64_t count, Rng* rng, float scale, float constant) {
  std::vector<float> buf(1 << 16);
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min<int64_t>(count - done, static_cast<int64_t>(buf.size()));
    for (int64_t i = 0; i < n; ++i) buf[i] = scale != 0.0f ? scale * rng->uniform() : constant;
    if (std::fwrite(buf.data(), sizeof(float), n, f) != static_cast<size_t>(n)) return false;
    done += n;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9) {
    std::fprintf(stderr,
                 "usage: %s OUT.bin DIM HIDDEN LAYERS HEADS KV_HEADS VOCAB SEQ_LEN [SEED]\n",
                 argv[0]);
    return 2;
  }
  int32_t h[7];
  for (int i = 0; i < 7; ++i) {
    h[i] = static_cast<int32_t>(std::atol(argv[2 + i]));
    if (h[i] <= 0) {
      std::fprintf(stderr, "%s: argument %d must be a positive integer\n", argv[0], i + 2);
      return 2;
    }
  }
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
  const int64_t vocab = h[5], seq_len = h[6];
  if (dim % heads != 0 || heads % kv_heads != 0 || (dim / heads) % 2 != 0) {
    std::fprintf(stderr, "%s: DIM must split into HEADS of even size, HEADS into KV_HEADS\n",
                 argv[0]);
    return 2;
  }
  Rng rng{argc > 9 ? std::strtoull(argv[9], nullptr, 10) | 1 : 0x9E3779B97F4A7C15ull};
  std::FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr) {
    std::perror(argv[1]);
    return 1;
  }
  const int64_t kv_dim = dim / heads * kv_heads;
  const float s = 0.02f * std::sqrt(3.0f);  // uniform [-s, s): standard deviation 0.02
  bool ok = std::fwrite(h, sizeof(h), 1, f) == 1;
  ok = ok && write_floats(f, vocab * dim, &rng, s, 0);            // token embedding
  ok = ok && write_floats(f, layers * dim, &rng, 0, 1);           // attention norms
  ok = ok && write_floats(f, layers * dim * dim, &rng, s, 0);     // wq
  ok = ok && write_floats(f, layers * dim * kv_dim, &rng, s, 0);  // wk
  ok = ok && write_floats(f, layers * dim * kv_dim, &rng, s, 0);  // wv
  ok = ok && write_floats(f, layers * dim * dim, &rng, s, 0);     // wo
  ok = ok && write_floats(f, layers * dim, &rng, 0, 1);           // ffn norms
  ok = ok && write_floats(f, layers * hidden * dim, &rng, s, 0);  // w1 (gate)
  ok = ok && write_floats(f, layers * dim * hidden, &rng, s, 0);  // w2 (down)
  ok = ok && write_floats(f, layers * hidden * dim, &rng, s, 0);  // w3 (up)
  ok = ok && write_floats(f, dim, &rng, 0, 1);                    // final norm
  // The legacy RoPE tables (cos and sin), which readers skip.
  ok = ok && write_floats(f, seq_len * (dim / heads), &rng, 0, 0);
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
