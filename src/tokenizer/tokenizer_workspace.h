// Internal: the per-thread scratch state of a Tokenizer (pre-tokenizer match blocks and the BPE
// word cache). Tokenizer keeps a pool of them; one is leased per encode call and thread.
#pragma once

#include <memory>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

struct Tokenizer::Workspace {
  std::unique_ptr<PreTokenizer::Workspace> pre;
  BpeModel::Workspace bpe;
};

}  // namespace deepinfer::tokenizer
