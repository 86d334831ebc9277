// A vocabulary-only GGUF file made from a Hugging Face tokenizer.json and
// its tokenizer_config.json, with the keys and token types llama.cpp's
// convert_hf_to_gguf.py writes for a byte-level BPE ("gpt2") tokenizer
// (get_vocab_base, _set_vocab_gpt2 and gguf-py's SpecialVocab): so that
// llama.cpp's tokenizer and pvllm's can be compared on Llama 3 and Qwen
// vocabularies no committed GGUF file holds. The same code makes the file
// for scripts/reference/make_gguf_vocab_refs.sh (through
// pvllm_make_vocab_gguf) and for the tests, byte for byte.
//
// Differences from the converter, which reads the model through
// transformers: the vocabulary is as long as tokenizer.json's largest id
// plus one (the converter pads to config.json's vocab_size with unused
// [PADn] tokens, which no text produces), and added tokens are taken as
// written (the converter re-encodes the non-normalized ones, which for
// these tokenizers gives them back unchanged).
#pragma once

#include <string>

#include "core/base/status.h"
#include "tests/util/gguf_writer.h"

namespace pvllm::testing {

// Fills `writer` from `folder`/tokenizer.json and tokenizer_config.json:
// general.architecture "llama" with small hyperparameters (llama.cpp reads
// them even for a vocabulary), tokenizer.ggml.model "gpt2", `pre`, the
// tokens, token types (normal; added tokens control when special or
// spelled <|...|>, else user-defined), merges, the special token ids and
// add_*_token flags tokenizer_config.json names, and its chat template.
Status make_hf_vocab_gguf(const std::string& folder, const std::string& pre, GgufWriter* writer);

}  // namespace pvllm::testing
