// A .gguf file: the input is the whole file. A file that opens has every
// metadata value asked for through each getter (a wrong type must be a
// status, never a crash) with its array elements read, and every tensor's
// bytes read end to end.
#include <vector>

#include "core/model/gguf_file.h"
#include "fuzz/temp_files.h"

namespace {

void read_metadata(const pvllm::gguf::Metadata& md) {
  volatile uint64_t sink = 0;
  for (const pvllm::gguf::KeyValue& kv : md.entries()) {
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    float f32 = 0;
    bool b = false;
    std::string s;
    std::vector<std::string> strings;
    std::vector<float> floats;
    std::vector<int32_t> ints;
    std::vector<int64_t> wide;
    (void)md.get_u32(kv.key, &u32);
    (void)md.get_i32(kv.key, &i32);
    (void)md.get_u64(kv.key, &u64);
    (void)md.get_uint(kv.key, &u64);
    (void)md.get_f32(kv.key, &f32);
    (void)md.get_bool(kv.key, &b);
    (void)md.get_string(kv.key, &s);
    (void)md.get_string_array(kv.key, &strings);
    (void)md.get_f32_array(kv.key, &floats);
    (void)md.get_i32_array(kv.key, &ints);
    (void)md.get_int_array(kv.key, &wide);
    const pvllm::gguf::Array* array = nullptr;
    if (md.get_array(kv.key, kv.value.array.type, &array).ok() && array->data != nullptr) {
      // A number array's bytes lie in the mapping: touch the last one.
      sink = sink + array->data[array->size - 1];
    }
    sink = sink + u32 + i32 + u64 + b + (f32 != 0) + s.size() + strings.size() + floats.size() +
           ints.size() + wide.size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pvllm::fuzz::write_temp_file("model.gguf", data, size);
  pvllm::gguf::File file;
  if (!pvllm::gguf::open(path, &file).ok()) return 0;
  read_metadata(file.metadata());
  volatile uint8_t sink = 0;
  for (const pvllm::gguf::TensorInfo& t : file.tensors) {
    const unsigned char* bytes = file.tensor_data(t);
    for (uint64_t i = 0; i < t.size; ++i) sink = sink ^ bytes[i];
  }
  (void)pvllm::gguf::unserved_types(file);
  return 0;
}
