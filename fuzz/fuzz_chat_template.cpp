// fuzz/fuzz_chat_template.cpp — libFuzzer target: chat-template family detection on arbitrary
// template text, and rendering arbitrary conversations with every family.
//
// Input layout: byte 0 picks the mode (0: detect_chat_family on the rest; 1: python_strip;
// otherwise render with family byte0 % 7 and flags in byte 1), then fields separated by NUL:
// bos, eos, role, content, role, content, ...
// Crash conditions: any sanitizer report, an exception other than ChatTemplateError escaping
// render_chat, or a rendering that loses a system/user/assistant message's content.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "specdec/chat_template.h"

namespace {

std::vector<std::string> split_nul(std::string_view text) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      fields.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return fields;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specdec;
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  const uint8_t mode = data[0];
  if (mode == 0) {
    (void)detect_chat_family(rest);
    return 0;
  }
  if (mode == 1) {
    const std::string stripped = python_strip(rest);
    FUZZ_PROPERTY(stripped.size() <= rest.size() && rest.find(stripped) != std::string_view::npos,
                  "strip returns a substring");
    return 0;
  }
  static constexpr ChatFamily kFamilies[] = {ChatFamily::ChatML, ChatFamily::Llama2, ChatFamily::Llama3,
                                             ChatFamily::Mistral, ChatFamily::Gemma, ChatFamily::Phi3,
                                             ChatFamily::Zephyr};
  const ChatFamily family = kFamilies[mode % 7];
  const bool add_generation_prompt = data[1] & 1;
  std::vector<std::string> fields = split_nul(rest);
  while (fields.size() < 2) fields.emplace_back();
  std::vector<ChatMessage> messages;
  for (size_t i = 2; i + 1 < fields.size(); i += 2) messages.push_back({fields[i], fields[i + 1]});
  std::string text;
  try {
    text = render_chat(family, messages, fields[0], fields[1], add_generation_prompt);
  } catch (const ChatTemplateError&) {
    return 0;
  }
  // Every family prints the content (possibly stripped) of each user/assistant message it accepts;
  // like the reference templates, some silently skip other roles and system messages after the
  // first, and some (Llama 2, Mistral) print the system prompt inside a user turn, so a leading
  // system message is checked only when a user turn follows.
  bool has_user = false;
  for (const ChatMessage& m : messages) has_user = has_user || m.role == "user";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool checked = m.role == "user" || m.role == "assistant" || (m.role == "system" && i == 0 && has_user);
    if (!checked) continue;
    const std::string core = python_strip(m.content);
    FUZZ_PROPERTY(text.find(core) != std::string::npos,
                  std::string(chat_family_name(family)) + ": content of a '" + m.role + "' message is missing");
  }
  return 0;
}
