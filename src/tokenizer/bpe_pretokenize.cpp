// tokenizer/bpe_pretokenize.cpp — pre-tokenizer regexes by tokenizer.ggml.pre, and the PCRE2
// splitter (see bpe_pretokenize.h). The regex lists are those llama.cpp uses for each name.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/bpe_pretokenize.h"

#include <memory>

#include "specdec/error.h"
#include "tokenizer/utf8.h"

namespace specdec::tok {
namespace {

// GPT-2's original split: contractions, letters, digits, other symbols, whitespace.
const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3: case-insensitive contractions, digits in groups of up to three, newline runs.
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: as Llama 3 but single digits.
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kCjk = "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9E\xBF]+";  // [一-龥ࠀ-一가-퟿]+
// DeepSeek LLM: letters of cased scripts (an explicit list of ranges), ASCII/full-width punctuation.
const char* const kDeepseekLetters =
    "\\s?["
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"
    "\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-"
    "\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-"
    "\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-"
    "\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-"
    "\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"
    "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-"
    "\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-"
    "\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-"
    "\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}"
    "]+";
const char* const kBloom = " ?[^(\\s|.,!?…。，、।۔،)]+";
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?"
    "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)";
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Family {
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {{"default"},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"},
       {kLlama3}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", kCjk, "\\p{N}+"}},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}},
      {{"deepseek-v3"},
       {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es",
        "jina-v2-de", "jina-v2-code", "roberta-bpe", "gigachat", "exaone4", "trillion"},
       {kGpt2}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "grok-2"}, {kQwen2}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, "\\p{N}"}},
      {{"tekken"}, {kTekken}, true, true},
      {{"gpt-4o", "llama4", "minimax-m2"}, {kGpt4o}},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& supported_pre_tokenizers() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Family& f : families()) out.insert(out.end(), f.names.begin(), f.names.end());
    return out;
  }();
  return names;
}

PreTokenizerConfig pre_tokenizer_config(const std::string& pre, const std::string& file) {
  const std::string name = pre.empty() ? "default" : pre;
  for (const Family& f : families()) {
    for (const char* n : f.names) {
      if (name != n) continue;
      PreTokenizerConfig config;
      config.regexes.assign(f.regexes.begin(), f.regexes.end());
      config.ignore_merges = f.ignore_merges;
      config.add_bos = f.add_bos;
      if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3" ||
          name == "pixtral") {
        config.ignore_merges = true;
        config.add_bos = true;
      }
      return config;
    }
  }
  std::string list;
  for (const std::string& n : supported_pre_tokenizers()) list += (list.empty() ? "" : ", ") + n;
  throw Error(file + ": unknown pre-tokenizer tokenizer.ggml.pre = '" + pre + "' (supported: " + list + ")");
}

struct PreTokenizer::Pattern {
  std::string source;
  pcre2_code* code = nullptr;
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  patterns_.reserve(regexes.size());
  for (const std::string& source : regexes) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error,
                                     &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      for (Pattern& p : patterns_) pcre2_code_free(p.code);
      throw Error("pre-tokenizer regex '" + source + "' does not compile at offset " +
                  std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    patterns_.push_back({source, code});
  }
}

PreTokenizer::~PreTokenizer() {
  for (Pattern& p : patterns_) pcre2_code_free(p.code);
}

std::vector<Span> PreTokenizer::split(std::string_view text) const {
  std::vector<Span> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(0, text.size());
  std::vector<Span> next;
  for (const Pattern& pattern : patterns_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(pattern.code, nullptr), &pcre2_match_data_free);
    if (!match) throw Error("pre-tokenizer: out of memory for match data");
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto& [offset, length] : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + offset);
      size_t start = 0;     // where the next search begins
      size_t emitted = 0;   // end of the text already turned into pieces
      while (start < length) {
        int rc = pcre2_match(pattern.code, subject, length, start, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(pattern.code, subject, length, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                           match.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          throw Error("pre-tokenizer regex '" + pattern.source + "' failed on a piece of " +
                      std::to_string(length) + " bytes: " + reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        const size_t m_begin = ovector[0], m_end = ovector[1];
        if (m_end == m_begin) {  // empty match: step over one character, emit nothing
          start = m_begin + utf8::lead_length(static_cast<unsigned char>(text[offset + m_begin]));
          continue;
        }
        if (m_begin > emitted) next.emplace_back(offset + emitted, m_begin - emitted);
        next.emplace_back(offset + m_begin, m_end - m_begin);
        emitted = start = m_end;
      }
      if (emitted < length) next.emplace_back(offset + emitted, length - emitted);
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace specdec::tok
