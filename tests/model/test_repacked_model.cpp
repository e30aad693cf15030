// Q8_0, Q4_K_M, Q3_K_M, Q2_K, Q4_0, Q5_1, F16, BF16 and F32 models (K-quant, legacy and float types) loaded with their weights repacked for the
// AVX2 or AVX-512 kernels (ModelOptions::repack_weights, the default) give bit for bit the logits of the
// same model read in place, for single-row decoding and for a multi-row batch, also after the
// tests switch to another ISA; and the output head really is repacked (the path under test is
// taken).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/testing.h"
#include "model/model_test_util.h"
#include "specdec/cpu.h"
#include "specdec/gguf.h"
#include "specdec/kernels.h"
#include "specdec/make_model.h"
#include "specdec/model.h"

namespace specdec {
namespace {

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

// Small Llamas with a vocabulary of 300 rows (a partial last tile) and an untied output.
//  - narrow (rows of 96 and 160 values: 3 and 5 blocks of 32, odd pair counts): Q8_0, or with
//    the Q4_K_M preset the legacy types llama.cpp falls back to for such rows (Q5_0, read in
//    place, next to repacked Q8_0 tensors);
//  - wide (rows of 256 and 768 values: 1 and 3 super-blocks), Q4_K_M: Q4_K and Q6_K tensors;
//    Q3_K_M and Q2_K: Q3_K and Q2_K tensors next to the presets' upgrades;
//    Q4_0 and Q5_1: the layers in those legacy types (repacked on both SIMD paths), the output in Q6_K;
//  - F16, BF16, F32 (FloatRows8 on both SIMD paths, as every row length here is a multiple of 16).
std::string make_test_model(const std::string& preset, bool wide, bool tied = false) {
  ModelShape shape;
  shape.name = "repack-test";
  shape.n_embd = wide ? 256 : 96, shape.n_layers = 2, shape.n_heads = wide ? 4 : 3, shape.n_kv_heads = 1;
  shape.n_ff = wide ? 768 : 160, shape.n_vocab = 300, shape.n_ctx = 64, shape.tied_output = tied;
  const std::string path = testing::temp_dir() + "/repack-" + preset + (wide ? "-wide" : "-narrow") + (tied ? "-tied" : "") + ".gguf";
  make_model(shape, quant_preset(preset), 11, path, nullptr);
  return path;
}

bool holds_type(const Transformer& model, DType type) {
  for (const GgufTensorInfo& t : model.gguf().tensors()) if (t.type == type) return true;
  return false;
}

std::vector<float> batch_logits(Transformer& model, const std::vector<Token>& tokens) {
  KvCache cache = model.new_cache();
  Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, true);  // a chain
  Logits out;
  KvCache* caches[] = {&cache};
  model.forward(batch, caches, out);
  return out.data;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(RepackedModel, LogitsEqualTheInPlaceModelBitForBit) {
  bool has_avx2 = false;
  for (Isa isa : supported_isas()) has_avx2 |= isa == Isa::Avx2;
  if (!has_avx2) GTEST_SKIP() << "this CPU has no AVX2: weights are never repacked";
  IsaGuard guard;
  struct Case {
    const char* preset;
    bool wide;
    DType must_hold;  // a type the case's file must hold
    bool tied = false;  // output head = token_embd (repacked as the head, embed() gathers rows back)
  };
  for (Isa load_isa : supported_isas()) {  // repacked while each SIMD path is active
    if (load_isa == Isa::Scalar) continue;
    for (const Case& c : {Case{"Q8_0", false, DType::Q8_0}, Case{"Q4_K_M", true, DType::Q4_K}, Case{"Q4_K_M", false, DType::Q5_0},
                          Case{"Q4_0", true, DType::Q4_0}, Case{"Q5_1", true, DType::Q5_1},
                          Case{"Q3_K_M", true, DType::Q3_K}, Case{"Q2_K", true, DType::Q2_K},
                          Case{"Q8_0", false, DType::Q8_0, true}, Case{"Q4_K_M", true, DType::Q4_K, true},
                          Case{"F16", true, DType::F16}, Case{"BF16", false, DType::BF16, true}, Case{"F32", false, DType::F32}}) {
      const std::string preset = std::string(c.preset) + (c.wide ? " wide" : " narrow") + (c.tied ? " tied" : "") +
                                 " loaded on " + isa_name(load_isa);
      set_active_isa(load_isa);
      const std::string path = make_test_model(c.preset, c.wide, c.tied);
      ModelOptions repack, in_place;
      repack.n_threads = 2;
      in_place.n_threads = 2;
      in_place.repack_weights = false;
      auto a = Transformer::load(path, repack);
      auto b = Transformer::load(path, in_place);
      ASSERT_TRUE(holds_type(*a, c.must_hold)) << preset;
      ASSERT_EQ(a->gguf().find_tensor("output.weight") == nullptr, c.tied) << preset;
      ASSERT_NE(a->output_matrix().layout, WeightLayout::RowMajor) << preset;
      ASSERT_EQ(b->output_matrix().layout, WeightLayout::RowMajor);
      EXPECT_EQ(b->repacked_weight_bytes(), 0u);
      if (c.wide && (c.must_hold == DType::Q4_0 || c.must_hold == DType::Q5_1)) {
        // The layers' legacy tensors (rows of 256 and 768 values) are repacked on both SIMD paths.
        size_t legacy_bytes = 0;
        for (const GgufTensorInfo& t : a->gguf().tensors())
          if (t.type == c.must_hold && t.name.rfind("blk.", 0) == 0) legacy_bytes += t.n_bytes;
        ASSERT_GT(legacy_bytes, 0u) << preset;
        EXPECT_GE(a->repacked_weight_bytes(), legacy_bytes) << preset << " loaded on " << isa_name(load_isa);
      }
      const std::vector<Token> tokens = {1, 17, 250, 3, 99, 42, 7, 299, 150, 5, 61};
      EXPECT_TRUE(same_bits(testing::decode_one_at_a_time(*a, tokens), testing::decode_one_at_a_time(*b, tokens))) << preset;
      EXPECT_TRUE(same_bits(batch_logits(*a, tokens), batch_logits(*b, tokens))) << preset;
      // Another path after loading (as the kernel tests do): the repacked model follows it exactly.
      for (Isa isa : supported_isas()) {
        set_active_isa(isa);
        EXPECT_TRUE(same_bits(batch_logits(*a, tokens), batch_logits(*b, tokens))) << preset << " " << isa_name(isa);
      }
    }
  }
}

TEST(RepackedModel, TheSimdPathsRepackAndTheScalarPathDoesNot) {
  IsaGuard guard;
  const std::string path = make_test_model("Q8_0", false);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    auto model = Transformer::load(path);
    const WeightLayout expected = isa == Isa::Avx512                         ? WeightLayout::Q8_0Tiles16
                                  : isa == Isa::Avx2 || isa == Isa::Avx2Vnni ? WeightLayout::Q8_0Tiles8
                                                                             : WeightLayout::RowMajor;
    EXPECT_EQ(model->output_matrix().layout, expected)
        << isa_name(isa);
  }
}

}  // namespace
}  // namespace specdec
