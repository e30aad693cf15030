// cli/cmd_tokenize.cpp — `specdec tokenize -m MODEL.gguf -p TEXT [--ids] [--no-bos]
// [--no-parse-special]`: shows how a prompt is tokenized.
//   --ids: one Python-style list, e.g. [1, 403, 407]
//   otherwise: one line per token, its id and its piece quoted (special tokens rendered,
//   non-printable bytes escaped as \n, \t, \xNN).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/tokenizer.h"

namespace specdec::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  bool ids_only = false;
  bool no_bos = false;
  bool no_parse_special = false;
};

// Quotes a token piece for a terminal: printable ASCII and complete UTF-8 sequences as they
// are, quote/backslash/control bytes and stray bytes escaped.
std::string quote_piece(const std::string& piece) {
  std::string out = "'";
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto c = static_cast<unsigned char>(piece[i]);
    if (c == '\'' || c == '\\') { out += '\\'; out += static_cast<char>(c); continue; }
    if (c == '\n') { out += "\\n"; continue; }
    if (c == '\t') { out += "\\t"; continue; }
    if (c == '\r') { out += "\\r"; continue; }
    size_t len = 0;
    if (c >= 0x20 && c < 0x7F) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    bool complete = len > 0 && i + len <= piece.size();
    for (size_t k = 1; complete && k < len; ++k) {
      complete = (static_cast<unsigned char>(piece[i + k]) & 0xC0) == 0x80;
    }
    if (complete) {
      out.append(piece, i, len);
      i += len - 1;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out + "'";
}

void run_tokenize(const TokenizeOptions& opt) {
  auto gguf = GgufFile::open(opt.model);
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  std::vector<Token> ids = tokenizer->encode(opt.prompt, /*add_special=*/true, !opt.no_parse_special);
  if (opt.no_bos && !ids.empty() && ids.front() == tokenizer->special().bos &&
      tokenizer->special().add_bos) {
    ids.erase(ids.begin());
  }
  if (opt.ids_only) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
    return;
  }
  for (Token id : ids) {
    std::printf("%6d %s\n", id, quote_piece(tokenizer->token_to_piece(id, /*render_special=*/true)).c_str());
  }
}

void setup_tokenize(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Tokenize a prompt with a model's vocabulary");
  cmd->add_option("-m,--model", opt->model, "GGUF file (a model or a vocabulary-only file)")->required();
  cmd->add_option("-p,--prompt", opt->prompt, "text to tokenize")->required();
  cmd->add_flag("--ids", opt->ids_only, "print only the ids, as a Python-style list");
  cmd->add_flag("--no-bos", opt->no_bos, "do not add the BOS token the vocabulary asks for");
  cmd->add_flag("--no-parse-special", opt->no_parse_special,
                "treat special-token text such as <s> as plain text");
  cmd->callback([opt]() { run_tokenize(*opt); });
}

}  // namespace

SPECDEC_COMMAND("tokenize", setup_tokenize);

}  // namespace specdec::cli
