// The one rule for what a model path names and where its parts are: the
// weights, the tokenizer, and the folder whose tokenizer_config.json and
// chat_template.jinja hold the chat templates. Every loader, the tokenizer,
// the chat templates, the C ABI and so every tool and SDK resolve a path
// here, so a path that `generate` takes is a path `tokenize` takes.
//
// A path is, in this order:
//   - a .pvllm file: everything inside it (docs/format.md);
//   - a GGUF file (.gguf; any part of a split one, -00001-of-0000N.gguf):
//     weights, tokenizer and chat template all come from the file;
//   - a llama2.c checkpoint (.bin): its tokenizer beside it;
//   - a Hugging Face folder (it holds config.json or *.safetensors);
//   - a folder holding exactly one .pvllm file, or else exactly one GGUF
//     model (one file or one split set), or else exactly one .bin
//     checkpoint (as models/stories260K does), taken as that file; llama2.c's
//     own tokenizer files (tokenizer.bin, tok512.bin: names that start with
//     "tok") are not checkpoints;
//   - a tokenizer alone: a tokenizer.model or tokenizer.json file (a .json or
//     .model name), or a folder with a tokenizer, a tokenizer_config.json or
//     a chat_template.jinja and no weights. It serves tokenizing and chat
//     templates; loading weights from it is NOT_FOUND naming what was
//     looked for.
// A tokenizer beside the weights is tokenizer.model (sentencepiece; first,
// so the sentencepiece models served so far keep their exact tokenization),
// else tokenizer.json (Hugging Face tokenizers), else the folder's only
// *.model file (llama2.c's tok512.model).
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"

namespace pvllm {

struct ModelFiles {
  enum class Kind : uint8_t {
    kPvllm = 0,        // weights: the .pvllm file, which carries the tokenizer
    kLlama2c = 1,      // weights: the .bin checkpoint
    kHuggingFace = 2,  // weights: the folder (config.json, *.safetensors)
    kTokenizerOnly = 3,
    kGguf = 4,  // weights and tokenizer: the .gguf file (a split one's parts found from it)
  };
  Kind kind = Kind::kHuggingFace;
  std::string path;     // as the caller gave it
  std::string weights;  // the .pvllm or .bin file, or the HF folder; "" for kTokenizerOnly
  // tokenizer.model, tokenizer.json or *.model; the .gguf file itself for
  // kGguf; "" when there is none (and always for kPvllm, whose tokenizer is
  // inside the file).
  std::string tokenizer;
  // Where tokenizer_config.json and chat_template.jinja are looked for (the
  // folder of the model or tokenizer); "" for kPvllm.
  std::string folder;

  bool has_weights() const { return kind != Kind::kTokenizerOnly; }
  // What a path of this kind is, for messages: "a .pvllm file", ...
  const char* kind_name() const;
};

// Resolves `path` by the rule above. NOT_FOUND for a path that does not
// exist, and for a folder with neither weights nor a tokenizer (naming
// what was looked for); UNSUPPORTED for a file of another kind.
Status resolve_model_files(const std::string& path, ModelFiles* out);

// The tokenizer file in `folder` by the rule above; "" when there is none.
std::string find_tokenizer_in(const std::string& folder);

// What resolve_model_files looks for, for messages that must say it.
extern const char* const kModelPathHelp;

}  // namespace pvllm
