// A .pvllm model file: the input is the whole file. The header's checksum
// is made to match first (otherwise nearly every mutation would stop
// there), so the FlatBuffers verifier and the config and tensor-table
// checks are what the fuzzer meets. A file that loads has every tensor
// checked against its checksum, read end to end, unpacked to row-major,
// and its tokenizer and chat texts parsed.
#include <cstring>
#include <memory>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/model.h"
#include "core/model/pvllm_file.h"
#include "core/tokenizer/tokenizer.h"
#include "fuzz/temp_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pf = pvllm::pvllm_format;
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= pf::kPreambleBytes) {
    pf::Preamble p;
    std::memcpy(&p, bytes.data(), sizeof(p));
    if (p.header_size <= size - pf::kPreambleBytes) {
      p.header_checksum = pf::checksum(bytes.data() + pf::kPreambleBytes, p.header_size);
      std::memcpy(bytes.data(), &p, sizeof(p));
    }
  }
  const std::string path = pvllm::fuzz::write_temp_file("model.pvllm", bytes.data(), bytes.size());
  std::unique_ptr<pvllm::Model> model;
  pvllm::LoadOptions options;
  options.checksums = pvllm::ChecksumMode::kLazy;
  if (!pvllm::load_model(path, &model, options).ok()) return 0;
  volatile uint8_t sink = 0;
  model->for_each_weight([&](const pvllm::Tensor& t) {
    (void)model->verify_tensor(t);
    const auto* p = static_cast<const uint8_t*>(t.data);
    for (size_t i = 0; i < t.nbytes(); i += 64) sink = sink ^ p[i];
  });
  (void)pvllm::unpack_weights(model.get());
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  if (pvllm::Tokenizer::load_embedded(model->embedded_tokenizer, &tokenizer).ok()) {
    std::vector<int32_t> ids;
    (void)tokenizer->encode("Once upon a time", true, &ids);
  }
  pvllm::chat::ChatTemplates templates;
  (void)pvllm::chat::ChatTemplates::from_texts(path, model->embedded_tokenizer.config_json,
                                               model->embedded_tokenizer.chat_template_jinja,
                                               &templates);
  return 0;
}
