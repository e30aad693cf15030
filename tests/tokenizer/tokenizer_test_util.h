// tests/tokenizer/tokenizer_test_util.h — loading tokenizers from fixtures and in-memory GGUFs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "specdec/gguf.h"
#include "specdec/tokenizer.h"

namespace specdec::testing {

// Tokenizer of a GGUF file on disk (the file is closed again; the tokenizer keeps its tables).
inline std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  auto gguf = GgufFile::open(path);
  return Tokenizer::from_gguf(*gguf);
}

// Tokenizer of a GGUF image built with GgufWriter (metadata only).
inline std::unique_ptr<Tokenizer> tokenizer_from_writer(const GgufWriter& writer) {
  const std::vector<uint8_t> bytes = writer.to_bytes();
  auto gguf = GgufFile::parse(bytes.data(), bytes.size(), "in-memory.gguf");
  return Tokenizer::from_gguf(*gguf);
}

// A byte-level BPE vocabulary: the 256 byte characters (ids 0..255 in byte order) + `extra`.
std::vector<std::string> byte_level_base_vocab();

}  // namespace specdec::testing
