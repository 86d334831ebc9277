// GGUF parsing. One cursor walks the header, metadata and tensor infos;
// every read is bounds-checked, and every count is compared with the bytes
// left before anything is reserved for it. Tensor bytes are only located,
// never read.
#include "core/model/gguf_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>

#include "core/base/check.h"
#include "core/model/gguf_bytes.h"

namespace pvllm::gguf {

using namespace bytes;  // NOLINT(google-build-using-namespace): the reader's own helpers

namespace {

constexpr unsigned char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kLastValueType = static_cast<uint32_t>(ValueType::kF64);
// The fewest bytes a metadata entry takes (empty key, type, a one-byte
// value) and a tensor info (empty name, n_dims, one dim, type, offset).
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// A bounds-checked little-endian cursor over one file's bytes.
class GgufCursor {
 public:
  GgufCursor(const unsigned char* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t left() const { return size_ - pos_; }

  // The next n bytes; false, taking nothing, when fewer are left.
  bool take(uint64_t n, const unsigned char** out) {
    if (n > left()) return false;
    *out = n == 0 ? nullptr : data_ + pos_;
    pos_ += n;
    return true;
  }

  template <typename T>
  bool read(T* out) {
    const unsigned char* p = nullptr;
    if (!take(sizeof(T), &p)) return false;
    *out = load_le<T>(p);
    return true;
  }

 private:
  const unsigned char* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Reads one file into a Part and its TensorInfos. `What` arguments are
// callables naming the field being read, called only to build a message.
class GgufParser {
 public:
  GgufParser(std::string path, const unsigned char* data, uint64_t size)
      : path_(std::move(path)), cursor_(data, size) {}

  Status parse(uint32_t part_index, Part* part, std::vector<TensorInfo>* tensors) {
    uint64_t num_kv = 0;
    PVLLM_RETURN_IF_ERROR(read_header(part, &num_kv));
    part->metadata = Metadata(path_);
    PVLLM_RETURN_IF_ERROR(read_metadata(num_kv, &part->metadata));
    PVLLM_RETURN_IF_ERROR(read_alignment(part));
    tensors->reserve(part->num_tensors);  // bounded by the bytes left (read_header)
    std::unordered_map<std::string, uint64_t> seen;
    for (uint64_t i = 0; i < part->num_tensors; ++i) {
      TensorInfo tensor;
      tensor.part = part_index;
      PVLLM_RETURN_IF_ERROR(read_tensor_info(i, &tensor));
      const auto [it, added] = seen.emplace(tensor.name, i);
      if (!added) {
        return corrupt("tensor " + quoted(tensor.name) + " appears twice (tensor infos " +
                       std::to_string(it->second) + " and " + std::to_string(i) + ")");
      }
      tensors->push_back(std::move(tensor));
    }
    // pos <= size and alignment <= 2^31: the sum cannot wrap.
    part->data_offset = (cursor_.pos() + part->alignment - 1) / part->alignment * part->alignment;
    return place_tensors(*part, tensors);
  }

 private:
  Status corrupt(const std::string& what) const { return CorruptModel(path_ + ": " + what); }

  Status truncated(const std::string& what) const {
    return corrupt("truncated at byte " + std::to_string(cursor_.pos()) + " of " +
                   std::to_string(cursor_.size()) + " reading " + what);
  }

  template <typename T, typename What>
  Status read(T* out, const What& what) {
    if (!cursor_.read(out)) return truncated(what());
    return Status::Ok();
  }

  template <typename What>
  Status read_string(std::string* out, const What& what) {
    uint64_t length = 0;
    PVLLM_RETURN_IF_ERROR(read(&length, [&] { return "the length of " + what(); }));
    const unsigned char* bytes = nullptr;
    if (!cursor_.take(length, &bytes)) {
      return corrupt(what() + " has length " + std::to_string(length) + ", more than the " +
                     std::to_string(cursor_.left()) + " bytes left in the file");
    }
    out->assign(reinterpret_cast<const char*>(bytes), length);
    return Status::Ok();
  }

  Status read_header(Part* part, uint64_t* num_kv) {
    const unsigned char* magic = nullptr;
    if (!cursor_.take(4, &magic)) return truncated("the magic");
    if (std::memcmp(magic, kGgufMagic, 4) != 0) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "%02x %02x %02x %02x", magic[0], magic[1], magic[2],
                    magic[3]);
      return corrupt(std::string("not a GGUF file: it starts with bytes ") + hex +
                     ", not \"GGUF\"");
    }
    PVLLM_RETURN_IF_ERROR(read(&part->version, [] { return std::string("the version"); }));
    PVLLM_RETURN_IF_ERROR(check_version(part->version));
    PVLLM_RETURN_IF_ERROR(
        read(&part->num_tensors, [] { return std::string("the header's tensor count"); }));
    PVLLM_RETURN_IF_ERROR(read(num_kv, [] { return std::string("the header's metadata count"); }));
    const uint64_t left = cursor_.left();
    if (part->num_tensors > left / kMinTensorInfoBytes) {
      return corrupt("the header's tensor count " + std::to_string(part->num_tensors) +
                     " needs at least " + std::to_string(kMinTensorInfoBytes) +
                     " bytes per tensor, more than the " + std::to_string(left) +
                     " bytes left in the file");
    }
    if (*num_kv > left / kMinKeyValueBytes ||
        *num_kv * kMinKeyValueBytes > left - part->num_tensors * kMinTensorInfoBytes) {
      return corrupt("the header's metadata count " + std::to_string(*num_kv) + " needs at least " +
                     std::to_string(kMinKeyValueBytes) + " bytes per entry, more than the " +
                     std::to_string(left) + " bytes left in the file after its " +
                     std::to_string(part->num_tensors) + " tensor infos");
    }
    return Status::Ok();
  }

  Status check_version(uint32_t version) const {
    // A big-endian writer's 2 or 3 reads as 0x02000000 or 0x03000000.
    if (version != 0 && (version & 0xffffu) == 0) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "0x%08x", version);
      return Unsupported(path_ + ": a big-endian GGUF file (its version reads " + hex +
                         "); pvllm reads little-endian GGUF files");
    }
    if (version == 1) {
      return Unsupported(path_ +
                         ": GGUF version 1 (32-bit counts and lengths); pvllm reads versions 2 "
                         "and 3: convert it again with a current llama.cpp");
    }
    if (version == 0) return corrupt("GGUF version 0");
    if (version > 3) {
      return Unsupported(path_ + ": GGUF version " + std::to_string(version) +
                         "; pvllm reads versions 2 and 3");
    }
    return Status::Ok();
  }

  Status read_metadata(uint64_t num_kv, Metadata* metadata) {
    for (uint64_t i = 0; i < num_kv; ++i) {
      KeyValue entry;
      PVLLM_RETURN_IF_ERROR(read_string(
          &entry.key, [&] { return "the key of metadata entry " + std::to_string(i); }));
      uint32_t type = 0;
      PVLLM_RETURN_IF_ERROR(read(&type, [&] { return "the value type of " + quoted(entry.key); }));
      if (type > kLastValueType) {
        return corrupt("metadata key " + quoted(entry.key) + " has value type " +
                       std::to_string(type) + ", which GGUF does not define");
      }
      PVLLM_RETURN_IF_ERROR(read_value(entry.key, static_cast<ValueType>(type), &entry.value));
      const std::string key = entry.key;
      if (!metadata->add(std::move(entry))) {
        return corrupt("metadata key " + quoted(key) + " appears twice");
      }
    }
    return Status::Ok();
  }

  Status read_value(const std::string& key, ValueType type, Value* out) {
    out->type = type;
    const auto what = [&] { return "the value of " + quoted(key); };
    switch (type) {
      case ValueType::kU8:
        return read_unsigned<uint8_t>(&out->u, what);
      case ValueType::kU16:
        return read_unsigned<uint16_t>(&out->u, what);
      case ValueType::kU32:
        return read_unsigned<uint32_t>(&out->u, what);
      case ValueType::kU64:
        return read_unsigned<uint64_t>(&out->u, what);
      case ValueType::kI8:
        return read_signed<int8_t>(&out->i, what);
      case ValueType::kI16:
        return read_signed<int16_t>(&out->i, what);
      case ValueType::kI32:
        return read_signed<int32_t>(&out->i, what);
      case ValueType::kI64:
        return read_signed<int64_t>(&out->i, what);
      case ValueType::kF32: {
        float f = 0;
        PVLLM_RETURN_IF_ERROR(read(&f, what));
        out->f = f;
        return Status::Ok();
      }
      case ValueType::kF64:
        return read(&out->f, what);
      case ValueType::kBool: {
        uint8_t b = 0;
        PVLLM_RETURN_IF_ERROR(read(&b, what));
        if (b > 1) {
          return corrupt("metadata key " + quoted(key) + " is a bool stored as " +
                         std::to_string(b) + "; GGUF bools are 0 or 1");
        }
        out->u = b;
        return Status::Ok();
      }
      case ValueType::kString:
        return read_string(&out->string, what);
      case ValueType::kArray:
        return read_array(key, &out->array);
    }
    return corrupt("metadata key " + quoted(key) + " has an unknown value type");
  }

  template <typename T, typename What>
  Status read_unsigned(uint64_t* out, const What& what) {
    T v = 0;
    PVLLM_RETURN_IF_ERROR(read(&v, what));
    *out = v;
    return Status::Ok();
  }

  template <typename T, typename What>
  Status read_signed(int64_t* out, const What& what) {
    T v = 0;
    PVLLM_RETURN_IF_ERROR(read(&v, what));
    *out = v;
    return Status::Ok();
  }

  Status read_array(const std::string& key, Array* out) {
    uint32_t type = 0;
    PVLLM_RETURN_IF_ERROR(read(&type, [&] { return "the element type of " + quoted(key); }));
    if (type == static_cast<uint32_t>(ValueType::kArray)) {
      return Unsupported(path_ + ": metadata key " + quoted(key) +
                         " is an array of arrays, which pvllm does not read");
    }
    if (type > kLastValueType) {
      return corrupt("metadata key " + quoted(key) + " is an array of value type " +
                     std::to_string(type) + ", which GGUF does not define");
    }
    out->type = static_cast<ValueType>(type);
    PVLLM_RETURN_IF_ERROR(read(&out->size, [&] { return "the length of " + quoted(key); }));
    const uint64_t element = gguf_fixed_size(out->type);
    if (element == 0) return read_string_array(key, out);
    if (out->size > cursor_.left() / element) {
      return corrupt("metadata key " + quoted(key) + " is an array of " +
                     std::to_string(out->size) + " " + value_type_name(out->type) +
                     " values, more than the " + std::to_string(cursor_.left()) +
                     " bytes left in the file hold");
    }
    cursor_.take(out->size * element, &out->data);
    if (out->type == ValueType::kBool) {
      for (uint64_t i = 0; i < out->size; ++i) {
        if (out->data[i] > 1) {
          return corrupt("metadata key " + quoted(key) + " has element " + std::to_string(i) +
                         " stored as " + std::to_string(out->data[i]) + "; GGUF bools are 0 or 1");
        }
      }
    }
    return Status::Ok();
  }

  Status read_string_array(const std::string& key, Array* out) {
    // Each string takes at least its 8-byte length.
    if (out->size > cursor_.left() / 8) {
      return corrupt("metadata key " + quoted(key) + " is an array of " +
                     std::to_string(out->size) + " strings, more than the " +
                     std::to_string(cursor_.left()) + " bytes left in the file hold");
    }
    out->strings.resize(out->size);
    for (uint64_t i = 0; i < out->size; ++i) {
      PVLLM_RETURN_IF_ERROR(read_string(
          &out->strings[i], [&] { return "element " + std::to_string(i) + " of " + quoted(key); }));
    }
    return Status::Ok();
  }

  Status read_alignment(Part* part) {
    const Value* value = part->metadata.find(kAlignmentKey);
    if (value == nullptr) return Status::Ok();
    if (value->type != ValueType::kU32) {
      return corrupt(std::string(kAlignmentKey) + " has type " + describe_type(*value) +
                     "; GGUF stores it as a u32");
    }
    if (value->u == 0 || (value->u & (value->u - 1)) != 0) {
      return corrupt(std::string(kAlignmentKey) + " is " + std::to_string(value->u) +
                     "; it must be a power of two");
    }
    part->alignment = value->u;
    return Status::Ok();
  }

  Status read_tensor_info(uint64_t index, TensorInfo* out) {
    PVLLM_RETURN_IF_ERROR(
        read_string(&out->name, [&] { return "the name of tensor " + std::to_string(index); }));
    const std::string name = quoted(out->name);
    uint32_t n_dims = 0;
    PVLLM_RETURN_IF_ERROR(read(&n_dims, [&] { return "the n_dims of tensor " + name; }));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return corrupt("tensor " + name + " has n_dims " + std::to_string(n_dims) +
                     "; GGUF tensors have 1 to " + std::to_string(kMaxDims));
    }
    int64_t num_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      PVLLM_RETURN_IF_ERROR(
          read(&dim, [&] { return "dimension " + std::to_string(d) + " of tensor " + name; }));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return corrupt("tensor " + name + " has dimension " + std::to_string(d) + " = " +
                       std::to_string(dim) + "; dimensions are 1 to 2^63-1");
      }
      out->dims.push_back(static_cast<int64_t>(dim));
      if (__builtin_mul_overflow(num_elements, static_cast<int64_t>(dim), &num_elements)) {
        return corrupt("tensor " + name + " has dimensions whose product overflows int64");
      }
    }
    uint32_t type = 0;
    PVLLM_RETURN_IF_ERROR(read(&type, [&] { return "the ggml type of tensor " + name; }));
    const ggml::TypeInfo* info = ggml::find_type(type);
    if (info == nullptr) {
      return Unsupported(path_ + ": tensor " + name + " has ggml type id " + std::to_string(type) +
                         ", which this build does not know");
    }
    out->type = info->type;
    PVLLM_RETURN_IF_ERROR(read(&out->offset, [&] { return "the data offset of tensor " + name; }));
    const Status size = ggml::tensor_bytes(out->type, out->dims, printable(out->name), &out->size);
    if (!size.ok()) return corrupt(size.message());
    return Status::Ok();
  }

  // Checks this part's tensors (the last part.num_tensors of `tensors`)
  // against the data section and each other, and sets their file offsets.
  Status place_tensors(const Part& part, std::vector<TensorInfo>* tensors) const {
    const uint64_t file_size = cursor_.size();
    const uint64_t data_size = file_size > part.data_offset ? file_size - part.data_offset : 0;
    const size_t first = tensors->size() - part.num_tensors;
    std::vector<TensorInfo*> by_offset;
    by_offset.reserve(part.num_tensors);
    for (size_t i = first; i < tensors->size(); ++i) {
      TensorInfo& t = (*tensors)[i];
      if (t.offset % part.alignment != 0) {
        return corrupt("tensor " + quoted(t.name) + " has data offset " + std::to_string(t.offset) +
                       ", not a multiple of the alignment " + std::to_string(part.alignment));
      }
      if (t.offset > data_size || t.size > data_size - t.offset) {
        return corrupt("tensor " + quoted(t.name) + " needs " + std::to_string(t.size) +
                       " bytes at data offset " + std::to_string(t.offset) +
                       ", past the end of the data section (" + std::to_string(data_size) +
                       " bytes from byte " + std::to_string(part.data_offset) + "): truncated?");
      }
      t.file_offset = part.data_offset + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& a = *by_offset[i - 1];
      const TensorInfo& b = *by_offset[i];
      if (a.offset + a.size > b.offset) {
        return corrupt("tensors " + quoted(a.name) + " (data offset " + std::to_string(a.offset) +
                       ", " + std::to_string(a.size) + " bytes) and " + quoted(b.name) +
                       " (data offset " + std::to_string(b.offset) + ") overlap");
      }
    }
    return Status::Ok();
  }

  std::string path_;
  GgufCursor cursor_;
};

}  // namespace

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // within int64: checked when parsed
  return n;
}

const Metadata& File::metadata() const {
  PVLLM_CHECK(!parts.empty(), "a gguf::File that was never opened");
  return parts[0].metadata;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  const auto it = tensor_index.find(name);
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

const unsigned char* File::tensor_data(const TensorInfo& tensor) const {
  return parts[tensor.part].file->data() + tensor.file_offset;
}

Status parse(std::shared_ptr<MappedFile> file, uint32_t part_index, Part* part,
             std::vector<TensorInfo>* tensors) {
  Part result;
  result.path = file->path();
  std::vector<TensorInfo> infos;
  PVLLM_RETURN_IF_ERROR(
      GgufParser(file->path(), file->data(), file->size()).parse(part_index, &result, &infos));
  result.file = std::move(file);
  *part = std::move(result);
  tensors->insert(tensors->end(), std::make_move_iterator(infos.begin()),
                  std::make_move_iterator(infos.end()));
  return Status::Ok();
}

std::vector<UnservedType> unserved_types(const File& file) {
  std::map<uint32_t, UnservedType> by_id;
  for (const TensorInfo& t : file.tensors) {
    if (ggml::is_served(t.type)) continue;
    UnservedType& entry = by_id[static_cast<uint32_t>(t.type)];
    if (entry.num_tensors++ == 0) {
      entry.type = t.type;
      entry.first_tensor = t.name;
    }
  }
  std::vector<UnservedType> out;
  for (auto& [id, entry] : by_id) out.push_back(std::move(entry));
  return out;
}

Status parse_metadata(std::string_view bytes, const std::string& name, Metadata* out) {
  Part part;
  std::vector<TensorInfo> tensors;
  PVLLM_RETURN_IF_ERROR(
      GgufParser(name, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size())
          .parse(0, &part, &tensors));
  if (!tensors.empty()) {
    return CorruptModel(name + ": holds " + std::to_string(tensors.size()) +
                        " tensors where only metadata belongs");
  }
  *out = std::move(part.metadata);
  return Status::Ok();
}

}  // namespace pvllm::gguf
