// Safetensors header parsing. Only the header is read; tensor bytes stay in
// the mapping until a backend touches them.
#include "core/model/safetensors.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

namespace pvllm {

namespace {

using nlohmann::json;

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32") {
    *out = DType::kF32;
  } else if (s == "F16") {
    *out = DType::kF16;
  } else if (s == "BF16") {
    *out = DType::kBF16;
  } else {
    return false;
  }
  return true;
}

bool is_count(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v >= 0); }

// One header entry -> a Tensor viewing `data` (the byte buffer after the header).
Status parse_entry(const std::string& path, const std::string& name, const json& entry,
                   const unsigned char* data, uint64_t data_size, Tensor* out) {
  const std::string where = path + ": tensor " + name;
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    return CorruptModel(where + " lacks dtype, shape or data_offsets");
  }
  const json& dtype = entry["dtype"];
  const json& shape = entry["shape"];
  const json& offsets = entry["data_offsets"];
  if (!dtype.is_string()) return CorruptModel(where + " has a non-string dtype");
  if (!parse_dtype(dtype.get<std::string>(), &out->dtype)) {
    return Unsupported(where + " has dtype " + dtype.get<std::string>() +
                       "; supported are F32, F16 and BF16");
  }
  if (!shape.is_array()) return CorruptModel(where + " has a shape that is not a list");
  // Bound the element count so the byte size below cannot overflow.
  constexpr uint64_t kMaxElements = uint64_t{1} << 48;
  uint64_t numel = 1;
  out->shape.clear();
  for (const json& d : shape) {
    if (!is_count(d)) return CorruptModel(where + " has a negative or non-integer dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > kMaxElements || (dim != 0 && numel > kMaxElements / dim)) {
      return CorruptModel(where + " has an implausibly large shape");
    }
    numel *= dim;
    out->shape.push_back(static_cast<int64_t>(dim));
  }
  if (!offsets.is_array() || offsets.size() != 2 || !is_count(offsets[0]) ||
      !is_count(offsets[1])) {
    return CorruptModel(where + " has malformed data_offsets");
  }
  const uint64_t begin = offsets[0].get<uint64_t>();
  const uint64_t end = offsets[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return CorruptModel(where + " has data_offsets [" + std::to_string(begin) + ", " +
                        std::to_string(end) + ") beyond the " + std::to_string(data_size) +
                        " data bytes in the file (truncated?)");
  }
  const uint64_t expected = numel * dtype_size(out->dtype);
  if (end - begin != expected) {
    return CorruptModel(where + " spans " + std::to_string(end - begin) + " bytes, but its " +
                        "dtype and shape need " + std::to_string(expected));
  }
  out->name = name;
  out->data = data + begin;
  return Status::Ok();
}

Status parse_header(const std::string& path, const MappedFile& file,
                    std::map<std::string, Tensor>* tensors) {
  if (file.size() < 8) {
    return CorruptModel(path + ": " + std::to_string(file.size()) +
                        " bytes is too short for a safetensors header");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file.data()[i];
  if (header_len > file.size() - 8) {
    return CorruptModel(path + ": header length " + std::to_string(header_len) +
                        " is beyond the end of the " + std::to_string(file.size()) + "-byte file");
  }
  const char* text = reinterpret_cast<const char*>(file.data()) + 8;
  const json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return CorruptModel(path + ": the header is not valid JSON");
  if (!header.is_object()) return CorruptModel(path + ": the header is not a JSON object");

  const unsigned char* data = file.data() + 8 + header_len;
  const uint64_t data_size = file.size() - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    Tensor tensor;
    PVLLM_RETURN_IF_ERROR(parse_entry(path, name, entry, data, data_size, &tensor));
    (*tensors)[name] = std::move(tensor);
  }
  return Status::Ok();
}

}  // namespace

Status open_safetensors(const std::string& path, SafetensorsFile* out) {
  SafetensorsFile result;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(path, &result.file));
  try {
    PVLLM_RETURN_IF_ERROR(parse_header(path, *result.file, &result.tensors));
  } catch (const json::exception& e) {
    // The checks above should leave nothing to throw; this is the backstop.
    return CorruptModel(path + ": malformed header: " + e.what());
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace pvllm
