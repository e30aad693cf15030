// tokenizer/utf8.cpp — UTF-8 helpers (see utf8.h).
#include "tokenizer/utf8.h"

namespace specdec::utf8 {

Seq inspect(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {SeqStatus::Valid, 1, b0};
  size_t need = 0;
  uint32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2; cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3; cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4; cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {SeqStatus::Invalid, 1, 0};  // continuation byte, C0/C1, F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) return {SeqStatus::Incomplete, static_cast<uint8_t>(avail), 0};
    const unsigned char b = p[i];
    const unsigned char min = (i == 1) ? lo : 0x80;
    const unsigned char max = (i == 1) ? hi : 0xBF;
    if (b < min || b > max) return {SeqStatus::Invalid, 1, 0};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {SeqStatus::Valid, static_cast<uint8_t>(need), cp};
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) { ++pos; continue; }
    const Seq s = inspect(text, pos);
    if (s.status != SeqStatus::Valid) return false;
    pos += s.length;
  }
  return true;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    const Seq s = inspect(text, pos);
    if (s.status == SeqStatus::Valid) {
      out.append(text.substr(pos, s.length));
      pos += s.length;
    } else {
      out.append(kReplacementUtf8);
      pos += 1;
    }
  }
  return out;
}

}  // namespace specdec::utf8
