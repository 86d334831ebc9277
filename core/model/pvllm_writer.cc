// Writing a .pvllm file: plan the tensors, write their bytes streaming and
// hashing, then the header with the checksums (pvllm_writer.h).
#include "core/model/pvllm_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/base/file_bytes.h"
#include "core/base/panel_layout.h"
#include "core/model/format/pvllm_model_generated.h"
#include "core/model/gguf_file.h"
#include "core/model/gguf_writer.h"
#include "core/model/pvllm_file.h"
#include "core/model/quantize_model.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pvllm {

namespace {

namespace fs = std::filesystem;
namespace fb = pvllm::format;
using pvllm_format::kAlignment;
using pvllm_format::kPreambleBytes;

constexpr size_t kChunkBytes = size_t{8} << 20;

// One tensor of the output: its parts in the source (several for a packed
// q/k/v or gate/up), and where it goes.
struct Planned {
  std::string name;
  std::vector<const Tensor*> parts;
  DType dtype = DType::kF32;
  Layout layout = Layout::kRowMajor;
  std::vector<int64_t> shape;
  panels::Shape panel_shape;  // kPanels16 only
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

struct TokenizerTexts {
  EmbeddedTokenizer::Kind kind = EmbeddedTokenizer::Kind::kNone;
  std::string data, config_json, chat_template_jinja;
};

Status read_tokenizer(const Model& model, TokenizerTexts* out) {
  TokenizerTexts t;
  if (model.format == ModelFormat::kGguf) {
    // The tokenizer and chat templates are metadata: carried as a GGUF of
    // those keys alone, read back by the same code as the source's.
    gguf::File file;
    PVLLM_RETURN_IF_ERROR(gguf::open(model.path, &file));
    if (file.metadata().find("tokenizer.ggml.model") != nullptr) {
      t.kind = EmbeddedTokenizer::Kind::kGguf;
      t.data = gguf::write_metadata(file.metadata(), gguf::is_tokenizer_key);
    }
    *out = std::move(t);
    return Status::Ok();
  }
  if (model.format == ModelFormat::kPvllm) {
    const EmbeddedTokenizer& e = model.embedded_tokenizer;
    t.kind = e.kind;
    t.data = e.data;
    t.config_json = e.config_json;
    t.chat_template_jinja = e.chat_template_jinja;
    *out = std::move(t);
    return Status::Ok();
  }
  std::error_code ec;
  const fs::path folder =
      fs::is_directory(model.path, ec) ? fs::path(model.path) : fs::path(model.path).parent_path();
  if (!model.tokenizer_path.empty()) {
    t.kind = fs::path(model.tokenizer_path).extension() == ".json"
                 ? EmbeddedTokenizer::Kind::kJson
                 : EmbeddedTokenizer::Kind::kSentencePiece;
    PVLLM_RETURN_IF_ERROR(read_file_bytes(model.tokenizer_path, &t.data));
    if (t.data.empty()) return CorruptModel(model.tokenizer_path + " is empty");
  }
  if (fs::is_regular_file(folder / "tokenizer_config.json", ec)) {
    PVLLM_RETURN_IF_ERROR(
        read_file_bytes((folder / "tokenizer_config.json").string(), &t.config_json));
  }
  if (fs::is_regular_file(folder / "chat_template.jinja", ec)) {
    PVLLM_RETURN_IF_ERROR(
        read_file_bytes((folder / "chat_template.jinja").string(), &t.chat_template_jinja));
  }
  *out = std::move(t);
  return Status::Ok();
}

DType target_dtype(ConvertOptions::DTypeChoice choice, DType source) {
  if (dtype_is_quantized(source)) return source;  // --dtype chooses among the plain types
  switch (choice) {
    case ConvertOptions::DTypeChoice::kKeep:
      return source;
    case ConvertOptions::DTypeChoice::kF32:
      return DType::kF32;
    case ConvertOptions::DTypeChoice::kBF16:
      return DType::kBF16;
    case ConvertOptions::DTypeChoice::kF16:
      return DType::kF16;
  }
  return source;
}

// Elements [begin, begin + n) of `src` as dtype `to` into dst.
void convert(const Tensor& src, int64_t begin, int64_t n, DType to, uint8_t* dst) {
  const size_t elem = dtype_size(src.dtype);
  if (src.dtype == to) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.data) + begin * elem,
                static_cast<size_t>(n) * elem);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_as_float(src.dtype, src.data, begin + i);
    if (to == DType::kF32) {
      std::memcpy(dst + i * 4, &v, 4);
    } else {
      const uint16_t h = to == DType::kBF16 ? float_to_bf16(v) : float_to_fp16(v);
      std::memcpy(dst + i * 2, &h, 2);
    }
  }
}

// Lets the kernel drop the source pages of a tensor once it is written, so
// the conversion's resident memory does not grow with the model (the pages
// stay in the page cache; a later read maps them again). Only for bytes of
// a file mapping: heap memory would be zeroed.
void release_source(const Model& model, const Tensor& t) {
  const auto* data = static_cast<const unsigned char*>(t.data);
  const bool mapped = std::any_of(model.files.begin(), model.files.end(), [&](const auto& f) {
    return f->size() > 0 && data >= f->data() && data + t.nbytes() <= f->data() + f->size();
  });
  if (!mapped) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(t.data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + t.nbytes()) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// What the header records as the source's format (a .pvllm source is
// recorded as Hugging Face, as it always has been).
fb::SourceFormat source_format(ModelFormat format) {
  switch (format) {
    case ModelFormat::kLlama2c:
      return fb::SourceFormat::Llama2c;
    case ModelFormat::kGguf:
      return fb::SourceFormat::Gguf;
    default:
      return fb::SourceFormat::HuggingFace;
  }
}

// The source's file or folder name, recorded in the header ("hf/" gives
// "hf").
std::string source_name(const std::string& path) {
  fs::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

class Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)) {}
  ~Output() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  Status open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return IoError(path_ + ": cannot create: " + std::strerror(errno));
    return Status::Ok();
  }
  Status write_at(uint64_t offset, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return IoError(path_ + ": cannot write: " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }
  Status finish(uint64_t size, const std::string& final_path) {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0 || ::fsync(fd_) != 0) {
      return IoError(path_ + ": cannot finish: " + std::strerror(errno));
    }
    ::close(fd_);
    fd_ = -1;
    if (::rename(path_.c_str(), final_path.c_str()) != 0) {
      return IoError(final_path + ": cannot rename into place: " + std::strerror(errno));
    }
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

class Writer {
 public:
  Writer(Model* model, const ConvertOptions& options) : model_(model), options_(options) {}

  Status plan() {
    const ModelWeights& w = model_->weights;
    const ModelConfig& c = model_->config;
    if (!c.rope_freq_factors.empty() && c.rope_scaling.type != RopeScaling::Type::kNone) {
      return Unsupported(model_->path +
                         ": RoPE frequency divisors beside a rope_scaling formula cannot be "
                         "written to a .pvllm file (it holds one or the other)");
    }
    // Quantized matrices are stored row-major (as ggml's blocks), and a
    // file is packed all or nothing: a model with any is written row-major.
    bool quantized = false;
    model_->for_each_weight([&](const Tensor& t) { quantized |= dtype_is_quantized(t.dtype); });
    if (quantized) packed_ = false;
    add_row_major("model.embed_tokens.weight", w.embed);
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& l = w.layers[i];
      const std::string p = "model.layers." + std::to_string(i) + ".";
      add_row_major(p + "input_layernorm.weight", l.attn_norm);
      add_row_major(p + "post_attention_layernorm.weight", l.ffn_norm);
      if (packed_) {
        PVLLM_RETURN_IF_ERROR(add_packed(p + "self_attn.qkv_proj.weight", {&l.wq, &l.wk, &l.wv}));
        PVLLM_RETURN_IF_ERROR(add_packed(p + "self_attn.o_proj.weight", {&l.wo}));
        PVLLM_RETURN_IF_ERROR(add_packed(p + "mlp.gate_up_proj.weight", {&l.w_gate, &l.w_up}));
        PVLLM_RETURN_IF_ERROR(add_packed(p + "mlp.down_proj.weight", {&l.w_down}));
      } else {
        add_row_major(p + "self_attn.q_proj.weight", l.wq);
        add_row_major(p + "self_attn.k_proj.weight", l.wk);
        add_row_major(p + "self_attn.v_proj.weight", l.wv);
        add_row_major(p + "self_attn.o_proj.weight", l.wo);
        add_row_major(p + "mlp.gate_proj.weight", l.w_gate);
        add_row_major(p + "mlp.up_proj.weight", l.w_up);
        add_row_major(p + "mlp.down_proj.weight", l.w_down);
      }
      const std::string a = p + "self_attn.";
      if (c.qkv_bias) {
        add_row_major(a + "q_proj.bias", l.bq);
        add_row_major(a + "k_proj.bias", l.bk);
        add_row_major(a + "v_proj.bias", l.bv);
      }
      if (c.o_bias) add_row_major(a + "o_proj.bias", l.bo);
      if (c.qk_norm) {
        add_row_major(a + "q_norm.weight", l.q_norm);
        add_row_major(a + "k_norm.weight", l.k_norm);
      }
    }
    add_row_major("model.norm.weight", w.final_norm);
    // Packed: the head always (the embedding's bytes when tied), as the
    // CPU backend reads it. Row-major: only when not tied.
    if (packed_) {
      PVLLM_RETURN_IF_ERROR(
          add_packed("lm_head.weight", {c.tie_word_embeddings ? &w.embed : &w.lm_head}));
    } else if (!c.tie_word_embeddings) {
      add_row_major("lm_head.weight", w.lm_head);
    }
    for (const Planned& t : tensors_) {
      for (const Tensor* part : t.parts) {
        if (part->empty()) return Internal("convert: " + t.name + " has no data in the source");
      }
    }
    return Status::Ok();
  }

  Status write(const std::string& out_path) {
    PVLLM_RETURN_IF_ERROR(read_tokenizer(*model_, &tokenizer_));
    // The header's size does not depend on the checksums' values (defaults
    // are forced), so the data area is placed from a header with zeros.
    std::vector<uint8_t> header;
    build_header(&header);
    const uint64_t data_offset = align(kPreambleBytes + header.size());
    uint64_t offset = data_offset, total = 0;
    for (Planned& t : tensors_) {
      t.offset = offset;
      offset = align(offset + t.size);
      total += t.size;
    }
    const uint64_t file_size =
        tensors_.empty() ? data_offset : tensors_.back().offset + tensors_.back().size;

    Output out(out_path + ".tmp");
    PVLLM_RETURN_IF_ERROR(out.open());
    uint64_t done = 0;
    for (Planned& t : tensors_) {
      PVLLM_RETURN_IF_ERROR(t.layout == Layout::kPanels16 ? write_packed(&out, &t)
                                                          : write_row_major(&out, &t));
      for (const Tensor* part : t.parts) release_source(*model_, *part);
      done += t.size;
      if (options_.progress) options_.progress(done, total, t.name);
    }
    std::vector<uint8_t> final_header;
    build_header(&final_header);
    if (final_header.size() != header.size()) {
      return Internal("convert: the header changed size once checksums were known");
    }
    pvllm_format::Preamble p{};
    std::memcpy(p.magic, pvllm_format::kMagic, sizeof(p.magic));
    p.major_version = pvllm_format::kMajorVersion;
    p.minor_version = pvllm_format::kMinorVersion;
    p.header_offset = kPreambleBytes;
    p.header_size = final_header.size();
    p.data_offset = data_offset;
    p.file_size = file_size;
    p.header_checksum = pvllm_format::checksum(final_header.data(), final_header.size());
    PVLLM_RETURN_IF_ERROR(out.write_at(0, &p, sizeof(p)));
    PVLLM_RETURN_IF_ERROR(out.write_at(kPreambleBytes, final_header.data(), final_header.size()));
    return out.finish(file_size, out_path);
  }

 private:
  static uint64_t align(uint64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

  void add_row_major(const std::string& name, const Tensor& t) {
    Planned p;
    p.name = name;
    p.parts = {&t};
    p.dtype = target_dtype(options_.dtype, t.dtype);
    p.shape = t.shape;
    p.size = dtype_is_quantized(p.dtype) ? t.nbytes()
                                         : static_cast<uint64_t>(t.numel()) * dtype_size(p.dtype);
    tensors_.push_back(std::move(p));
  }

  Status add_packed(const std::string& name, std::vector<const Tensor*> parts) {
    Planned p;
    p.name = name;
    p.parts = std::move(parts);
    p.layout = Layout::kPanels16;
    // The packed dtype: the target's, or fp32 when kept dtypes differ.
    DType dtype = target_dtype(options_.dtype, p.parts[0]->dtype);
    for (const Tensor* t : p.parts) {
      if (target_dtype(options_.dtype, t->dtype) != dtype) dtype = DType::kF32;
    }
    PVLLM_RETURN_IF_ERROR(panels::shape_of(p.parts, &p.panel_shape));
    PVLLM_RETURN_IF_ERROR(
        panels::shape_of(p.panel_shape.rows, p.panel_shape.cols, dtype, &p.panel_shape));
    p.dtype = dtype;
    p.shape = {p.panel_shape.rows, p.panel_shape.cols};
    p.size = static_cast<uint64_t>(p.panel_shape.bytes());
    tensors_.push_back(std::move(p));
    return Status::Ok();
  }

  // Row-major, converted chunk by chunk (or written straight from the
  // source when the dtype is kept).
  Status write_row_major(Output* out, Planned* t) {
    const Tensor& src = *t->parts[0];
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    if (dtype_is_quantized(t->dtype)) {  // blocks, copied as they are
      const auto* bytes = static_cast<const uint8_t*>(src.data);
      for (uint64_t done = 0; done < t->size; done += kChunkBytes) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, t->size - done));
        XXH3_64bits_update(&state, bytes + done, n);
        PVLLM_RETURN_IF_ERROR(out->write_at(t->offset + done, bytes + done, n));
      }
      t->checksum = XXH3_64bits_digest(&state);
      return Status::Ok();
    }
    const int64_t n = src.numel();
    const auto elem = static_cast<int64_t>(dtype_size(t->dtype));
    const int64_t per_chunk = static_cast<int64_t>(kChunkBytes) / 4;
    uint64_t at = t->offset;
    for (int64_t begin = 0; begin < n; begin += per_chunk) {
      const int64_t count = std::min(per_chunk, n - begin);
      const size_t bytes = static_cast<size_t>(count * elem);
      const uint8_t* data = nullptr;
      if (src.dtype == t->dtype) {
        data = static_cast<const uint8_t*>(src.data) + begin * elem;
      } else {
        buffer_.resize(bytes);
        convert(src, begin, count, t->dtype, buffer_.data());
        data = buffer_.data();
      }
      XXH3_64bits_update(&state, data, bytes);
      PVLLM_RETURN_IF_ERROR(out->write_at(at, data, bytes));
      at += bytes;
    }
    t->checksum = XXH3_64bits_digest(&state);
    return Status::Ok();
  }

  // Panels, a chunk of whole panels at a time: each part's rows that fall
  // in the chunk, converted to the packed dtype, scattered into place.
  Status write_packed(Output* out, Planned* t) {
    const panels::Shape& shape = t->panel_shape;
    const int64_t per_chunk =
        std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes) / shape.panel_bytes);
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    uint64_t at = t->offset;
    for (int64_t p0 = 0; p0 < shape.num_panels; p0 += per_chunk) {
      const int64_t p1 = std::min(shape.num_panels, p0 + per_chunk);
      const auto bytes = static_cast<size_t>((p1 - p0) * shape.panel_bytes);
      buffer_.assign(bytes, 0);
      const int64_t chunk_row0 = p0 * panels::kRows;
      const int64_t chunk_row1 = p1 * panels::kRows;
      int64_t part_row0 = 0;
      for (const Tensor* part : t->parts) {
        const int64_t rows = part->shape[0];
        const int64_t a = std::max<int64_t>(0, chunk_row0 - part_row0);
        const int64_t b = std::min<int64_t>(rows, chunk_row1 - part_row0);
        if (a < b) {
          Tensor view = rows_as(*part, a, b, t->dtype);
          panels::scatter_rows(view, part_row0 + a - chunk_row0, 0, b - a, shape, buffer_.data());
        }
        part_row0 += rows;
      }
      XXH3_64bits_update(&state, buffer_.data(), bytes);
      PVLLM_RETURN_IF_ERROR(out->write_at(at, buffer_.data(), bytes));
      at += bytes;
    }
    t->checksum = XXH3_64bits_digest(&state);
    return Status::Ok();
  }

  // Rows [a, b) of a row-major matrix as dtype `to`: a view of the source,
  // or a converted copy in scratch_.
  Tensor rows_as(const Tensor& m, int64_t a, int64_t b, DType to) {
    const int64_t cols = m.shape[1];
    Tensor v;
    v.name = m.name;
    v.dtype = to;
    v.shape = {b - a, cols};
    if (m.dtype == to) {
      v.data = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(a * cols) * dtype_size(to);
    } else {
      scratch_.resize(static_cast<size_t>((b - a) * cols) * dtype_size(to));
      convert(m, a * cols, (b - a) * cols, to, scratch_.data());
      v.data = scratch_.data();
    }
    return v;
  }

  void build_header(std::vector<uint8_t>* out) const {
    flatbuffers::FlatBufferBuilder fbb(1 << 16);
    fbb.ForceDefaults(true);
    const ModelConfig& c = model_->config;
    // Divisors are a scaling of their own (plan() refuses them beside another).
    const auto rope_type = c.rope_freq_factors.empty()
                               ? static_cast<fb::RopeScalingType>(c.rope_scaling.type)
                               : fb::RopeScalingType::FreqFactors;
    const auto rope = fb::CreateRopeScaling(
        fbb, rope_type, c.rope_scaling.factor, c.rope_scaling.low_freq_factor,
        c.rope_scaling.high_freq_factor, c.rope_scaling.original_max_position_embeddings);
    const std::vector<int64_t> stops(c.extra_stop_token_ids.begin(), c.extra_stop_token_ids.end());
    const auto config = fb::CreateConfig(
        fbb, fbb.CreateString(c.architecture), c.hidden_size, c.intermediate_size, c.num_layers,
        c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, c.max_position_embeddings,
        c.rms_norm_eps, c.rope_theta, rope, static_cast<fb::RopeStyle>(c.rope_style),
        c.tie_word_embeddings, c.qkv_bias, c.o_bias, c.qk_norm, c.sliding_window, c.bos_token_id,
        c.eos_token_id, fbb.CreateVector(stops),
        c.rope_freq_factors.empty() ? 0 : fbb.CreateVector(c.rope_freq_factors));
    const auto tokenizer = fb::CreateTokenizer(
        fbb, static_cast<fb::TokenizerKind>(tokenizer_.kind),
        fbb.CreateVector(reinterpret_cast<const uint8_t*>(tokenizer_.data.data()),
                         tokenizer_.data.size()),
        fbb.CreateString(tokenizer_.config_json), fbb.CreateString(tokenizer_.chat_template_jinja));
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
    for (const Planned& t : tensors_) {
      tensors.push_back(fb::CreateTensor(fbb, fbb.CreateString(t.name),
                                         static_cast<fb::DType>(t.dtype),
                                         static_cast<fb::Layout>(t.layout),
                                         fbb.CreateVector(t.shape), t.offset, t.size, t.checksum));
    }
    const auto root = fb::CreateModel(
        fbb, config, tokenizer, fbb.CreateVector(tensors), source_format(model_->format),
        fbb.CreateString(source_name(model_->path)), fbb.CreateString(options_.writer));
    fb::FinishModelBuffer(fbb, root);
    out->assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

  Model* model_;
  const ConvertOptions& options_;
  bool packed_ = options_.packed;
  TokenizerTexts tokenizer_;
  std::vector<Planned> tensors_;
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> scratch_;
};

}  // namespace

Status parse_dtype_choice(const std::string& name, ConvertOptions::DTypeChoice* out) {
  using C = ConvertOptions::DTypeChoice;
  if (name == "keep")
    *out = C::kKeep;
  else if (name == "fp32")
    *out = C::kF32;
  else if (name == "bf16")
    *out = C::kBF16;
  else if (name == "fp16")
    *out = C::kF16;
  else
    return InvalidArgument("dtype \"" + name + "\": expected keep, fp32, bf16 or fp16");
  return Status::Ok();
}

Status write_pvllm(Model* model, const std::string& out_path, const ConvertOptions& options) {
  // A source of another .pvllm: its checksums are checked as it is read.
  if (model->pending_checksums != nullptr) {
    Status st = Status::Ok();
    model->for_each_weight([&](const Tensor& t) {
      if (st.ok()) st = model->verify_tensor(t);
    });
    PVLLM_RETURN_IF_ERROR(st);
  }
  PVLLM_RETURN_IF_ERROR(unpack_weights(model));
  if (!options.quantize.empty()) PVLLM_RETURN_IF_ERROR(quantize_model(model, options.quantize));
  Writer writer(model, options);
  PVLLM_RETURN_IF_ERROR(writer.plan());
  return writer.write(out_path);
}

}  // namespace pvllm
