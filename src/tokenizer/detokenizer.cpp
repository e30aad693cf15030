// tokenizer/detokenizer.cpp — StreamingDetokenizer: token pieces -> complete UTF-8 text.
//
// A token's piece may end in the middle of a multi-byte character (byte-fallback tokens, byte-
// level BPE). Bytes of a sequence that is still a valid prefix are held back until the sequence
// completes; a byte that cannot start or continue a valid sequence becomes U+FFFD (one per byte).
#include "specdec/tokenizer.h"

#include "tokenizer/utf8.h"

namespace specdec {
namespace {

// Moves the complete part of `pending` to the result; keeps an incomplete tail in `pending`
// unless `final`, where it becomes U+FFFD per byte.
std::string drain(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    const utf8::Seq seq = utf8::inspect(pending, pos);
    if (seq.status == utf8::SeqStatus::Valid) {
      out.append(pending, pos, seq.length);
      pos += seq.length;
    } else if (seq.status == utf8::SeqStatus::Incomplete && !final) {
      break;
    } else {
      out.append(utf8::kReplacementUtf8);
      pos += 1;
    }
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace

std::string StreamingDetokenizer::push(Token id) {
  std::string piece = tokenizer_.token_to_piece(id);
  if (at_start_ && !piece.empty()) {
    if (tokenizer_.special().add_space_prefix && piece[0] == ' ') piece.erase(0, 1);
    at_start_ = false;
  }
  pending_ += piece;
  return drain(pending_, false);
}

std::string StreamingDetokenizer::flush() { return drain(pending_, true); }

void StreamingDetokenizer::reset() {
  pending_.clear();
  at_start_ = true;
}

}  // namespace specdec
