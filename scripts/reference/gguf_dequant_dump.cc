// gguf_dequant_dump: the reference side of the GGUF fixtures.
//
// Reads GGUF files with ggml's own gguf reader (gguf_init_from_file, which
// also loads the tensor data) and writes, for every tensor, what ggml makes
// of it: its ggml type, its shape (ne, ggml order: ne[0] is the innermost,
// contiguous dimension), its offset and size in the file's data section, the
// SHA-256 of its raw bytes, and the SHA-256 and first 8 values of its values
// dequantized to f32 by ggml's type traits (ggml_get_type_traits(t)->to_float;
// F32 tensors are taken as they are). The SHA-256 is over the f32 values as
// little-endian bytes, in ggml element order (row by row, ne[0] fastest).
//
// Output: one JSON object a file, on stdout, keys in a fixed order; floats
// are printed with %.9g, which round-trips an f32.
//
// Build against a llama.cpp build (see scripts/reference/make_gguf_fixtures.sh):
//   c++ -O2 -std=c++17 gguf_dequant_dump.cc -I<llama.cpp>/ggml/include
//       -L<build>/bin -lggml-base -Wl,-rpath,<build>/bin
// Usage: gguf_dequant_dump FILE.gguf [display-name]
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"

namespace {

// SHA-256 (FIPS 180-4), small and self-contained.
class Sha256 {
 public:
  Sha256() { reset(); }
  void reset() {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, init, sizeof h_);
    len_ = 0;
    fill_ = 0;
  }
  void update(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    len_ += n;
    while (n > 0) {
      size_t take = 64 - fill_;
      if (take > n) take = n;
      std::memcpy(buf_ + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ == 64) {
        block(buf_);
        fill_ = 0;
      }
    }
  }
  std::string hex() {
    uint64_t bits = len_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t lenbe[8];
    for (int i = 0; i < 8; ++i) lenbe[i] = uint8_t(bits >> (56 - 8 * i));
    update(lenbe, 8);
    char out[65];
    for (int i = 0; i < 8; ++i) std::snprintf(out + 8 * i, 9, "%08x", h_[i]);
    return std::string(out, 64);
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* b) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(b[4 * i]) << 24 | uint32_t(b[4 * i + 1]) << 16 | uint32_t(b[4 * i + 2]) << 8 |
             b[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], bb = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
             h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + S1 + ch + k[i] + w[i];
      uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
      uint32_t t2 = S0 + mj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = bb;
      bb = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += bb;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }
  uint32_t h_[8];
  uint64_t len_;
  uint8_t buf_[64];
  size_t fill_;
};

std::string json_string(const char* s) {
  std::string out = "\"";
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s); *p; ++p) {
    if (*p == '"' || *p == '\\') {
      out += '\\';
      out += char(*p);
    } else if (*p < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", *p);
      out += buf;
    } else {
      out += char(*p);
    }
  }
  return out + "\"";
}

std::string json_float(float v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s FILE.gguf [display-name]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const char* shown = argc == 3 ? argv[2] : argv[1];
  ggml_context* data = nullptr;
  gguf_init_params params = {/*no_alloc=*/false, /*ctx=*/&data};
  gguf_context* g = gguf_init_from_file(path, params);
  if (g == nullptr) {
    std::fprintf(stderr, "%s: gguf_init_from_file failed\n", path);
    return 1;
  }
  const int64_t n = gguf_get_n_tensors(g);
  std::printf(
      "{\"file\": %s, \"gguf_version\": %u, \"alignment\": %zu, \"data_offset\": %zu, \"n_kv\": "
      "%" PRId64 ", \"n_tensors\": %" PRId64 ", \"tensors\": [",
      json_string(shown).c_str(), gguf_get_version(g), gguf_get_alignment(g),
      gguf_get_data_offset(g), gguf_get_n_kv(g), n);
  std::vector<float> f32;
  for (int64_t i = 0; i < n; ++i) {
    const char* name = gguf_get_tensor_name(g, i);
    ggml_tensor* t = ggml_get_tensor(data, name);
    if (t == nullptr) {
      std::fprintf(stderr, "%s: tensor %s has no data\n", path, name);
      return 1;
    }
    const ggml_type type = gguf_get_tensor_type(g, i);
    const int64_t count = ggml_nelements(t);
    const size_t nbytes = ggml_nbytes(t);
    Sha256 raw;
    raw.update(t->data, nbytes);
    f32.resize(size_t(count));
    if (type == GGML_TYPE_F32) {
      std::memcpy(f32.data(), t->data, nbytes);
    } else {
      const ggml_type_traits* tr = ggml_get_type_traits(type);
      if (tr->to_float == nullptr) {
        std::fprintf(stderr, "%s: %s: type %s has no to_float\n", path, name, ggml_type_name(type));
        return 1;
      }
      // Row by row, as ggml's own users do (a row is ne[0] elements).
      const int64_t ne0 = t->ne[0];
      const int64_t rows = count / ne0;
      const size_t row_bytes = ggml_row_size(type, ne0);
      for (int64_t r = 0; r < rows; ++r)
        tr->to_float(static_cast<const char*>(t->data) + size_t(r) * row_bytes,
                     f32.data() + r * ne0, ne0);
    }
    Sha256 deq;
    deq.update(f32.data(), f32.size() * sizeof(float));  // little-endian host
    std::printf("%s\n  {\"name\": %s, \"type\": \"%s\", \"ne\": [", i ? "," : "",
                json_string(name).c_str(), ggml_type_name(type));
    for (int d = 0; d < ggml_n_dims(t); ++d) std::printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
    std::printf(
        "], \"offset\": %zu, \"nbytes\": %zu, \"raw_sha256\": \"%s\", \"f32_sha256\": \"%s\", "
        "\"first8\": [",
        gguf_get_tensor_offset(g, i), nbytes, raw.hex().c_str(), deq.hex().c_str());
    for (int64_t k = 0; k < count && k < 8; ++k)
      std::printf("%s%s", k ? ", " : "", json_float(f32[size_t(k)]).c_str());
    std::printf("]}");
  }
  std::printf("\n]}\n");
  ggml_free(data);
  gguf_free(g);
  return 0;
}
