// atto/data/prepare.h: `atto data prepare`: text files streamed through a tokenizer into token
// files (data/token_file.h) that training maps, with memory bounded whatever the corpus size.
//
//   atto::PrepareOptions o{.inputs = {"owt.txt"}, .out = "data/owt"};
//   atto::PrepareStats s = atto::prepare_corpus(tok, o);   // data/owt/{train,val}.bin, tokenizer.json, meta.json
//
// Documents: text up to and including a run of two or more newlines (paragraphs; with
// lines_are_documents, up to and including each newline); each input file ends one too. Each
// document is encoded on its own, followed by the tokenizer's boundary token when it has one
// (<|endoftext|>, as GPT-2's corpora separate documents). Document d (numbered in input order)
// goes to val when splitmix64(seed + d) lands in the first val_fraction of the range, else to
// train: the split depends on the documents and the seed, not on chunk sizes or threads.
// The files are read in chunks of chunk_bytes cut at document ends (a document longer than
// max_document_bytes is cut there); one chunk per thread is encoded at a time, and the tokens
// are written in input order. Peak memory: about threads * (chunk_bytes + its tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenize/gpt_tokenizer.h"

namespace atto {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out;
  double val_fraction = 0.01;
  uint64_t seed = 1337;
  bool lines_are_documents = false;
  int64_t chunk_bytes = int64_t{4} << 20;
  int64_t max_document_bytes = int64_t{64} << 20;
};

struct PrepareStats {
  int64_t bytes = 0, documents = 0, val_documents = 0, train_tokens = 0, val_tokens = 0;
  double seconds = 0.0;
};

PrepareStats prepare_corpus(const GptTokenizer& tok, const PrepareOptions& opt);

}  // namespace atto
