// Chat templates: our renderer against golden renderings of each family's real template made
// with python3-jinja2 (tests/server/data/make_chat_goldens.py), and recognition of the
// templates as a GGUF would carry them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "specdec/chat_template.h"

namespace specdec {
namespace {

using nlohmann::json;

std::string data_dir() {
  std::string dir = SPECDEC_SOURCE_DIR;  // (not `std::string(...) + "..."`: GCC 12's -Warray-bounds
  dir += "/tests/server/data";           // misfires on that in a unity batch)
  return dir;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<ChatMessage> messages_of(const json& conversation) {
  std::vector<ChatMessage> out;
  for (const auto& m : conversation) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

class ChatTemplateGolden : public ::testing::TestWithParam<ChatFamily> {};

TEST_P(ChatTemplateGolden, RendersLikeJinja) {
  const ChatFamily family = GetParam();
  const std::string name = chat_family_name(family);
  const json conversations = json::parse(read_text(data_dir() + "/chat_conversations.json"));
  const json golden = json::parse(read_text(data_dir() + "/chat_templates/" + name + ".golden.json"));
  const std::string bos = golden.at("bos_token"), eos = golden.at("eos_token");
  int n_checked = 0, n_errors = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string conv = c.at("conversation");
    const bool add_generation_prompt = c.at("add_generation_prompt");
    const auto messages = messages_of(conversations.at(conv));
    SCOPED_TRACE(name + " / " + conv + (add_generation_prompt ? " / +generation prompt" : ""));
    if (c.contains("error")) {
      try {
        render_chat(family, messages, bos, eos, add_generation_prompt);
        ADD_FAILURE() << "expected the template's error: " << c.at("error");
      } catch (const ChatTemplateError& e) {
        EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
      }
      ++n_errors;
    } else {
      EXPECT_EQ(render_chat(family, messages, bos, eos, add_generation_prompt), c.at("output").get<std::string>());
    }
    ++n_checked;
  }
  EXPECT_EQ(n_checked, 2 * static_cast<int>(conversations.size()));
  std::printf("%s: %d cases (%d rejected by the template)\n", name.c_str(), n_checked, n_errors);
}

TEST_P(ChatTemplateGolden, RecognisesTheRealTemplate) {
  const ChatFamily family = GetParam();
  const std::string name = chat_family_name(family);
  const std::string jinja = read_text(data_dir() + "/chat_templates/" + name + ".jinja");
  auto detected = detect_chat_family(jinja);
  ASSERT_TRUE(detected.has_value()) << name;
  EXPECT_EQ(*detected, family);
  EXPECT_EQ(chat_family_from_name(name), family);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplateGolden,
                         ::testing::Values(ChatFamily::ChatML, ChatFamily::Llama2, ChatFamily::Llama3,
                                           ChatFamily::Mistral, ChatFamily::Gemma, ChatFamily::Phi3,
                                           ChatFamily::Zephyr),
                         [](const auto& info) { return std::string(chat_family_name(info.param)); });

TEST(ChatTemplate, UnsupportedTemplatesAreNotGuessed) {
  EXPECT_FALSE(detect_chat_family("{{ messages }}").has_value());
  EXPECT_FALSE(detect_chat_family("").has_value());
  // A ChatML template with tool definitions renders differently: refused, not approximated.
  EXPECT_FALSE(detect_chat_family("{% if tools %}...{% endif %}<|im_start|>").has_value());
  EXPECT_FALSE(chat_family_from_name("vicuna").has_value());
  EXPECT_EQ(chat_family_from_name("ChatML"), ChatFamily::ChatML);
  EXPECT_NE(chat_family_names().find("zephyr"), std::string::npos);
}

TEST(ChatTemplate, EmptyConversationIsAnError) {
  EXPECT_THROW(render_chat(ChatFamily::ChatML, {}, "", "", true), ChatTemplateError);
}

TEST(ChatTemplate, PythonStripMatchesUnicodeWhitespace) {
  EXPECT_EQ(python_strip(" \t\n x y \r\n"), "x y");
  EXPECT_EQ(python_strip("\u00a0\u3000x\u2028"), "x");
  EXPECT_EQ(python_strip("\u200bx"), "\u200bx");  // zero-width space is not whitespace in Python
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip("\xff x \xfe"), "\xff x \xfe");  // invalid bytes are kept
}

}  // namespace
}  // namespace specdec
