// fuzz/fuzz_tokenizer.cpp — libFuzzer target: encoding arbitrary bytes, decoding arbitrary ids
// and streaming detokenization with the fixture vocabularies (SentencePiece and byte-level BPE).
//
// Input layout: byte 0 picks the vocabulary, byte 1 the mode and flags, the rest is text (encode)
// or little-endian int32 ids (decode / stream).
// Properties checked (the tokenizer's documented guarantees, as in tests/tokenizer):
//   encode never fails, is deterministic and gives ids in [0, n_vocab); with BOS added and
//   without special-token parsing, decode(encode(text)) == text for valid UTF-8 text (vocabularies that keep raw bytes:
//   for any text); the streaming detokenizer emits only valid UTF-8 and, over in-range ids,
//   the same text as utf8-sanitizing the whole decode.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "specdec/gguf.h"
#include "specdec/tokenizer.h"
#include "tokenizer/utf8.h"

namespace specdec {
namespace {

// Which texts decode(encode(text)) gives back exactly.
enum class RoundTrip { AnyBytes, ValidUtf8, None };

struct Vocabulary {
  std::string name;
  std::unique_ptr<Tokenizer> tok;
  RoundTrip round_trip;
  // SentencePiece texts of user-defined tokens: matched even without parse_special, and (as in
  // llama.cpp) the raw text after them gets the space prefix, so texts holding one do not round-trip.
  std::vector<std::string> spm_user_defined;
};

std::vector<Vocabulary>& vocabularies() {
  static std::vector<Vocabulary> v;
  return v;
}

void load_vocabularies() {
  struct Spec { const char* file; RoundTrip round_trip; };
  // Falcon's vocabulary lacks some byte characters (e.g. 0x1E), which are dropped, as llama.cpp
  // does; DeepSeek-Coder holds some bytes only as user-defined tokens.
  const Spec specs[] = {
      {"models/stories260K.gguf", RoundTrip::AnyBytes},
      {"tokenizer/ggml-vocab-llama-spm.gguf", RoundTrip::AnyBytes},
      {"tokenizer/ggml-vocab-phi-3.gguf", RoundTrip::AnyBytes},
      {"tokenizer/ggml-vocab-gpt-2.gguf", RoundTrip::AnyBytes},
      {"tokenizer/ggml-vocab-deepseek-coder.gguf", RoundTrip::ValidUtf8},
      {"tokenizer/ggml-vocab-falcon.gguf", RoundTrip::None},
  };
  const std::string dir = fuzz::fixtures_dir();
  for (const Spec& s : specs) {
    try {
      auto gguf = GgufFile::open(dir + "/" + s.file);
      Vocabulary v{s.file, Tokenizer::from_gguf(*gguf), s.round_trip, {}};
      for (Token id = 0; id < v.tok->n_vocab(); ++id)
        if (v.tok->model_name() == "llama" && v.tok->token_attr(id) == TokenAttr::UserDefined)
          v.spm_user_defined.emplace_back(v.tok->token_text(id));
      vocabularies().push_back(std::move(v));
    } catch (const Error& e) {
      std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", s.file, e.what());
    }
  }
  if (vocabularies().empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: no vocabulary found under %s (set SPECDEC_FIXTURES)\n",
                 dir.c_str());
    std::exit(1);
  }
}

// Texts that legitimately do not round-trip through a SentencePiece vocabulary.
bool spm_exception(const Vocabulary& v, std::string_view text) {
  if (v.tok->model_name() != "llama") return false;
  // SentencePiece cannot give back a literal U+2581, its space marker.
  if (text.find("\xE2\x96\x81") != std::string_view::npos) return true;
  for (const std::string& t : v.spm_user_defined)
    if (text.find(t) != std::string_view::npos) return true;
  return false;
}

void fuzz_encode(const Vocabulary& v, std::string_view text, bool add_special, bool parse_special) {
  const Tokenizer& tok = *v.tok;
  const std::vector<Token> ids = tok.encode(text, add_special, parse_special);
  for (Token id : ids)
    FUZZ_PROPERTY(id >= 0 && id < tok.n_vocab(), v.name + ": id " + std::to_string(id));
  FUZZ_PROPERTY(ids == tok.encode(text, add_special, parse_special), v.name + ": deterministic");
  const bool valid = utf8::is_valid(text);
  const bool expect_round_trip =
      add_special && !parse_special && !spm_exception(v, text) &&
      (v.round_trip == RoundTrip::AnyBytes || (v.round_trip == RoundTrip::ValidUtf8 && valid));
  if (expect_round_trip) FUZZ_PROPERTY(tok.decode(ids) == text, v.name + ": round trip");
  StreamingDetokenizer detok(tok);
  std::string streamed;
  for (Token id : ids) {
    const std::string chunk = detok.push(id);
    FUZZ_PROPERTY(utf8::is_valid(chunk), v.name + ": streamed chunk is valid UTF-8");
    streamed += chunk;
  }
  streamed += detok.flush();
  if (expect_round_trip && valid) FUZZ_PROPERTY(streamed == text, v.name + ": streamed round trip");
}

void fuzz_ids(const Vocabulary& v, const uint8_t* data, size_t size, bool render_special, bool in_range) {
  const Tokenizer& tok = *v.tok;
  std::vector<Token> ids(size / 4);  // (n_ids)
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  if (in_range)
    for (Token& id : ids) id = static_cast<Token>(static_cast<uint32_t>(id) % static_cast<uint32_t>(tok.n_vocab()));
  for (Token id : ids) (void)tok.token_to_piece(id, render_special);
  const std::string text = tok.decode(ids, render_special);
  StreamingDetokenizer detok(tok);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == ids.size() / 2 && (size & 1)) detok.resume();
    const std::string chunk = detok.push(ids[i]);
    FUZZ_PROPERTY(utf8::is_valid(chunk), v.name + ": streamed chunk is valid UTF-8");
    streamed += chunk;
  }
  streamed += detok.flush();
  FUZZ_PROPERTY(utf8::is_valid(streamed), v.name + ": streamed text is valid UTF-8");
}

}  // namespace
}  // namespace specdec

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  specdec::load_vocabularies();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specdec;
  fuzz::Input in(data, size);
  const auto& vocabs = vocabularies();
  const Vocabulary& v = vocabs[in.take<uint8_t>() % vocabs.size()];
  const uint8_t mode = in.take<uint8_t>();
  const bool flag_a = mode & 0x10, flag_b = mode & 0x20;
  switch (mode % 2) {
    case 0:
      fuzz_encode(v, std::string_view(reinterpret_cast<const char*>(in.rest()), in.rest_size()),
                  flag_a, flag_b);
      break;
    default:
      fuzz_ids(v, in.rest(), in.rest_size(), flag_a, flag_b);
      break;
  }
  return 0;
}
