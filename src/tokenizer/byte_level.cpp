// tokenizer/byte_level.cpp — GPT-2 byte <-> code point map (see byte_level.h).
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace specdec::tok {
namespace {

struct ByteMap {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> cp_to_byte{};  // every mapped code point is < 0x144

  ByteMap() {
    cp_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = printable ? b : next_extra++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
      utf8::append(byte_to_text[b], byte_to_cp[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_utf8(uint8_t byte) { return byte_map().byte_to_text[byte]; }

int codepoint_to_byte(uint32_t cp) {
  return cp < 512 ? byte_map().cp_to_byte[cp] : -1;
}

std::string byte_level_decode(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (size_t pos = 0; pos < token_text.size();) {
    const utf8::Seq seq = utf8::inspect(token_text, pos);
    if (seq.status != utf8::SeqStatus::Valid) {  // malformed vocabulary text: copy the byte
      out.push_back(token_text[pos++]);
      continue;
    }
    const int byte = codepoint_to_byte(seq.codepoint);
    if (byte >= 0) out.push_back(static_cast<char>(byte));
    else out.append(token_text.substr(pos, seq.length));
    pos += seq.length;
  }
  return out;
}

}  // namespace specdec::tok
