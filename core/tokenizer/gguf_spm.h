// A GGUF "llama" vocabulary as a sentencepiece BPE model, so its text runs
// are tokenized by sentencepiece itself: the tokens with their scores and
// byte pieces, the normalizer llama.cpp applies (spaces as U+2581, a space
// before each run when add_space_prefix), nothing else.
#pragma once

#include <memory>
#include <string>

#include "core/base/status.h"
#include "core/tokenizer/gguf_vocab.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pvllm {

// Builds the processor for `vocab` (a kSpm one from the file at `path`).
// CORRUPT_MODEL when the tokens cannot form a sentencepiece model (a byte
// token not written <0xAB>); UNSUPPORTED for a vocabulary without an
// unknown token, or with some byte tokens but not all 256, which
// sentencepiece requires.
Status make_gguf_spm(const GgufVocab& vocab, const std::string& path,
                     std::unique_ptr<sentencepiece::SentencePieceProcessor>* out);

}  // namespace pvllm
