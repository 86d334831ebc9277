// .pvllm test helpers (pvllm_file_edit.h).
#include "tests/util/pvllm_file_edit.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/model/model.h"
#include "core/model/pvllm_file.h"

namespace pvllm::testing {

void convert_model(const std::string& source, const std::string& out,
                   const ConvertOptions& options) {
  std::unique_ptr<Model> model;
  Status st = load_model(source, &model);
  if (st.ok()) st = write_pvllm(model.get(), out, options);
  if (!st.ok()) throw std::runtime_error("convert " + source + ": " + st.message());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void rewrite_header(const std::string& in, const std::string& out,
                    const std::function<void(pvllm::format::ModelT&)>& edit) {
  namespace pf = pvllm_format;
  const std::string bytes = read_bytes(in);
  pf::Preamble p;
  std::memcpy(&p, bytes.data(), sizeof(p));
  std::unique_ptr<pvllm::format::ModelT> model(
      pvllm::format::GetModel(bytes.data() + pf::kPreambleBytes)->UnPack());
  for (auto& t : model->tensors) t->offset -= p.data_offset;
  edit(*model);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.ForceDefaults(true);
  pvllm::format::FinishModelBuffer(fbb, pvllm::format::Model::Pack(fbb, model.get()));
  const uint64_t header_size = fbb.GetSize();
  const uint64_t data_offset =
      (pf::kPreambleBytes + header_size + pf::kAlignment - 1) / pf::kAlignment * pf::kAlignment;
  // The offsets are final only now: rebuild with them.
  for (auto& t : model->tensors) t->offset += data_offset;
  flatbuffers::FlatBufferBuilder final_fbb;
  final_fbb.ForceDefaults(true);
  pvllm::format::FinishModelBuffer(final_fbb, pvllm::format::Model::Pack(final_fbb, model.get()));
  if (final_fbb.GetSize() != header_size) throw std::runtime_error("header size changed");
  std::string file(data_offset, '\0');
  file += bytes.substr(p.data_offset);
  p.header_size = header_size;
  p.data_offset = data_offset;
  p.file_size = file.size();
  p.header_checksum = pf::checksum(final_fbb.GetBufferPointer(), header_size);
  std::memcpy(file.data(), &p, sizeof(p));
  std::memcpy(file.data() + pf::kPreambleBytes, final_fbb.GetBufferPointer(), header_size);
  write_bytes(out, file);
}

}  // namespace pvllm::testing
