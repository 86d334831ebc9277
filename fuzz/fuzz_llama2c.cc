// A llama2.c checkpoint (.bin): the input is the whole file; a model that
// loads is asked for its weight bytes.
#include <memory>

#include "core/model/model.h"
#include "fuzz/temp_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = pvllm::fuzz::write_temp_file("model.bin", data, size);
  std::unique_ptr<pvllm::Model> model;
  if (!pvllm::load_llama2c_model(path, &model).ok()) return 0;
  (void)model->weight_bytes();
  return 0;
}
