// Opening a .pvllm file: the preamble, the header's checksum, the
// FlatBuffers verifier, then the config and tensor table, each range-checked
// before use (pvllm_file.h).
#include "core/model/pvllm_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/base/fault_injection.h"
#include "core/base/panel_layout.h"
#include "core/model/format/pvllm_model_generated.h"
#include "core/model/hf_arch.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pvllm::pvllm_format {

namespace fb = pvllm::format;

uint64_t checksum(const void* data, size_t size) { return XXH3_64bits(data, size); }

namespace {

// Widths (hidden, intermediate, heads, head_dim), counts (vocabulary,
// positions) and layers beyond these are not a model pvllm can serve; they
// are refused before anything is sized from them.
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxCount = int64_t{1} << 30;
constexpr int64_t kMaxLayers = 4096;

struct Reader {
  std::string path;
  Status bad(const std::string& what) const { return CorruptModel(path + ": " + what); }

  Status narrow(const char* field, int64_t v, int64_t lo, int64_t hi, int32_t* out) const {
    if (v < lo || v > hi) {
      return bad("config field " + std::string(field) + " = " + std::to_string(v) +
                 " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  }
  Status finite(const char* field, float v, float* out) const {
    if (!std::isfinite(v)) return bad("config field " + std::string(field) + " is not finite");
    *out = v;
    return Status::Ok();
  }

  Status read_config(const fb::Config& c, ModelConfig* out) const {
    ModelConfig m;
    m.architecture = c.architecture()->str();
    // The architectures pvllm serves; every field they honour is in Config.
    if (find_hf_arch(m.architecture) == nullptr) {
      return Unsupported(path + ": architecture \"" + m.architecture +
                         "\" is not one this pvllm serves");
    }
    PVLLM_RETURN_IF_ERROR(narrow("hidden_size", c.hidden_size(), 1, kMaxWidth, &m.hidden_size));
    PVLLM_RETURN_IF_ERROR(
        narrow("intermediate_size", c.intermediate_size(), 1, kMaxWidth, &m.intermediate_size));
    PVLLM_RETURN_IF_ERROR(narrow("num_layers", c.num_layers(), 1, kMaxLayers, &m.num_layers));
    PVLLM_RETURN_IF_ERROR(narrow("num_heads", c.num_heads(), 1, kMaxWidth, &m.num_heads));
    PVLLM_RETURN_IF_ERROR(narrow("num_kv_heads", c.num_kv_heads(), 1, kMaxWidth, &m.num_kv_heads));
    PVLLM_RETURN_IF_ERROR(narrow("head_dim", c.head_dim(), 1, kMaxWidth, &m.head_dim));
    PVLLM_RETURN_IF_ERROR(narrow("vocab_size", c.vocab_size(), 1, kMaxCount, &m.vocab_size));
    PVLLM_RETURN_IF_ERROR(narrow("max_position_embeddings", c.max_position_embeddings(), 1,
                                 std::numeric_limits<int32_t>::max(), &m.max_position_embeddings));
    PVLLM_RETURN_IF_ERROR(finite("rms_norm_eps", c.rms_norm_eps(), &m.rms_norm_eps));
    PVLLM_RETURN_IF_ERROR(finite("rope_theta", c.rope_theta(), &m.rope_theta));
    if (const fb::RopeScaling* rs = c.rope_scaling()) {
      const auto type = static_cast<uint8_t>(rs->type());
      if (type > static_cast<uint8_t>(fb::RopeScalingType::MAX)) {
        return bad("rope_scaling type " + std::to_string(type) + " is not one this reader knows");
      }
      // FreqFactors is no formula: ModelConfig keeps the divisors alone.
      m.rope_scaling.type = rs->type() == fb::RopeScalingType::FreqFactors
                                ? RopeScaling::Type::kNone
                                : static_cast<RopeScaling::Type>(type);
      PVLLM_RETURN_IF_ERROR(finite("rope_scaling.factor", rs->factor(), &m.rope_scaling.factor));
      PVLLM_RETURN_IF_ERROR(finite("rope_scaling.low_freq_factor", rs->low_freq_factor(),
                                   &m.rope_scaling.low_freq_factor));
      PVLLM_RETURN_IF_ERROR(finite("rope_scaling.high_freq_factor", rs->high_freq_factor(),
                                   &m.rope_scaling.high_freq_factor));
      PVLLM_RETURN_IF_ERROR(narrow("rope_scaling.original_max_position_embeddings",
                                   rs->original_max_position_embeddings(), 1,
                                   std::numeric_limits<int32_t>::max(),
                                   &m.rope_scaling.original_max_position_embeddings));
    }
    const auto style = static_cast<uint8_t>(c.rope_style());
    if (style > static_cast<uint8_t>(fb::RopeStyle::MAX)) {
      return bad("rope_style " + std::to_string(style) + " is not one this reader knows");
    }
    m.rope_style = static_cast<RopeStyle>(style);
    m.tie_word_embeddings = c.tie_word_embeddings();
    m.qkv_bias = c.qkv_bias();
    m.o_bias = c.o_bias();
    m.qk_norm = c.qk_norm();
    PVLLM_RETURN_IF_ERROR(narrow("sliding_window", c.sliding_window(), 0,
                                 std::numeric_limits<int32_t>::max(), &m.sliding_window));
    PVLLM_RETURN_IF_ERROR(narrow("bos_token_id", c.bos_token_id(), -1, kMaxCount, &m.bos_token_id));
    PVLLM_RETURN_IF_ERROR(narrow("eos_token_id", c.eos_token_id(), -1, kMaxCount, &m.eos_token_id));
    if (const auto* stops = c.extra_stop_token_ids()) {
      if (stops->size() > 1024) return bad("more than 1024 extra stop token ids");
      for (const int64_t id : *stops) {
        int32_t v = 0;
        PVLLM_RETURN_IF_ERROR(narrow("extra_stop_token_ids", id, 0, kMaxCount, &v));
        m.extra_stop_token_ids.push_back(v);
      }
    }
    const bool factors_named =
        c.rope_scaling() != nullptr && c.rope_scaling()->type() == fb::RopeScalingType::FreqFactors;
    if (const auto* factors = c.rope_freq_factors()) {
      if (!factors_named) return bad("rope_freq_factors without rope_scaling type FreqFactors");
      if (static_cast<int64_t>(factors->size()) > kMaxWidth)
        return bad("more rope_freq_factors than head_dim allows");
      m.rope_freq_factors.assign(factors->begin(), factors->end());
    }
    if (factors_named && m.rope_freq_factors.empty()) {
      return bad("rope_scaling type FreqFactors without rope_freq_factors");
    }
    const Status valid = m.validate();
    if (!valid.ok()) return bad(valid.message());
    *out = std::move(m);
    return Status::Ok();
  }

  Status read_tokenizer(const fb::Tokenizer* t, EmbeddedTokenizer* out) const {
    EmbeddedTokenizer e;
    if (t == nullptr) {
      *out = e;
      return Status::Ok();
    }
    const auto kind = static_cast<uint8_t>(t->kind());
    if (kind > static_cast<uint8_t>(fb::TokenizerKind::MAX)) {
      return bad("tokenizer kind " + std::to_string(kind) + " is not one this reader knows");
    }
    e.kind = static_cast<EmbeddedTokenizer::Kind>(kind);
    if (t->data() != nullptr) {
      e.data =
          std::string_view(reinterpret_cast<const char*>(t->data()->data()), t->data()->size());
    }
    if (e.kind != EmbeddedTokenizer::Kind::kNone && e.data.empty()) {
      return bad("the tokenizer has a kind but no data");
    }
    if (t->config_json() != nullptr) e.config_json = t->config_json()->string_view();
    if (t->chat_template_jinja() != nullptr) {
      e.chat_template_jinja = t->chat_template_jinja()->string_view();
    }
    *out = e;
    return Status::Ok();
  }

  // One entry of the tensor table, checked on its own; `data_begin` and
  // `file_size` bound where its bytes may lie.
  Status read_tensor(const fb::Tensor& t, uint64_t data_begin, uint64_t file_size,
                     TensorEntry* out) const {
    TensorEntry e;
    e.name = t.name()->str();
    if (e.name.empty()) return bad("a tensor has an empty name");
    const std::string what = "tensor " + e.name;
    const auto dtype = static_cast<uint8_t>(t.dtype());
    if (dtype > static_cast<uint8_t>(fb::DType::MAX)) {
      return bad(what + ": dtype " + std::to_string(dtype) + " is not one this reader knows");
    }
    e.dtype = static_cast<DType>(dtype);
    const auto layout = static_cast<uint8_t>(t.layout());
    if (layout > static_cast<uint8_t>(fb::Layout::MAX)) {
      return bad(what + ": layout " + std::to_string(layout) + " is not one this reader knows");
    }
    e.layout = static_cast<Layout>(layout);
    const auto* shape = t.shape();
    if (shape->size() == 0 || shape->size() > 4) {
      return bad(what + ": has " + std::to_string(shape->size()) + " dimensions (1 to 4 allowed)");
    }
    uint64_t numel = 1;
    for (const int64_t d : *shape) {
      if (d <= 0 || d > kMaxCount) {
        return bad(what + ": dimension " + std::to_string(d) + " is outside [1, 2^30]");
      }
      if (numel > (uint64_t{1} << 40) / static_cast<uint64_t>(d)) {
        return bad(what + ": more than 2^40 elements");
      }
      numel *= static_cast<uint64_t>(d);
      e.shape.push_back(d);
    }
    uint64_t expected = numel * dtype_size(e.dtype);
    if (dtype_is_quantized(e.dtype)) {
      const int64_t row = e.shape.back();
      if (e.layout != Layout::kRowMajor || row % dtype_block_elems(e.dtype) != 0) {
        return bad(what + ": a " + dtype_name(e.dtype) +
                   " tensor must be row-major with rows of whole " +
                   std::to_string(dtype_block_elems(e.dtype)) + "-element blocks");
      }
      expected = numel / static_cast<uint64_t>(row) * dtype_row_bytes(e.dtype, row);
    }
    if (e.layout == Layout::kPanels16) {
      panels::Shape ps;
      if (e.shape.size() != 2 || !panels::shape_of(e.shape[0], e.shape[1], e.dtype, &ps).ok()) {
        return bad(what + ": a panel-layout tensor must be a matrix");
      }
      expected = static_cast<uint64_t>(ps.bytes());
    }
    e.offset = t.offset();
    e.size = t.size();
    e.checksum = t.checksum();
    if (e.size != expected) {
      return bad(what + ": size " + std::to_string(e.size) +
                 " does not match its shape and dtype (" + std::to_string(expected) + " bytes)");
    }
    if (e.offset % kAlignment != 0) {
      return bad(what + ": offset " + std::to_string(e.offset) + " is not a multiple of 4096");
    }
    if (e.offset < data_begin || e.offset > file_size || e.size > file_size - e.offset) {
      return bad(what + ": bytes [" + std::to_string(e.offset) + ", +" + std::to_string(e.size) +
                 ") lie outside the data area [" + std::to_string(data_begin) + ", " +
                 std::to_string(file_size) + ")");
    }
    *out = std::move(e);
    return Status::Ok();
  }

  Status check_no_overlap(const std::vector<TensorEntry>& tensors) const {
    std::vector<const TensorEntry*> sorted;
    std::set<std::string_view> names;
    for (const TensorEntry& e : tensors) {
      if (!names.insert(e.name).second) return bad("tensor " + e.name + " is listed twice");
      sorted.push_back(&e);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const TensorEntry* a, const TensorEntry* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < sorted.size(); ++i) {
      const TensorEntry& a = *sorted[i - 1];
      const TensorEntry& b = *sorted[i];
      if (a.offset + a.size > b.offset) {
        return bad("tensors " + a.name + " and " + b.name + " overlap");
      }
    }
    return Status::Ok();
  }
};

// The preamble of a file of `file_size` bytes, checked: magic, version,
// size, and header and data extents inside the file.
Status check_preamble(const Reader& r, const unsigned char* first, uint64_t file_size,
                      Preamble* out) {
  if (file_size < kPreambleBytes) {
    return r.bad("the file is " + std::to_string(file_size) +
                 " bytes, shorter than the 64-byte preamble (truncated?)");
  }
  Preamble p;
  std::memcpy(&p, first, sizeof(p));
  if (std::memcmp(p.magic, kMagic, sizeof(kMagic)) != 0) {
    return r.bad("not a .pvllm file (its first bytes are not the PVLLM magic)");
  }
  if (p.major_version != kMajorVersion) {
    return Unsupported(r.path + ": format version " + std::to_string(p.major_version) + "." +
                       std::to_string(p.minor_version) + "; this pvllm reads version " +
                       std::to_string(kMajorVersion) + ".x (convert the model again)");
  }
  if (p.file_size != file_size) {
    return r.bad("the file is " + std::to_string(file_size) + " bytes, its preamble says " +
                 std::to_string(p.file_size) + (file_size < p.file_size ? " (truncated)" : ""));
  }
  if (p.header_offset != kPreambleBytes || p.header_size == 0 ||
      p.header_size > file_size - kPreambleBytes ||
      p.data_offset < kPreambleBytes + p.header_size || p.data_offset > file_size ||
      p.data_offset % kAlignment != 0) {
    return r.bad("the preamble's header and data extents do not fit the file");
  }
  if (p.header_size > (uint64_t{1} << 31)) return r.bad("the header is larger than 2 GiB");
  *out = p;
  return Status::Ok();
}

// The header's `p.header_size` bytes at `hdr`: checksum, verifier, fields.
Status parse_header(const Reader& r, const Preamble& p, const unsigned char* hdr,
                    uint64_t file_size, FileHeader* header) {
  if (checksum(hdr, p.header_size) != p.header_checksum) {
    return r.bad("the header's checksum does not match (the file is damaged)");
  }
  flatbuffers::Verifier verifier(hdr, p.header_size, /*max_depth=*/16, /*max_tables=*/1 << 20);
  if (!fb::VerifyModelBuffer(verifier)) {
    return r.bad("the header is not a valid pvllm FlatBuffer (the verifier refused it)");
  }
  const fb::Model* m = fb::GetModel(hdr);

  FileHeader h;
  h.major_version = p.major_version;
  h.minor_version = p.minor_version;
  h.header_size = p.header_size;
  h.data_offset = p.data_offset;
  h.file_size = file_size;
  PVLLM_RETURN_IF_ERROR(r.read_config(*m->config(), &h.config));
  PVLLM_RETURN_IF_ERROR(r.read_tokenizer(m->tokenizer(), &h.tokenizer));
  switch (m->source_format()) {
    case fb::SourceFormat::HuggingFace:
      h.source_format = ModelFormat::kHuggingFace;
      break;
    case fb::SourceFormat::Llama2c:
      h.source_format = ModelFormat::kLlama2c;
      break;
    case fb::SourceFormat::Gguf:
      h.source_format = ModelFormat::kGguf;
      break;
    default:
      return r.bad("source format " + std::to_string(static_cast<int>(m->source_format())) +
                   " is not one this reader knows");
  }
  if (m->source() != nullptr) h.source = m->source()->str();
  if (m->writer() != nullptr) h.writer = m->writer()->str();
  if (m->tensors()->size() > (1u << 20)) return r.bad("more than 2^20 tensors");
  h.tensors.reserve(m->tensors()->size());
  for (const fb::Tensor* t : *m->tensors()) {
    TensorEntry e;
    PVLLM_RETURN_IF_ERROR(r.read_tensor(*t, p.data_offset, file_size, &e));
    h.tensors.push_back(std::move(e));
  }
  PVLLM_RETURN_IF_ERROR(r.check_no_overlap(h.tensors));
  *header = std::move(h);
  return Status::Ok();
}

Status io_error(const std::string& path, const char* what, int err) {
  const std::string message = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return NotFound(message);
  return IoError(message);
}

// Reads exactly n bytes at offset; false on a short read or an error.
bool read_at(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

Status open_file(const std::string& path, std::shared_ptr<MappedFile>* file, FileHeader* header) {
  std::shared_ptr<MappedFile> f;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(path, &f));
  const Reader r{path};
  Preamble p;
  PVLLM_RETURN_IF_ERROR(check_preamble(r, f->data(), f->size(), &p));
  PVLLM_RETURN_IF_ERROR(parse_header(r, p, f->data() + kPreambleBytes, f->size(), header));
  *file = std::move(f);
  return Status::Ok();
}

Status read_header(const std::string& path, FileHeader* header) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return IoError(path + ": not a regular file");
  auto size = static_cast<uint64_t>(st.st_size);
  // Injected fault (tests): the read comes up short, as for a mapping.
  if (fault::should_fail(fault::Site::kFileRead)) size /= 2;
  const Reader r{path};
  unsigned char first[kPreambleBytes] = {};
  if (size >= kPreambleBytes && !read_at(fd, first, kPreambleBytes, 0)) {
    return io_error(path, "cannot read", errno);
  }
  Preamble p;
  PVLLM_RETURN_IF_ERROR(check_preamble(r, first, size, &p));
  auto bytes = std::make_shared<std::vector<unsigned char>>();
  try {
    bytes->resize(p.header_size);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(path + ": cannot allocate " + std::to_string(p.header_size) +
                       " bytes for the header");
  }
  if (!read_at(fd, bytes->data(), bytes->size(), kPreambleBytes)) {
    return io_error(path, "cannot read the header", errno);
  }
  PVLLM_RETURN_IF_ERROR(parse_header(r, p, bytes->data(), size, header));
  header->storage = std::move(bytes);
  return Status::Ok();
}

}  // namespace pvllm::pvllm_format
