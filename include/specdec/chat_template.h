// specdec/chat_template.h — turning chat messages into a prompt, for the common template
// families, without a Jinja engine.
//
// A GGUF stores its chat format as a Jinja template (tokenizer.chat_template). We recognise the
// family from the template text and render it with our own code, which reproduces each family's
// reference template exactly as Hugging Face transformers renders it (sandboxed Jinja with
// trim_blocks and lstrip_blocks): the same text, and the same raise_exception messages for
// conversations the template rejects. tests/server/data/chat_templates/ holds the reference
// templates and golden renderings made with python3-jinja2.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "specdec/error.h"

namespace specdec {

enum class ChatFamily { ChatML, Llama2, Llama3, Mistral, Gemma, Phi3, Zephyr };

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" (the families decide what they accept)
  std::string content;  // UTF-8
};

// The template rejected the conversation (its raise_exception message, verbatim).
class ChatTemplateError : public Error {
 public:
  explicit ChatTemplateError(const std::string& message) : Error(message) {}
};

// "chatml" | "llama2" | "llama3" | "mistral" | "gemma" | "phi3" | "zephyr".
const char* chat_family_name(ChatFamily family);
// Inverse of chat_family_name (case-insensitive); nullopt for an unknown name.
std::optional<ChatFamily> chat_family_from_name(std::string_view name);
// "chatml, llama2, ..." for help texts and error messages.
std::string chat_family_names();

// Recognises a template by its family's markers (<|im_start|>, [INST] + <<SYS>>, ...).
// Templates that also use features the renderer does not reproduce (tools, dates, default
// system prompts) are not recognised. Returns nullopt when unsupported. Cost: O(template size).
std::optional<ChatFamily> detect_chat_family(std::string_view jinja_template);

// Renders `messages` as the family's reference template does with the given special-token
// texts. Throws ChatTemplateError with the template's own message for conversations it
// rejects (e.g. Gemma: "System role not supported"). Cost: O(total content size).
std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages, const std::string& bos_token,
                        const std::string& eos_token, bool add_generation_prompt);

// Python's str.strip() (what Jinja's trim filter and .strip() do): removes leading and
// trailing Unicode whitespace. Invalid UTF-8 bytes count as non-whitespace.
std::string python_strip(std::string_view text);

}  // namespace specdec
