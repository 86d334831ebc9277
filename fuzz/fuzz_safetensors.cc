// A .safetensors file: the input is the whole file (length, JSON header,
// data); every tensor that opens is read end to end.
#include "core/model/safetensors.h"
#include "fuzz/temp_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = pvllm::fuzz::write_temp_file("model.safetensors", data, size);
  pvllm::SafetensorsFile file;
  if (!pvllm::open_safetensors(path, &file).ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& [name, tensor] : file.tensors) {
    const auto* bytes = static_cast<const uint8_t*>(tensor.data);
    for (size_t i = 0; i < tensor.nbytes(); ++i) sink = sink ^ bytes[i];
  }
  return 0;
}
