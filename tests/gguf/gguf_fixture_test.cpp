// Reading the shared fixtures written by llama.cpp / gguf-py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

using testing::read_bytes;
using testing::write_bytes;

// Copies every metadata entry and tensor of `f` into a writer, in file order.
GgufWriter rewrite(const GgufFile& f) {
  GgufWriter w;
  w.set_alignment(f.alignment());
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const auto& t : f.tensors())
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  return w;
}

TEST(GgufFixtures, Stories260KMetadata) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_u32("llama.context_length"), 128u);
  EXPECT_EQ(f->get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(f->get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f->get_u32("llama.block_count"), 5u);
  EXPECT_EQ(f->get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(f->get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f->get_u32("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(f->get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f->get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f->get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_FALSE(f->has("llama.rope.freq_base"));
  EXPECT_EQ(f->get_f32_or("llama.rope.freq_base", 10000.f), 10000.f);

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").size(), 512u);
  const auto types = f->get_i32_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 2);  // unknown
  EXPECT_EQ(types[1], 3);  // control
  EXPECT_EQ(types[3], 6);  // byte

  EXPECT_EQ(f->tensors().size(), 48u);  // 3 + 5 layers x 9
  const GgufTensorInfo& emb = f->tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::F32);
  EXPECT_EQ(emb.dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.n_bytes, 64u * 512u * 4u);
  EXPECT_EQ(f->tensor("blk.4.attn_k.weight").dims, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f->tensor("blk.0.ffn_down.weight").dims, (std::vector<int64_t>{172, 64}));
  // The last tensor ends exactly at the end of the file.
  const GgufTensorInfo& last = f->tensors().back();
  EXPECT_EQ(last.name, "blk.4.ffn_norm.weight");
  const auto file_size = std::filesystem::file_size(path);
  const auto mapped = read_bytes(path);
  ASSERT_EQ(mapped.size(), file_size);
  EXPECT_EQ(std::memcmp(last.data, mapped.data() + file_size - 256, 256), 0);
}

TEST(GgufFixtures, TinyQ8_0TensorTypes) {
  SPECDEC_FIXTURE(path, "quant/tiny-Q8_0.gguf");
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->get_u32("general.file_type"), 7u);  // MOSTLY_Q8_0
  EXPECT_EQ(f->get_f32("llama.rope.freq_base"), 10000.f);
  ASSERT_EQ(f->tensors().size(), 21u);
  for (const auto& t : f->tensors()) {
    const bool is_norm = t.name.find("norm") != std::string::npos;
    EXPECT_EQ(t.type, is_norm ? DType::F32 : DType::Q8_0) << t.name;
    EXPECT_EQ(t.dims.size(), is_norm ? 1u : 2u) << t.name;
  }
  const GgufTensorInfo& down = f->tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(down.dims, (std::vector<int64_t>{768, 256}));
  EXPECT_EQ(down.n_bytes, 768u / 32u * 34u * 256u);
}

TEST(GgufFixtures, EveryFixtureParses) {
  SPECDEC_FIXTURE(dir, "quant");
  const std::string root = testing::fixtures_dir();
  int n_files = 0;
  for (const char* sub : {"models", "quant", "arch", "tokenizer"}) {
    if (!std::filesystem::exists(root + "/" + sub)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(root + "/" + sub)) {
      if (entry.path().extension() != ".gguf") continue;
      SCOPED_TRACE(entry.path().string());
      std::unique_ptr<GgufFile> f;
      ASSERT_NO_THROW(f = GgufFile::open(entry.path().string()));
      EXPECT_TRUE(f->has("general.architecture"));
      EXPECT_FALSE(f->get_string_array("tokenizer.ggml.tokens").empty());
      ++n_files;
    }
  }
  EXPECT_GE(n_files, 16);
}

// Reading a real file and writing it back through GgufWriter reproduces it byte for byte
// (same metadata order and encoding, same tensor offsets and padding as ggml).
TEST(GgufFixtures, RewriteIsByteIdentical) {
  for (const char* rel : {"models/stories260K.gguf", "quant/tiny-Q8_0.gguf",
                          "tokenizer/ggml-vocab-phi-3.gguf"}) {
    SPECDEC_FIXTURE(path, rel);
    SCOPED_TRACE(path);
    auto f = GgufFile::open(path);
    const std::vector<uint8_t> original = read_bytes(path);
    const std::vector<uint8_t> rewritten = rewrite(*f).to_bytes();
    ASSERT_EQ(rewritten.size(), original.size());
    EXPECT_TRUE(rewritten == original);
  }
}

}  // namespace
}  // namespace specdec
