// tokenizer/utf8.h — UTF-8 validation, decoding and encoding helpers (internal to the tokenizer layer).
//
// Validity follows the Unicode standard (Table 3-7): no overlong forms, no surrogates, nothing
// above U+10FFFF. Every function is total: malformed input is reported, never undefined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specdec::utf8 {

inline constexpr uint32_t kReplacement = 0xFFFD;          // U+FFFD REPLACEMENT CHARACTER
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Result of looking at the bytes starting at one position.
enum class SeqStatus : uint8_t { Valid, Incomplete, Invalid };
struct Seq {
  SeqStatus status;
  uint8_t length;     // bytes of the sequence when Valid; 1 when Invalid; bytes seen when Incomplete
  uint32_t codepoint; // when Valid
};

// Classifies the sequence at text[pos]. requires: pos < text.size().
// Incomplete: a valid prefix of a sequence that runs past the end of `text`.
// Invalid: the byte at pos cannot start a valid sequence given what follows. Cost: O(1).
Seq inspect(std::string_view text, size_t pos);

// Length of a sequence implied by its lead byte, llama.cpp-style (1 for continuation bytes and
// 0xF8..0xFF): used to chunk text for SentencePiece so that malformed bytes become byte tokens.
inline size_t lead_length(unsigned char lead) {
  static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[lead >> 4];
}

// Appends the UTF-8 encoding of `cp` (requires cp <= 0x10FFFF). Cost: O(1).
void append(std::string& out, uint32_t cp);

// True when every byte of `text` belongs to a valid sequence. Cost: O(n).
bool is_valid(std::string_view text);

// Replaces every byte that is not part of a valid sequence by U+FFFD (one per byte).
// guarantees: the result is valid UTF-8; valid input is returned unchanged. Cost: O(n).
std::string sanitize(std::string_view text);

}  // namespace specdec::utf8
