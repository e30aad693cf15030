// Chat templates: family recognition and rendering (see specdec/chat_template.h).
//
// Each render_* function follows its reference template statement by statement (same order of
// checks, same raise_exception texts), so the output equals the Jinja rendering byte for byte.
#include "specdec/chat_template.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

namespace specdec {

namespace {

constexpr std::array<std::pair<ChatFamily, const char*>, 7> kFamilies = {{
    {ChatFamily::ChatML, "chatml"},
    {ChatFamily::Llama2, "llama2"},
    {ChatFamily::Llama3, "llama3"},
    {ChatFamily::Mistral, "mistral"},
    {ChatFamily::Gemma, "gemma"},
    {ChatFamily::Phi3, "phi3"},
    {ChatFamily::Zephyr, "zephyr"},
}};

const char* const kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// Decodes one UTF-8 code point at text[i]; returns its length, or 0 for an invalid sequence.
size_t decode_utf8(std::string_view text, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  uint32_t value = n == 1 ? b0 : n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3Fu);
  }
  *cp = value;
  return n;
}

// Python's str.isspace() for one code point.
bool python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

void require_messages(std::span<const ChatMessage> messages) {
  if (messages.empty()) throw ChatTemplateError("no messages to render");
}

bool alternation_broken(const ChatMessage& m, size_t index) { return (m.role == "user") != (index % 2 == 0); }

std::string render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama2(std::span<const ChatMessage> messages, const std::string& bos, const std::string& eos) {
  const bool has_system = messages[0].role == "system";
  const auto loop = has_system ? messages.subspan(1) : messages;
  std::string out;
  for (size_t i = 0; i < loop.size(); ++i) {
    const ChatMessage& m = loop[i];
    if (alternation_broken(m, i)) throw ChatTemplateError(kAlternate);
    const std::string content =
        (i == 0 && has_system) ? "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content : m.content;
    if (m.role == "user") {
      out += bos + "[INST] " + python_strip(content) + " [/INST]";
    } else if (m.role == "assistant") {
      out += " " + python_strip(content) + " " + eos;
    }
  }
  return out;
}

std::string render_llama3(std::span<const ChatMessage> messages, const std::string& bos, bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos;
    out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + python_strip(messages[i].content) +
           "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_mistral(std::span<const ChatMessage> messages, const std::string& bos, const std::string& eos) {
  std::string out = bos;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (alternation_broken(m, i)) throw ChatTemplateError(kAlternate);
    if (m.role == "user") {
      out += "[INST] " + m.content + " [/INST]";
    } else if (m.role == "assistant") {
      out += m.content + eos;
    } else {
      throw ChatTemplateError("Only user and assistant roles are supported!");
    }
  }
  return out;
}

std::string render_gemma(std::span<const ChatMessage> messages, const std::string& bos, bool add_generation_prompt) {
  std::string out = bos;
  if (messages[0].role == "system") throw ChatTemplateError("System role not supported");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (alternation_broken(m, i)) throw ChatTemplateError(kAlternate);
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n" + python_strip(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string render_phi3(std::span<const ChatMessage> messages, const std::string& eos, bool add_generation_prompt) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system" && !m.content.empty()) {
      out += "<|system|>\n" + m.content + "<|end|>\n";
    } else if (m.role == "user") {
      out += "<|user|>\n" + m.content + "<|end|>\n";
    } else if (m.role == "assistant") {
      out += "<|assistant|>\n" + m.content + "<|end|>\n";
    }
  }
  out += add_generation_prompt ? "<|assistant|>\n" : eos;
  return out;
}

std::string render_zephyr(std::span<const ChatMessage> messages, const std::string& eos, bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || m.role == "system" || m.role == "assistant") {
      out += "<|" + m.role + "|>\n" + m.content + eos + "\n";
    }
    if (i + 1 == messages.size() && add_generation_prompt) out += "<|assistant|>\n";
  }
  return out;
}

}  // namespace

const char* chat_family_name(ChatFamily family) {
  for (const auto& [f, name] : kFamilies)
    if (f == family) return name;
  return "?";
}

std::optional<ChatFamily> chat_family_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& [f, n] : kFamilies)
    if (lower == n) return f;
  return std::nullopt;
}

std::string chat_family_names() {
  std::string out;
  for (const auto& [f, name] : kFamilies) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::optional<ChatFamily> detect_chat_family(std::string_view t) {
  // Features our renderers do not reproduce: tool definitions, dates, stateful namespaces.
  for (const char* unsupported : {"tools", "strftime", "date_string", "namespace("})
    if (contains(t, unsupported)) return std::nullopt;
  if (contains(t, "<|im_start|>")) return ChatFamily::ChatML;
  if (contains(t, "<|start_header_id|>") && contains(t, "<|eot_id|>")) return ChatFamily::Llama3;
  if (contains(t, "<start_of_turn>")) return ChatFamily::Gemma;
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) return ChatFamily::Phi3;
  if (contains(t, "<|user|>") && contains(t, "eos_token")) return ChatFamily::Zephyr;
  if (contains(t, "[INST]") && contains(t, "<<SYS>>")) return ChatFamily::Llama2;
  if (contains(t, "[INST]")) return ChatFamily::Mistral;
  return std::nullopt;
}

std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages, const std::string& bos_token,
                        const std::string& eos_token, bool add_generation_prompt) {
  require_messages(messages);
  switch (family) {
    case ChatFamily::ChatML: return render_chatml(messages, add_generation_prompt);
    case ChatFamily::Llama2: return render_llama2(messages, bos_token, eos_token);
    case ChatFamily::Llama3: return render_llama3(messages, bos_token, add_generation_prompt);
    case ChatFamily::Mistral: return render_mistral(messages, bos_token, eos_token);
    case ChatFamily::Gemma: return render_gemma(messages, bos_token, add_generation_prompt);
    case ChatFamily::Phi3: return render_phi3(messages, eos_token, add_generation_prompt);
    case ChatFamily::Zephyr: return render_zephyr(messages, eos_token, add_generation_prompt);
  }
  throw Error("unknown chat template family");
}

std::string python_strip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    uint32_t cp = 0;
    const size_t n = decode_utf8(text, begin, &cp);
    if (n == 0 || !python_space(cp)) break;
    begin += n;
  }
  while (end > begin) {
    // Step back to the start of the last code point (at most 4 bytes).
    size_t start = end - 1;
    while (start > begin && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    uint32_t cp = 0;
    const size_t n = decode_utf8(text, start, &cp);
    if (n != end - start || !python_space(cp)) break;
    end = start;
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace specdec
