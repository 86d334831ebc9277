// The GGUF reader's metadata: value type names and the typed getters, whose
// statuses name the file and the key.
#include <string>
#include <vector>

#include "core/model/gguf_bytes.h"
#include "core/model/gguf_file.h"

namespace pvllm::gguf {

using namespace bytes;  // NOLINT(google-build-using-namespace): the reader's own helpers

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kU8:
      return "u8";
    case ValueType::kI8:
      return "i8";
    case ValueType::kU16:
      return "u16";
    case ValueType::kI16:
      return "i16";
    case ValueType::kU32:
      return "u32";
    case ValueType::kI32:
      return "i32";
    case ValueType::kF32:
      return "f32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kU64:
      return "u64";
    case ValueType::kI64:
      return "i64";
    case ValueType::kF64:
      return "f64";
  }
  return "unknown";
}

const Value* Metadata::find(const std::string& key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

bool Metadata::add(KeyValue entry) {
  if (!index_.emplace(entry.key, entries_.size()).second) return false;
  entries_.push_back(std::move(entry));
  return true;
}

Status Metadata::wrong_type(const std::string& key, const Value& value,
                            const std::string& wanted) const {
  return CorruptModel(path_ + ": metadata key " + quoted(key) + " has type " +
                      describe_type(value) + ", not " + wanted);
}

Status Metadata::find_typed(const std::string& key, ValueType type, const Value** out) const {
  const Value* value = find(key);
  if (value == nullptr) return NotFound(path_ + ": metadata key " + quoted(key) + " is missing");
  if (value->type != type) return wrong_type(key, *value, value_type_name(type));
  *out = value;
  return Status::Ok();
}

Status Metadata::get_u32(const std::string& key, uint32_t* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kU32, &value));
  *out = static_cast<uint32_t>(value->u);
  return Status::Ok();
}

Status Metadata::get_i32(const std::string& key, int32_t* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kI32, &value));
  *out = static_cast<int32_t>(value->i);
  return Status::Ok();
}

Status Metadata::get_u64(const std::string& key, uint64_t* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kU64, &value));
  *out = value->u;
  return Status::Ok();
}

Status Metadata::get_f32(const std::string& key, float* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kF32, &value));
  *out = static_cast<float>(value->f);
  return Status::Ok();
}

Status Metadata::get_bool(const std::string& key, bool* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kBool, &value));
  *out = value->u != 0;
  return Status::Ok();
}

Status Metadata::get_string(const std::string& key, std::string* out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kString, &value));
  *out = value->string;
  return Status::Ok();
}

Status Metadata::get_uint(const std::string& key, uint64_t* out) const {
  const Value* value = find(key);
  if (value == nullptr) return NotFound(path_ + ": metadata key " + quoted(key) + " is missing");
  if (!gguf_is_integer(value->type)) return wrong_type(key, *value, "an integer");
  if (!gguf_is_signed(value->type)) {
    *out = value->u;
    return Status::Ok();
  }
  if (value->i < 0) {
    return CorruptModel(path_ + ": metadata key " + quoted(key) + " is " +
                        std::to_string(value->i) + "; it must not be negative");
  }
  *out = static_cast<uint64_t>(value->i);
  return Status::Ok();
}

Status Metadata::get_array(const std::string& key, ValueType element, const Array** out) const {
  const Value* value = nullptr;
  PVLLM_RETURN_IF_ERROR(find_typed(key, ValueType::kArray, &value));
  if (value->array.type != element) {
    return wrong_type(key, *value, std::string("array of ") + value_type_name(element));
  }
  *out = &value->array;
  return Status::Ok();
}

Status Metadata::get_string_array(const std::string& key, std::vector<std::string>* out) const {
  const Array* array = nullptr;
  PVLLM_RETURN_IF_ERROR(get_array(key, ValueType::kString, &array));
  *out = array->strings;
  return Status::Ok();
}

Status Metadata::get_f32_array(const std::string& key, std::vector<float>* out) const {
  const Array* array = nullptr;
  PVLLM_RETURN_IF_ERROR(get_array(key, ValueType::kF32, &array));
  out->resize(array->size);
  for (uint64_t i = 0; i < array->size; ++i) (*out)[i] = load_le<float>(array->data + 4 * i);
  return Status::Ok();
}

Status Metadata::get_i32_array(const std::string& key, std::vector<int32_t>* out) const {
  const Array* array = nullptr;
  PVLLM_RETURN_IF_ERROR(get_array(key, ValueType::kI32, &array));
  out->resize(array->size);
  for (uint64_t i = 0; i < array->size; ++i) (*out)[i] = load_le<int32_t>(array->data + 4 * i);
  return Status::Ok();
}

Status Metadata::get_int_array(const std::string& key, std::vector<int64_t>* out) const {
  const Value* value = find(key);
  if (value == nullptr) return NotFound(path_ + ": metadata key " + quoted(key) + " is missing");
  if (value->type != ValueType::kArray || !gguf_is_integer(value->array.type)) {
    return wrong_type(key, *value, "an array of integers");
  }
  const Array& array = value->array;
  std::vector<int64_t> values(array.size);
  for (uint64_t i = 0; i < array.size; ++i) {
    if (array.type == ValueType::kU64 && element_bits(array, i) > uint64_t{INT64_MAX}) {
      return CorruptModel(path_ + ": metadata key " + quoted(key) + " has element " +
                          std::to_string(i) + " = " + std::to_string(element_bits(array, i)) +
                          ", past int64");
    }
    values[i] = element_int(array, i);
  }
  *out = std::move(values);
  return Status::Ok();
}

}  // namespace pvllm::gguf
