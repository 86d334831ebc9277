// resolve_model_files: the one rule for model paths (model_files.h).
#include "core/model/model_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/model/gguf_file.h"
#include "core/model/model.h"

namespace pvllm {

namespace fs = std::filesystem;

const char* const kModelPathHelp =
    "a .pvllm file, a GGUF file (.gguf), a llama2.c .bin checkpoint with its tokenizer beside it "
    "(tokenizer.model, "
    "tokenizer.json or one *.model file), a Hugging Face folder (config.json with "
    "*.safetensors), a folder holding one .pvllm, one GGUF model or one .bin file, or a "
    "tokenizer.model / "
    "tokenizer.json file or its folder";

namespace {

// The regular files in `folder` whose extension is `ext`, sorted.
std::vector<fs::path> files_with_extension(const fs::path& folder, const char* ext) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::error_code file_ec;
    if (entry.path().extension() == ext && entry.is_regular_file(file_ec)) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

fs::path folder_of(const fs::path& file) {
  return file.parent_path().empty() ? fs::path(".") : file.parent_path();
}

Status resolve_file(const std::string& path, ModelFiles* files) {
  const fs::path p(path);
  if (is_pvllm_path(path)) {
    files->kind = ModelFiles::Kind::kPvllm;
    files->weights = path;
    return Status::Ok();
  }
  if (p.extension() == ".gguf") {
    files->kind = ModelFiles::Kind::kGguf;
    files->weights = path;
    files->tokenizer = path;
    files->folder = folder_of(p).string();
    return Status::Ok();
  }
  if (p.extension() == ".bin") {
    files->kind = ModelFiles::Kind::kLlama2c;
    files->weights = path;
    files->folder = folder_of(p).string();
    files->tokenizer = find_tokenizer_in(files->folder);
    return Status::Ok();
  }
  if (p.extension() == ".json" || p.extension() == ".model") {
    files->kind = ModelFiles::Kind::kTokenizerOnly;
    files->tokenizer = path;
    files->folder = folder_of(p).string();
    return Status::Ok();
  }
  return Unsupported(path + ": not a model path pvllm reads; expected " + kModelPathHelp);
}

Status resolve_folder(const std::string& path, ModelFiles* files) {
  std::error_code ec;
  const fs::path folder(path);
  // config.json, or safetensors without one (which the loader then names).
  if (fs::is_regular_file(folder / "config.json", ec) ||
      !files_with_extension(folder, ".safetensors").empty() ||
      fs::is_regular_file(folder / "model.safetensors.index.json", ec)) {
    files->kind = ModelFiles::Kind::kHuggingFace;
    files->weights = path;
    files->folder = path;
    files->tokenizer = find_tokenizer_in(path);
    return Status::Ok();
  }
  for (const char* ext : {".pvllm", ".gguf", ".bin"}) {
    std::vector<fs::path> found = files_with_extension(folder, ext);
    // A split GGUF model is one model: its first part stands for it.
    std::erase_if(found, [](const fs::path& f) {
      gguf::SplitName split;
      return gguf::parse_split_name(f.string(), &split) && split.part != 1;
    });
    // llama2.c keeps its tokenizers as tokenizer.bin / tok512.bin beside
    // the checkpoint: they are not checkpoints.
    std::erase_if(found,
                  [](const fs::path& f) { return f.filename().string().rfind("tok", 0) == 0; });
    if (found.size() == 1) {
      const std::string given = files->path;
      PVLLM_RETURN_IF_ERROR(resolve_file(found[0].string(), files));
      files->path = given;
      return Status::Ok();
    }
    if (found.size() > 1) {
      return InvalidArgument(path + " holds " + std::to_string(found.size()) + " " + ext +
                             " files (" + found[0].filename().string() + ", " +
                             found[1].filename().string() + ", ...): name the one to use");
    }
  }
  files->tokenizer = find_tokenizer_in(path);
  // A folder of chat templates alone serves `pvllm chat-template`.
  if (files->tokenizer.empty() && !fs::is_regular_file(folder / "tokenizer_config.json", ec) &&
      !fs::is_regular_file(folder / "chat_template.jinja", ec)) {
    return NotFound(path + ": no model, tokenizer or chat template in this folder; expected " +
                    kModelPathHelp);
  }
  files->kind = ModelFiles::Kind::kTokenizerOnly;
  files->folder = path;
  return Status::Ok();
}

}  // namespace

const char* ModelFiles::kind_name() const {
  switch (kind) {
    case Kind::kPvllm:
      return "a .pvllm file";
    case Kind::kLlama2c:
      return "a llama2.c checkpoint";
    case Kind::kHuggingFace:
      return "a Hugging Face folder";
    case Kind::kGguf:
      return "a GGUF file";
    case Kind::kTokenizerOnly:
      break;
  }
  return "a folder or file without weights";
}

std::string find_tokenizer_in(const std::string& folder) {
  std::error_code ec;
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const fs::path candidate = fs::path(folder) / name;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  const std::vector<fs::path> models = files_with_extension(folder, ".model");
  return models.size() == 1 ? models[0].string() : std::string();
}

Status resolve_model_files(const std::string& path, ModelFiles* out) {
  if (path.empty()) return InvalidArgument("the model path is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return NotFound(path + ": no such file or folder");
  ModelFiles files;
  files.path = path;
  if (fs::is_directory(st)) {
    PVLLM_RETURN_IF_ERROR(resolve_folder(path, &files));
  } else if (fs::is_regular_file(st)) {
    PVLLM_RETURN_IF_ERROR(resolve_file(path, &files));
  } else {
    return Unsupported(path + ": neither a file nor a folder");
  }
  *out = std::move(files);
  return Status::Ok();
}

}  // namespace pvllm
