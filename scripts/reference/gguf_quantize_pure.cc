// gguf_quantize_pure: makes the GGUF fixtures that llama-quantize cannot make
// for stories260K, with ggml's own quantizers (ggml_quantize_chunk, the call
// llama-quantize makes for every tensor it quantizes, no importance matrix).
//
// Why: stories260K's ffn_down rows are 172 wide, a multiple of neither 32 nor
// 256. llama-quantize (llama.cpp's llama_tensor_get_type) has no fallback for
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL and stops with "Unsupported tensor
// size encountered"; for the K and IQ4_XS types every tensor (all rows are 64
// or 172 wide, never a multiple of 256) falls back to Q5_0, Q5_1, Q8_0, IQ4_NL
// or F16, so no llama-quantize file of this model holds a K block.
//
//   model IN.gguf OUT.gguf TYPE
//       Copies IN's metadata and tensors (in IN's order), quantizing to TYPE
//       every tensor llama-quantize would quantize (name ends in "weight",
//       2 or more dimensions, no "_norm.weight" in the name), output.weight
//       and token_embd.weight included, like llama-quantize --pure; a tensor
//       whose rows are not a multiple of TYPE's block size is written as F16
//       instead (the last step of llama-quantize's own fallback). Sets
//       general.file_type and general.quantization_version as llama-quantize
//       does.
//   zoo IN.gguf OUT.gguf
//       One tensor per type, named after it ("q4_K", ...), each the 4096
//       values of IN's blk.0.attn_q.weight laid out as 16 rows of 256, plus
//       "source" (the same values in F32): a row width every block size
//       divides, so the K types appear.
//
// Build against a llama.cpp build (see make_gguf_fixtures.sh):
//   c++ -O2 -std=c++17 gguf_quantize_pure.cc -I<llama.cpp>/ggml/include
//       -I<llama.cpp>/include -L<build>/bin -lggml-base -Wl,-rpath,<build>/bin
#include <strings.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "llama.h"

namespace {

ggml_type parse_type(const char* s) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* name = ggml_type_name(ggml_type(t));
    if (name != nullptr && strcasecmp(name, s) == 0) return ggml_type(t);
  }
  std::fprintf(stderr, "unknown ggml type %s\n", s);
  std::exit(2);
}

int ftype_of(ggml_type t) {
  switch (t) {
    case GGML_TYPE_F16:
      return LLAMA_FTYPE_MOSTLY_F16;
    case GGML_TYPE_BF16:
      return LLAMA_FTYPE_MOSTLY_BF16;
    case GGML_TYPE_Q4_0:
      return LLAMA_FTYPE_MOSTLY_Q4_0;
    case GGML_TYPE_Q4_1:
      return LLAMA_FTYPE_MOSTLY_Q4_1;
    case GGML_TYPE_Q5_0:
      return LLAMA_FTYPE_MOSTLY_Q5_0;
    case GGML_TYPE_Q5_1:
      return LLAMA_FTYPE_MOSTLY_Q5_1;
    case GGML_TYPE_Q8_0:
      return LLAMA_FTYPE_MOSTLY_Q8_0;
    case GGML_TYPE_IQ4_NL:
      return LLAMA_FTYPE_MOSTLY_IQ4_NL;
    default:
      std::fprintf(stderr, "no llama ftype for %s here\n", ggml_type_name(t));
      std::exit(2);
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Quantizes (or converts) `src`, nrows rows of n_per_row f32 values, to `type`.
std::vector<char> quantize(ggml_type type, const float* src, int64_t nrows, int64_t n_per_row) {
  std::vector<char> out(ggml_row_size(type, n_per_row) * size_t(nrows));
  if (type == GGML_TYPE_F32) {
    std::memcpy(out.data(), src, out.size());
    return out;
  }
  const size_t n = ggml_quantize_chunk(type, src, out.data(), 0, nrows, n_per_row, nullptr);
  if (n != out.size()) {
    std::fprintf(stderr, "ggml_quantize_chunk wrote %zu bytes, expected %zu\n", n, out.size());
    std::exit(1);
  }
  return out;
}

struct Out {
  gguf_context* g = gguf_init_empty();
  ggml_context* meta = nullptr;
  std::vector<std::vector<char>> keep;  // tensor data lives until the write

  explicit Out(size_t n_tensors) {
    ggml_init_params p = {ggml_tensor_overhead() * (n_tensors + 1), nullptr, /*no_alloc=*/true};
    meta = ggml_init(p);
  }
  void add(const char* name, ggml_type type, int n_dims, const int64_t* ne,
           std::vector<char> data) {
    ggml_tensor* t = ggml_new_tensor(meta, type, n_dims, ne);
    ggml_set_name(t, name);
    keep.push_back(std::move(data));
    gguf_add_tensor(g, t);
    gguf_set_tensor_data(g, name, keep.back().data());
  }
  int write(const char* path) {
    if (!gguf_write_to_file(g, path, false)) {
      std::fprintf(stderr, "%s: write failed\n", path);
      return 1;
    }
    gguf_free(g);
    ggml_free(meta);
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool model = argc == 5 && std::strcmp(argv[1], "model") == 0;
  const bool zoo = argc == 4 && std::strcmp(argv[1], "zoo") == 0;
  if (!model && !zoo) {
    std::fprintf(stderr, "usage: %s model IN.gguf OUT.gguf TYPE | zoo IN.gguf OUT.gguf\n", argv[0]);
    return 2;
  }
  ggml_context* data = nullptr;
  gguf_init_params params = {/*no_alloc=*/false, /*ctx=*/&data};
  gguf_context* in = gguf_init_from_file(argv[2], params);
  if (in == nullptr) {
    std::fprintf(stderr, "%s: cannot read\n", argv[2]);
    return 1;
  }

  if (zoo) {
    const ggml_tensor* src = ggml_get_tensor(data, "blk.0.attn_q.weight");
    if (src == nullptr || src->type != GGML_TYPE_F32 || ggml_nelements(src) != 4096) {
      std::fprintf(stderr, "%s: blk.0.attn_q.weight must be 4096 F32 values\n", argv[2]);
      return 1;
    }
    const ggml_type types[] = {GGML_TYPE_F16,    GGML_TYPE_BF16,  GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
                               GGML_TYPE_Q5_0,   GGML_TYPE_Q5_1,  GGML_TYPE_Q8_0, GGML_TYPE_Q2_K,
                               GGML_TYPE_Q3_K,   GGML_TYPE_Q4_K,  GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                               GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
    const int n_types = int(sizeof types / sizeof types[0]);
    Out out(static_cast<size_t>(n_types) + 1);
    gguf_set_val_str(out.g, "general.name",
                     "ggml type zoo: stories260K blk.0.attn_q.weight as 16 rows of 256");
    gguf_set_val_u32(out.g, "general.quantization_version", GGML_QNT_VERSION);
    const int64_t ne[2] = {256, 16};
    const float* f = static_cast<const float*>(src->data);
    out.add("source", GGML_TYPE_F32, 2, ne, quantize(GGML_TYPE_F32, f, ne[1], ne[0]));
    for (ggml_type t : types) out.add(ggml_type_name(t), t, 2, ne, quantize(t, f, ne[1], ne[0]));
    const int rc = out.write(argv[3]);
    ggml_free(data);
    gguf_free(in);
    return rc;
  }

  const ggml_type type = parse_type(argv[4]);
  const int64_t n = gguf_get_n_tensors(in);
  Out out(static_cast<size_t>(n));
  gguf_set_kv(out.g, in);
  gguf_set_val_u32(out.g, "general.quantization_version", GGML_QNT_VERSION);
  gguf_set_val_u32(out.g, "general.file_type", uint32_t(ftype_of(type)));
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = gguf_get_tensor_name(in, i);
    const ggml_tensor* t = ggml_get_tensor(data, name.c_str());
    bool q = ends_with(name, "weight") && ggml_n_dims(t) >= 2 &&
             name.find("_norm.weight") == std::string::npos;
    if (t->type != GGML_TYPE_F32) {
      std::fprintf(stderr, "%s: %s is not F32\n", argv[2], name.c_str());
      return 1;
    }
    ggml_type to = GGML_TYPE_F32;
    if (q) to = t->ne[0] % ggml_blck_size(type) == 0 ? type : GGML_TYPE_F16;
    const int64_t rows = ggml_nrows(t);
    std::fprintf(stderr, "%-28s %5lld x %4lld  %s\n", name.c_str(), (long long)t->ne[0],
                 (long long)rows, ggml_type_name(to));
    out.add(name.c_str(), to, ggml_n_dims(t), t->ne,
            quantize(to, static_cast<const float*>(t->data), rows, t->ne[0]));
  }
  const int rc = out.write(argv[3]);
  ggml_free(data);
  gguf_free(in);
  return rc;
}
