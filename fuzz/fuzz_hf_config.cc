// Hugging Face config.json: the input is the file, read from a folder of
// its own by the loader that reads a model folder's config.
#include "core/model/hf_config.h"
#include "core/model/model_config.h"
#include "fuzz/temp_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvllm::fuzz::write_temp_file("config.json", data, size);
  pvllm::ModelConfig config;
  (void)pvllm::read_hf_config(pvllm::fuzz::temp_dir(), &config);
  return 0;
}
