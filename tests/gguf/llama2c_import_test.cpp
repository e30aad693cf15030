// llama2.c legacy checkpoint import: equivalence with llama.cpp's converter on the shared
// stories260K fixture, layout checks on a synthetic checkpoint, and bad inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/testing.h"
#include "gguf/gguf_bytes.h"
#include "specdec/convert.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

using testing::read_bytes;
using testing::write_bytes;

using testing::Bytes;

template <typename F>
void expect_error(F&& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << p;
  }
}

TEST(Llama2cImport, Stories260KMatchesLlamaCppConverter) {
  SPECDEC_FIXTURE(bin, "models/stories260K.bin");
  SPECDEC_FIXTURE(tok, "models/tok512.bin");
  SPECDEC_FIXTURE(ref_path, "models/stories260K.gguf");
  const std::string out = testing::temp_dir() + "/stories260K.converted.gguf";
  const Llama2cConfig c = convert_llama2c(bin, tok, out);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);

  auto ref = GgufFile::open(ref_path);
  auto got = GgufFile::open(out);
  // Same metadata, same order, same values.
  ASSERT_EQ(got->metadata().size(), ref->metadata().size());
  for (size_t i = 0; i < ref->metadata().size(); ++i) {
    const auto& [rk, rv] = ref->metadata()[i];
    const auto& [gk, gv] = got->metadata()[i];
    EXPECT_EQ(gk, rk) << "entry " << i;
    EXPECT_EQ(gguf_value_type_description(gv), gguf_value_type_description(rv)) << rk;
    EXPECT_EQ(gguf_value_to_string(gv, 1000), gguf_value_to_string(rv, 1000)) << rk;
  }
  EXPECT_EQ(got->get_string_array("tokenizer.ggml.tokens"),
            ref->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(got->get_f32_array("tokenizer.ggml.scores"),
            ref->get_f32_array("tokenizer.ggml.scores"));
  EXPECT_EQ(got->get_i32_array("tokenizer.ggml.token_type"),
            ref->get_i32_array("tokenizer.ggml.token_type"));
  // Every tensor: same name, order, type, dims, bytes.
  ASSERT_EQ(got->tensors().size(), ref->tensors().size());
  for (size_t i = 0; i < ref->tensors().size(); ++i) {
    const GgufTensorInfo& r = ref->tensors()[i];
    const GgufTensorInfo& g = got->tensors()[i];
    EXPECT_EQ(g.name, r.name);
    EXPECT_EQ(g.type, r.type) << r.name;
    EXPECT_EQ(g.dims, r.dims) << r.name;
    ASSERT_EQ(g.n_bytes, r.n_bytes) << r.name;
    EXPECT_EQ(std::memcmp(g.data, r.data, r.n_bytes), 0) << r.name << " differs";
  }
  // And therefore the whole file.
  EXPECT_TRUE(read_bytes(out) == read_bytes(ref_path));
}

TEST(Llama2cImport, ContextLengthOption) {
  SPECDEC_FIXTURE(bin, "models/stories260K.bin");
  SPECDEC_FIXTURE(tok, "models/tok512.bin");
  const std::string out = testing::temp_dir() + "/ctx.gguf";
  Llama2cConvertOptions opt;
  opt.context_length = 0;
  convert_llama2c(bin, tok, out, opt);
  EXPECT_EQ(GgufFile::open(out)->get_u32("llama.context_length"), 512u);
  opt.context_length = 256;
  convert_llama2c(bin, tok, out, opt);
  EXPECT_EQ(GgufFile::open(out)->get_u32("llama.context_length"), 256u);
  opt.context_length = 1024;
  expect_error([&] { convert_llama2c(bin, tok, out, opt); }, {"1024", "seq_len 512"});
  convert_llama2c(bin, tok, out);
  EXPECT_EQ(GgufFile::open(out)->get_u32("llama.context_length"), 128u);
}

// A synthetic checkpoint whose every float encodes (array number, index), so each tensor's
// source can be checked. dim 8, hidden 12, 2 layers, 4 heads, 2 KV heads, vocab 6, seq_len 4.
struct Synthetic {
  int32_t dim = 8, hidden = 12, layers = 2, heads = 4, kv_heads = 2, vocab = 6, seq_len = 4;
  bool shared = false;

  std::vector<uint8_t> model() const {
    Bytes b;
    for (int32_t v : {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq_len}) b.pod(v);
    const int32_t kv_dim = dim / heads * kv_heads, head_size = dim / heads;
    const int32_t sizes[] = {vocab * dim, layers * dim, layers * dim * dim, layers * kv_dim * dim,
                             layers * kv_dim * dim, layers * dim * dim, layers * dim,
                             layers * hidden * dim, layers * dim * hidden, layers * hidden * dim,
                             dim, seq_len * head_size / 2, seq_len * head_size / 2, vocab * dim};
    const int n_arrays = shared ? 13 : 14;
    for (int a = 0; a < n_arrays; ++a)
      for (int32_t i = 0; i < sizes[a]; ++i) b.pod(static_cast<float>(a * 10000 + i));
    return b.data;
  }
  static std::vector<uint8_t> tokenizer(const std::vector<std::string>& pieces) {
    Bytes b;
    b.pod<int32_t>(8);
    for (size_t i = 0; i < pieces.size(); ++i)
      b.pod<float>(-static_cast<float>(i)).pod<int32_t>(static_cast<int32_t>(pieces[i].size())).raw(pieces[i]);
    return b.data;
  }
};

float first_float(const GgufTensorInfo& t) {
  float x;
  std::memcpy(&x, t.data, 4);
  return x;
}
float last_float(const GgufTensorInfo& t) {
  float x;
  std::memcpy(&x, t.data + t.n_bytes - 4, 4);
  return x;
}

TEST(Llama2cImport, SyntheticLayoutAndVocabulary) {
  const std::string dir = testing::temp_dir();
  const Synthetic s;
  write_bytes(dir + "/syn.bin", s.model());
  write_bytes(dir + "/syn_tok.bin",
              Synthetic::tokenizer({"junk", "\n<s>\n", "\n</s>\n", "<0x0A>", " the", ""}));
  // Default context: llama.cpp's 128, capped at this checkpoint's seq_len 4.
  const Llama2cConfig c = convert_llama2c(dir + "/syn.bin", dir + "/syn_tok.bin", dir + "/syn.gguf");
  EXPECT_FALSE(c.shared_classifier);
  EXPECT_EQ(c.vocab_size, 6);
  auto f = GgufFile::open(dir + "/syn.gguf");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81the", ""}));
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 3, 3, 6, 1, 3}));
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores"),
            (std::vector<float>{0.f, -1.f, -2.f, -3.f, -4.f, -5.f}));
  EXPECT_EQ(f->get_u32("llama.context_length"), 4u);
  EXPECT_EQ(f->get_u32("llama.rope.dimension_count"), 2u);
  EXPECT_EQ(f->get_u32("llama.attention.head_count_kv"), 2u);

  // (tensor, source array, first index, last index, dims)
  struct Expect { std::string name; int array; int first, last; std::vector<int64_t> dims; };
  const std::vector<Expect> expects = {
      {"token_embd.weight", 0, 0, 47, {8, 6}},
      {"output.weight", 13, 0, 47, {8, 6}},  // the separate classifier
      {"output_norm.weight", 10, 0, 7, {8}},
      {"blk.0.attn_norm.weight", 1, 0, 7, {8}},
      {"blk.1.attn_norm.weight", 1, 8, 15, {8}},
      {"blk.1.attn_q.weight", 2, 64, 127, {8, 8}},
      {"blk.1.attn_k.weight", 3, 32, 63, {8, 4}},
      {"blk.0.attn_v.weight", 4, 0, 31, {8, 4}},
      {"blk.1.attn_output.weight", 5, 64, 127, {8, 8}},
      {"blk.1.ffn_norm.weight", 6, 8, 15, {8}},
      {"blk.1.ffn_gate.weight", 7, 96, 191, {8, 12}},
      {"blk.0.ffn_down.weight", 8, 0, 95, {12, 8}},
      {"blk.1.ffn_up.weight", 9, 96, 191, {8, 12}},
  };
  for (const auto& e : expects) {
    const GgufTensorInfo& t = f->tensor(e.name);
    EXPECT_EQ(t.dims, e.dims) << e.name;
    EXPECT_EQ(first_float(t), static_cast<float>(e.array * 10000 + e.first)) << e.name;
    EXPECT_EQ(last_float(t), static_cast<float>(e.array * 10000 + e.last)) << e.name;
  }
}

TEST(Llama2cImport, BadCheckpoints) {
  const std::string dir = testing::temp_dir();
  const std::string tok = dir + "/bad_tok.bin";
  write_bytes(tok, Synthetic::tokenizer({"a", "b", "c", "d", "e", "f"}));
  const std::string bin = dir + "/bad.bin";
  const std::string out = dir + "/bad.gguf";
  const std::vector<uint8_t> good = Synthetic().model();

  write_bytes(bin, {});
  expect_error([&] { convert_llama2c(bin, tok, out); }, {bin, "truncated", "header"});
  for (size_t n : {size_t{10}, size_t{28}, size_t{100}, good.size() - 4}) {
    write_bytes(bin, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(n)));
    expect_error([&] { convert_llama2c(bin, tok, out); },
                 {bin, "truncated", std::to_string(n)});
  }
  auto longer = good;
  longer.resize(good.size() + 4);
  write_bytes(bin, longer);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {bin, "more than"});

  auto with_header = [&](int field, int32_t value) {
    auto b = good;
    std::memcpy(b.data() + 4 * field, &value, 4);
    write_bytes(bin, b);
  };
  with_header(0, -64);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {bin, "absurd", "dim = -64"});
  with_header(0, 1 << 30);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {"absurd", "dim = 1073741824"});
  with_header(3, 0);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {"absurd", "n_heads = 0"});
  with_header(4, 3);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {"n_heads 4", "n_kv_heads 3"});
  with_header(5, std::numeric_limits<int32_t>::min());
  expect_error([&] { convert_llama2c(bin, tok, out); }, {"absurd", "vocab_size"});
  with_header(0, 0x616b3432);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {"ak42", "legacy"});
  expect_error([&] { convert_llama2c(dir + "/missing.bin", tok, out); }, {"missing.bin"});
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Llama2cImport, BadTokenizers) {
  const std::string dir = testing::temp_dir();
  const std::string bin = dir + "/tokcheck.bin";
  write_bytes(bin, Synthetic().model());
  const std::string tok = dir + "/tokcheck_tok.bin";
  const std::string out = dir + "/tokcheck.gguf";
  write_bytes(tok, Synthetic::tokenizer({"a", "b", "c", "d", "e"}));  // one token short
  expect_error([&] { convert_llama2c(bin, tok, out); }, {tok, "truncated", "token 5"});
  write_bytes(tok, Synthetic::tokenizer({"a", "b", "c", "d", "e", "f", "g"}));  // one too many
  expect_error([&] { convert_llama2c(bin, tok, out); }, {tok, "does not match", "vocab_size 6"});
  Bytes neg;
  neg.pod<int32_t>(8).pod<float>(0.f).pod<int32_t>(-5);
  write_bytes(tok, neg.data);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {tok, "token 0", "length -5"});
  Bytes huge;
  huge.pod<int32_t>(8).pod<float>(0.f).pod<int32_t>(1 << 30).raw("abc");
  write_bytes(tok, huge.data);
  expect_error([&] { convert_llama2c(bin, tok, out); }, {tok, "length 1073741824"});
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace specdec
