// `pvllm inspect` of a GGUF file: its parts, every metadata entry (arrays
// and long strings abridged), the tensor table with each tensor's ggml type,
// and the bytes and bits per weight of each type.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "cli.h"
#include "core/model/gguf_file.h"

namespace pvllm_cli {
namespace {

using pvllm::gguf::ValueType;

// A value as one short line: strings cut at 60 bytes (newlines shown as
// \n), arrays as their element type, length and first few elements.
std::string short_value(const pvllm::gguf::Value& v) {
  auto quoted = [](const std::string& s) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size() && i < 60; ++i)
      out += s[i] == '\n' ? std::string("\\n") : std::string(1, s[i]);
    out += s.size() > 60 ? "\"... (" + std::to_string(s.size()) + " bytes)" : "\"";
    return out;
  };
  char buf[64];
  switch (v.type) {
    case ValueType::kString:
      return quoted(v.string);
    case ValueType::kBool:
      return v.u ? "true" : "false";
    case ValueType::kF32:
    case ValueType::kF64:
      std::snprintf(buf, sizeof buf, "%.9g", v.f);
      return buf;
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      return std::to_string(v.i);
    case ValueType::kArray: {
      std::string out = "[" + std::to_string(v.array.size) + " x " +
                        pvllm::gguf::value_type_name(v.array.type) + "]";
      if (v.array.type == ValueType::kString && !v.array.strings.empty()) {
        out += " " + quoted(v.array.strings[0]) + (v.array.size > 1 ? ", ..." : "");
      }
      return out;
    }
    default:
      return std::to_string(v.u);
  }
}

}  // namespace

int print_gguf_header(const std::string& path) {
  pvllm::gguf::File f;
  const pvllm::Status st = pvllm::gguf::open(path, &f);
  if (!st.ok()) {
    std::fprintf(stderr, "pvllm: cannot read the GGUF file: %s (%s)\n", st.message().c_str(),
                 pvllm_status_to_string(static_cast<pvllm_status>(st.code())));
    return 1;
  }
  std::printf("\ngguf file\n");
  for (const pvllm::gguf::Part& p : f.parts) {
    std::printf("  part                     %s (version %u, alignment %" PRIu64 ", %" PRIu64
                " tensors, data from offset %" PRIu64 ")\n",
                p.path.c_str(), p.version, p.alignment, p.num_tensors, p.data_offset);
  }
  std::printf("\nmetadata (%zu)\n", f.metadata().entries().size());
  for (const pvllm::gguf::KeyValue& kv : f.metadata().entries()) {
    std::printf("  %-44s %-6s %s\n", kv.key.c_str(), pvllm::gguf::value_type_name(kv.value.type),
                short_value(kv.value).c_str());
  }
  struct TypeTotal {
    uint64_t tensors = 0, bytes = 0, elements = 0;
  };
  std::map<std::string, TypeTotal> by_type;
  uint64_t total_bytes = 0, total_elements = 0;
  std::printf("\ntensor table (%zu)\n", f.tensors.size());
  std::printf("  %-44s %-7s %-16s %12s  %s\n", "name", "type", "shape", "bytes", "part:offset");
  for (const pvllm::gguf::TensorInfo& t : f.tensors) {
    std::string shape = "[";
    for (size_t d = t.dims.size(); d-- > 0;) {
      shape += std::to_string(t.dims[d]) + (d > 0 ? "," : "");
    }
    shape += "]";
    const char* type = pvllm::ggml::type_name(t.type);
    std::printf("  %-44s %-7s %-16s %12" PRIu64 "  %u:%" PRIu64 "\n", t.name.c_str(), type,
                shape.c_str(), t.size, t.part, t.file_offset);
    TypeTotal& tt = by_type[type];
    ++tt.tensors;
    tt.bytes += t.size;
    tt.elements += static_cast<uint64_t>(t.num_elements());
    total_bytes += t.size;
    total_elements += static_cast<uint64_t>(t.num_elements());
  }
  std::printf("\ntensor types\n");
  for (const auto& [type, tt] : by_type) {
    std::printf("  %-7s %4" PRIu64 " tensors %14" PRIu64 " bytes  %6.2f bits per weight\n",
                type.c_str(), tt.tensors, tt.bytes, 8.0 * double(tt.bytes) / double(tt.elements));
  }
  std::printf("  all     %4zu tensors %14" PRIu64 " bytes  %6.2f bits per weight\n",
              f.tensors.size(), total_bytes,
              total_elements ? 8.0 * double(total_bytes) / double(total_elements) : 0.0);
  return 0;
}

}  // namespace pvllm_cli
