// Opening a GGUF model: one file, or every part of a split one
// (<prefix>-NNNNN-of-MMMMM.gguf, llama.cpp's gguf-split), with the parts'
// split keys checked against each other and tensor names unique across
// them.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "core/model/gguf_bytes.h"
#include "core/model/gguf_file.h"

namespace pvllm::gguf {

using namespace bytes;  // NOLINT(google-build-using-namespace): the reader's own helpers

namespace {

// Maps and parses part `index` of `file`.
Status open_gguf_part(const std::string& path, uint32_t index, File* file) {
  std::shared_ptr<MappedFile> mapped;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(path, &mapped));
  Part part;
  PVLLM_RETURN_IF_ERROR(parse(std::move(mapped), index, &part, &file->tensors));
  file->parts.push_back(std::move(part));
  return Status::Ok();
}

// A split key of part `index` (of `count`) as a count.
Status split_key(const Part& part, uint32_t index, uint32_t count, const char* key, uint64_t* out) {
  if (part.metadata.find(key) == nullptr) {
    return CorruptModel(part.path + ": part " + std::to_string(index + 1) + " of " +
                        std::to_string(count) + " of a split model lacks " + key);
  }
  return part.metadata.get_uint(key, out);
}

// Each part's split keys agree with its place and with the others.
Status check_split(const File& file, uint32_t count) {
  uint64_t expected_tensors = 0;
  uint64_t num_tensors = 0;
  for (uint32_t i = 0; i < file.parts.size(); ++i) {
    const Part& part = file.parts[i];
    uint64_t no = 0;
    uint64_t parts = 0;
    uint64_t tensors = 0;
    PVLLM_RETURN_IF_ERROR(split_key(part, i, count, kSplitNoKey, &no));
    PVLLM_RETURN_IF_ERROR(split_key(part, i, count, kSplitCountKey, &parts));
    PVLLM_RETURN_IF_ERROR(split_key(part, i, count, kSplitTensorsCountKey, &tensors));
    if (no != i) {
      return CorruptModel(part.path + ": " + kSplitNoKey + " is " + std::to_string(no) +
                          ", but the file is part " + std::to_string(i + 1) + " of " +
                          std::to_string(count) + " (" + kSplitNoKey + " " + std::to_string(i) +
                          ")");
    }
    if (parts != count) {
      return CorruptModel(part.path + ": " + kSplitCountKey + " is " + std::to_string(parts) +
                          ", but the file's name says " + std::to_string(count) + " parts");
    }
    if (i == 0) expected_tensors = tensors;
    if (tensors != expected_tensors) {
      return CorruptModel(part.path + ": " + kSplitTensorsCountKey + " is " +
                          std::to_string(tensors) + ", but part 1 says " +
                          std::to_string(expected_tensors));
    }
    num_tensors += part.num_tensors;
  }
  if (num_tensors != expected_tensors) {
    return CorruptModel(file.parts[0].path + ": " + kSplitTensorsCountKey + " is " +
                        std::to_string(expected_tensors) + ", but the " + std::to_string(count) +
                        " parts hold " + std::to_string(num_tensors) + " tensors");
  }
  return Status::Ok();
}

// A file whose name is not a split name must not claim other parts.
Status check_unsplit(const Part& part) {
  if (part.metadata.find(kSplitCountKey) == nullptr) return Status::Ok();
  uint64_t count = 0;
  PVLLM_RETURN_IF_ERROR(part.metadata.get_uint(kSplitCountKey, &count));
  if (count > 1) {
    return CorruptModel(part.path + ": " + kSplitCountKey + " is " + std::to_string(count) +
                        ", but the file is not named as a part (<prefix>-NNNNN-of-MMMMM.gguf), "
                        "so its other parts cannot be found");
  }
  return Status::Ok();
}

Status index_tensors(File* file) {
  file->tensor_index.reserve(file->tensors.size());
  for (size_t i = 0; i < file->tensors.size(); ++i) {
    const TensorInfo& t = file->tensors[i];
    const auto [it, added] = file->tensor_index.emplace(t.name, i);
    if (!added) {
      const TensorInfo& other = file->tensors[it->second];
      return CorruptModel(file->parts[t.part].path + ": tensor " + quoted(t.name) + " is also in " +
                          file->parts[other.part].path);
    }
  }
  return Status::Ok();
}

bool parse_digits(const std::string& s, size_t pos, size_t n, uint32_t* out) {
  uint32_t value = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    value = value * 10 + static_cast<uint32_t>(s[i] - '0');
  }
  *out = value;
  return true;
}

}  // namespace

Status open(const std::string& path, File* out) {
  File file;
  SplitName name;
  if (!parse_split_name(path, &name)) {
    PVLLM_RETURN_IF_ERROR(open_gguf_part(path, 0, &file));
    PVLLM_RETURN_IF_ERROR(check_unsplit(file.parts[0]));
  } else {
    for (uint32_t i = 0; i < name.count; ++i) {
      const Status st = open_gguf_part(split_path(name.prefix, i + 1, name.count), i, &file);
      if (!st.ok()) {
        return Status(st.code(), "part " + std::to_string(i + 1) + " of " +
                                     std::to_string(name.count) + " of " + path + ": " +
                                     st.message());
      }
    }
    if (name.count > 1 || file.parts[0].metadata.find(kSplitCountKey) != nullptr) {
      PVLLM_RETURN_IF_ERROR(check_split(file, name.count));
    }
  }
  PVLLM_RETURN_IF_ERROR(index_tensors(&file));
  *out = std::move(file);
  return Status::Ok();
}

bool parse_split_name(const std::string& path, SplitName* out) {
  // -NNNNN-of-MMMMM.gguf
  constexpr size_t kSuffix = 20;
  if (path.size() < kSuffix) return false;
  const size_t at = path.size() - kSuffix;
  if (path[at] != '-' || path.compare(at + 6, 4, "-of-") != 0 ||
      path.compare(at + 15, 5, ".gguf") != 0) {
    return false;
  }
  SplitName name;
  if (!parse_digits(path, at + 1, 5, &name.part) || !parse_digits(path, at + 10, 5, &name.count)) {
    return false;
  }
  if (name.part < 1 || name.part > name.count) return false;
  name.prefix = path.substr(0, at);
  *out = std::move(name);
  return true;
}

std::string split_path(const std::string& prefix, uint32_t part, uint32_t count) {
  char suffix[40];
  std::snprintf(suffix, sizeof(suffix), "-%05u-of-%05u.gguf", part, count);
  return prefix + suffix;
}

}  // namespace pvllm::gguf
