// tokenizer/byte_level.h — GPT-2's reversible map between bytes and printable code points.
//
// Byte-level BPE vocabularies store token text with every byte replaced by a printable
// character: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to the code point of the same value,
// the 68 others to U+0100, U+0101, ... in byte order (so ' ' is "Ġ" U+0120, '\n' is "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specdec::tok {

// UTF-8 of the code point that stands for `byte`. Cost: O(1) (table).
const std::string& byte_to_utf8(uint8_t byte);
// Byte a code point stands for, or -1 when it is not in the map. Cost: O(1).
int codepoint_to_byte(uint32_t cp);
// Token text -> bytes. Code points outside the map are copied as their UTF-8 (never fails).
std::string byte_level_decode(std::string_view token_text);

}  // namespace specdec::tok
