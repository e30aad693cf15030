// ModelConfig from metadata (required keys, llama.cpp defaults, architectures) and clear
// errors for bad files and bad batches.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"

namespace specdec::testing {
namespace {

// Copies a GGUF, letting `edit_kv` drop (return false) or change metadata and `edit_tensor`
// change a tensor's name/dims or drop it (return false).
void copy_gguf(const std::string& src, const std::string& dst,
               const std::function<bool(const std::string&, GgufValue&)>& edit_kv,
               const std::function<bool(std::string&, std::vector<int64_t>&)>& edit_tensor = nullptr) {
  auto in = GgufFile::open(src);
  GgufWriter w;
  for (auto [key, value] : in->metadata()) {
    if (edit_kv(key, value)) w.set(key, value);
  }
  for (const GgufTensorInfo& t : in->tensors()) {
    std::string name = t.name;
    std::vector<int64_t> dims = t.dims;
    if (edit_tensor && !edit_tensor(name, dims)) continue;
    w.add_tensor(name, t.type, dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  w.write(dst);
}

std::string tiny_llama(const std::string& name, TinyModelSpec spec = {}) { return make_random_llama(name, spec); }

template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelConfig, Stories260KUsesLlamaCppDefaults) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto gguf = GgufFile::open(path);
  const ModelConfig c = read_model_config(*gguf);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_ctx_train, 128);
  EXPECT_EQ(c.rope.n_rot, 8);
  EXPECT_EQ(c.rope.freq_base, 10000.0f);  // absent from the file: llama.cpp's default
  EXPECT_EQ(c.rope.freq_scale, 1.0f);
  EXPECT_EQ(c.rope.layout, RopeLayout::Norm);
  EXPECT_FALSE(c.tied_output);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
}

TEST(ModelConfig, Qwen2HasBiasesNeoxRopeAndTiedOutput) {
  SPECDEC_FIXTURE(path, "arch/tiny-qwen2.gguf");
  auto model = Transformer::load(path, ModelOptions{1});
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.rope.layout, RopeLayout::Neox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.rope.freq_base, 1e6f);
  EXPECT_EQ(c.rope.freq_factors, nullptr);
}

TEST(ModelConfig, Llama3RopeFrequencyFactorsAreLoaded) {
  SPECDEC_FIXTURE(path, "arch/tiny-llama3rope.gguf");
  auto model = Transformer::load(path, ModelOptions{1});
  ASSERT_NE(model->config().rope.freq_factors, nullptr);
  EXPECT_EQ(model->config().rope.n_rot, 32);
}

TEST(ModelConfig, OptionalKeysDefaultAndLinearScaling) {
  const std::string src = tiny_llama("config-src.gguf");
  const std::string dst = temp_dir() + "/config-defaults.gguf";
  copy_gguf(src, dst, [](const std::string& key, GgufValue&) {
    return key != "llama.rope.freq_base" && key != "llama.rope.dimension_count" &&
           key != "llama.attention.head_count_kv";
  });
  auto gguf = GgufFile::open(dst);
  const ModelConfig c = read_model_config(*gguf);
  EXPECT_EQ(c.rope.freq_base, 10000.0f);
  EXPECT_EQ(c.rope.n_rot, c.head_dim);
  EXPECT_EQ(c.n_kv_heads, c.n_heads);

  GgufWriter w;
  auto src_file = GgufFile::open(src);
  for (const auto& [key, value] : src_file->metadata()) w.set(key, value);
  w.set_string("llama.rope.scaling.type", "linear");
  w.set_f32("llama.rope.scaling.factor", 4.0f);
  const std::string scaled = temp_dir() + "/config-linear.gguf";
  w.write(scaled);
  EXPECT_EQ(read_model_config(*GgufFile::open(scaled)).rope.freq_scale, 0.25f);

  w.set_string("llama.rope.scaling.type", "yarn");
  const std::string yarn = temp_dir() + "/config-yarn.gguf";
  w.write(yarn);
  const std::string message = error_message([&] { read_model_config(*GgufFile::open(yarn)); });
  EXPECT_NE(message.find("yarn"), std::string::npos) << message;
}

TEST(ModelErrors, MissingRequiredKeyNamesIt) {
  const std::string src = tiny_llama("missing-key-src.gguf");
  for (const char* key : {"llama.embedding_length", "llama.block_count", "llama.attention.head_count",
                          "llama.feed_forward_length", "llama.context_length",
                          "llama.attention.layer_norm_rms_epsilon", "tokenizer.ggml.tokens",
                          "general.architecture"}) {
    const std::string dst = temp_dir() + "/missing-key.gguf";
    copy_gguf(src, dst, [&](const std::string& k, GgufValue&) { return k != key; });
    const std::string message = error_message([&] { Transformer::load(dst, ModelOptions{1}); });
    EXPECT_NE(message.find(key), std::string::npos) << key << ": " << message;
    EXPECT_NE(message.find("missing"), std::string::npos) << key << ": " << message;
  }
}

TEST(ModelErrors, UnknownArchitectureListsSupportedOnes) {
  const std::string src = tiny_llama("arch-src.gguf");
  const std::string dst = temp_dir() + "/arch-gptneox.gguf";
  copy_gguf(src, dst, [](const std::string& key, GgufValue& value) {
    if (key == "general.architecture") value.value = std::string("gptneox");
    return true;
  });
  const std::string message = error_message([&] { Transformer::load(dst, ModelOptions{1}); });
  EXPECT_NE(message.find("gptneox"), std::string::npos) << message;
  EXPECT_NE(message.find("llama, qwen2"), std::string::npos) << message;
}

TEST(ModelErrors, WrongTensorShapeOrMissingTensorNamesTheTensor) {
  const std::string src = tiny_llama("shape-src.gguf");
  const std::string dst = temp_dir() + "/shape-bad.gguf";
  copy_gguf(src, dst, [](const std::string&, GgufValue&) { return true; },
            [](std::string& name, std::vector<int64_t>& dims) {
              if (name == "blk.1.attn_k.weight") std::swap(dims[0], dims[1]);
              return true;
            });
  std::string message = error_message([&] { Transformer::load(dst, ModelOptions{1}); });
  EXPECT_NE(message.find("blk.1.attn_k.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("shape"), std::string::npos) << message;

  copy_gguf(src, dst, [](const std::string&, GgufValue&) { return true; },
            [](std::string& name, std::vector<int64_t>&) { return name != "blk.0.ffn_up.weight"; });
  message = error_message([&] { Transformer::load(dst, ModelOptions{1}); });
  EXPECT_NE(message.find("blk.0.ffn_up.weight"), std::string::npos) << message;
}

TEST(ModelErrors, PromptLongerThanContextIsRejectedBeforeTouchingTheCache) {
  TinyModelSpec spec;
  spec.n_ctx = 16;
  auto model = Transformer::load(tiny_llama("ctx16.gguf", spec), ModelOptions{1});
  KvCache cache = model->new_cache();
  EXPECT_EQ(cache.capacity(), 16);
  KvCache* caches[] = {&cache};
  Batch batch;
  Logits logits;
  for (int i = 0; i < 20; ++i) batch.add(5, i, i - 1, 0, i == 19);
  const std::string message = error_message([&] { model->forward(batch, caches, logits); });
  EXPECT_NE(message.find("context length 16"), std::string::npos) << message;
  EXPECT_EQ(cache.size(), 0);
  EXPECT_NE(error_message([&] { model->new_cache(17); }).find("17"), std::string::npos);
}

TEST(ModelErrors, BadBatchesAreRejectedWithTheRowNamed) {
  auto model = Transformer::load(tiny_llama("batch-errors.gguf"), ModelOptions{1});
  KvCache a = model->new_cache(), b = model->new_cache();
  KvCache* caches[] = {&a, &b};
  Logits logits;
  Batch ok;
  ok.add(1, 0, -1, 0, true);
  ok.add(7, 0, -1, 1, true);
  model->forward(ok, caches, logits);
  ASSERT_EQ(a.size(), 1);

  auto expect_rejected = [&](const Batch& batch, const std::string& needle) {
    const std::string message = error_message([&] { model->forward(batch, caches, logits); });
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(a.size(), 1);
    EXPECT_EQ(b.size(), 1);
  };
  Batch bad;
  bad.add(3, 0, -1, 0, true);  // position must be 1 (one cached token)
  expect_rejected(bad, "expected position 1");
  bad.clear();
  bad.add(3, 1, -1, 0, true);
  bad.add(4, 2, 0, 1, true);  // parent belongs to sequence 0
  expect_rejected(bad, "batch row 1");
  bad.clear();
  bad.add(model->config().n_vocab, 1, -1, 0, true);
  expect_rejected(bad, "token id " + std::to_string(model->config().n_vocab));
  bad.clear();
  bad.add(3, 1, -1, 2, true);
  expect_rejected(bad, "sequence 2");
  bad.clear();
  bad.add(3, 1, 0, 0, true);  // parent must be earlier
  expect_rejected(bad, "parent 0");
}

TEST(ModelErrors, RejectsMatrixOfUnsupportedType) {
  const std::string src = tiny_llama("type-src.gguf");
  auto in = GgufFile::open(src);
  GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  for (const GgufTensorInfo& t : in->tensors()) {
    if (t.name == "blk.0.attn_q.weight") {  // same byte size as I32
      w.add_tensor(t.name, DType::I32, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    } else {
      w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    }
  }
  const std::string dst = temp_dir() + "/type-bad.gguf";
  w.write(dst);
  const std::string message = error_message([&] { Transformer::load(dst, ModelOptions{1}); });
  EXPECT_NE(message.find("blk.0.attn_q.weight"), std::string::npos) << message;
}

}  // namespace
}  // namespace specdec::testing
