// Loading Medusa heads and EAGLE layers (docs/HEADS.md): valid files load; a foreign target's
// fingerprint, a wrong architecture, missing keys and tensors, wrong shapes and unknown tensors
// are Errors naming the file and the offending item.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "spec/heads_setup.h"
#include "specdec/error.h"
#include "specdec/heads_drafter.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::HeadsFileFaults;

// Expects `load` to throw an Error whose message contains every one of `needles`.
void expect_error(const std::function<void()>& load, const std::vector<std::string>& needles, const std::string& label) {
  try {
    load();
    ADD_FAILURE() << label << ": loaded without an error";
  } catch (const Error& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << label << ": '" << needle << "' not in: " << e.what();
    }
  }
}

struct Fault {
  std::string label;
  HeadsFileFaults faults;
  std::string needle;
};

std::vector<Fault> faults_for(const std::string& arch, const std::string& tensor) {
  std::vector<Fault> f;
  f.push_back({"architecture", {}, "general.architecture"});
  f.back().faults.architecture = "llama";
  f.push_back({"missing tensor", {}, tensor});
  f.back().faults.skip_tensor = tensor;
  f.push_back({"wrong shape", {}, tensor});
  f.back().faults.misshape_tensor = tensor;
  f.push_back({"unknown tensor", {}, "extra.weight"});
  f.back().faults.extra_tensor = true;
  f.push_back({"embedding length", {}, arch + ".embedding_length"});
  f.back().faults.n_embd_delta = 8;
  f.push_back({"missing fingerprint", {}, "specdec.target.fingerprint"});
  f.back().faults.skip_key = "specdec.target.fingerprint";
  return f;
}

TEST(HeadsFiles, ValidFilesLoadWithTheirShapes) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  auto heads = MedusaHeads::load(testing::micro_heads().medusa, *target);
  EXPECT_EQ(heads->n_heads(), 4);
  EXPECT_EQ(heads->n_blocks(), 1);
  EXPECT_EQ(heads->n_embd(), target->config().n_embd);
  auto layer = EagleLayer::load(testing::micro_heads().eagle, *target);
  EXPECT_EQ(layer->config().n_layers, 1);
  EXPECT_EQ(layer->config().n_heads, 2);
  EXPECT_EQ(layer->config().n_kv_heads, 1);
  EXPECT_EQ(layer->config().n_ff, 64);
  EXPECT_TRUE(layer->fuse_layers().empty());
  EXPECT_EQ(layer->feature_width(), target->config().n_embd);
  auto fused = EagleLayer::load(testing::micro_heads().eagle_fused, *target);
  EXPECT_EQ(fused->fuse_layers(), testing::micro_heads().fuse_layers);
  EXPECT_EQ(fused->feature_width(),
            static_cast<int>(testing::micro_heads().fuse_layers.size() + 1) * target->config().n_embd);
}

TEST(HeadsFiles, ForeignTargetIsAnErrorNamingBothFilesAndFingerprints) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  auto other = testing::load_single_threaded(testing::micro_trio().unrelated);  // same shapes, other seed
  auto tiny = testing::load_single_threaded(testing::tiny_trio().target);       // another vocabulary
  const std::string fp = target_fingerprint(*target);
  EXPECT_EQ(fp, target_fingerprint(*other));  // same tokenizer and shapes: heads would be accepted
  for (const std::string& file : {testing::micro_heads().medusa, testing::micro_heads().eagle}) {
    const bool medusa = file == testing::micro_heads().medusa;
    expect_error([&] { medusa ? (void)MedusaHeads::load(file, *tiny) : (void)EagleLayer::load(file, *tiny); },
                 {file, testing::tiny_trio().target, fp, target_fingerprint(*tiny)}, file);
  }
  testing::MedusaFileSpec spec;
  spec.faults.fingerprint = "0123456789abcdef";
  const std::string path = testing::temp_dir() + "/heads_foreign_medusa.gguf";
  testing::write_random_medusa(path, *target, spec);
  expect_error([&] { MedusaHeads::load(path, *target); }, {path, "0123456789abcdef", fp}, "planted fingerprint");
}

TEST(HeadsFiles, MalformedMedusaFilesAreClearErrors) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  std::vector<Fault> faults = faults_for("medusa", "medusa.2.blk.0.weight");
  faults.push_back({"missing head count", {}, "medusa.head_count"});
  faults.back().faults.skip_key = "medusa.head_count";
  faults.push_back({"bias shape", {}, "medusa.0.blk.0.bias"});
  faults.back().faults.misshape_tensor = "medusa.0.blk.0.bias";
  for (const Fault& f : faults) {
    testing::MedusaFileSpec spec;
    spec.faults = f.faults;
    const std::string path = testing::temp_dir() + "/heads_bad_medusa.gguf";
    testing::write_random_medusa(path, *target, spec);
    expect_error([&] { MedusaHeads::load(path, *target); }, {path, f.needle}, "medusa " + f.label);
  }
  expect_error([&] { MedusaHeads::load(testing::temp_dir() + "/no_such_heads.gguf", *target); }, {"no_such_heads.gguf"},
               "missing file");
}

TEST(HeadsFiles, MalformedEagleFilesAreClearErrors) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  std::vector<Fault> faults = faults_for("eagle", "eagle.fc.weight");
  for (const char* key : {"eagle.feed_forward_length", "eagle.attention.head_count", "eagle.rope.freq_base",
                          "eagle.attention.layer_norm_rms_epsilon", "eagle.context_length", "eagle.block_count"}) {
    faults.push_back({std::string("missing ") + key, {}, key});
    faults.back().faults.skip_key = key;
  }
  for (const char* tensor : {"blk.0.attn_k.weight", "blk.0.ffn_down.weight", "eagle.fc.bias"}) {
    faults.push_back({std::string("shape of ") + tensor, {}, tensor});
    faults.back().faults.misshape_tensor = tensor;
  }
  for (const Fault& f : faults) {
    testing::EagleFileSpec spec;
    spec.faults = f.faults;
    const std::string path = testing::temp_dir() + "/heads_bad_eagle.gguf";
    testing::write_random_eagle(path, *target, spec);
    expect_error([&] { EagleLayer::load(path, *target); }, {path, f.needle}, "eagle " + f.label);
  }
  // EAGLE-3 style fusion: block indices, the fuse matrix's presence and shape.
  struct FuseFault { const char* label; std::vector<int32_t> layers; HeadsFileFaults faults; const char* needle; };
  const int n_layers = target->config().n_layers;
  std::vector<FuseFault> fuse_faults = {
      {"fuse layer past the target", {n_layers}, {}, "eagle.fuse_layers holds"},
      {"negative fuse layer", {-1}, {}, "eagle.fuse_layers holds -1"},
      {"repeated fuse layer", {0, 0}, {}, "eagle.fuse_layers holds 0"},
      {"missing fuse matrix", {0}, {}, "eagle.fuse.weight"},
      {"misshaped fuse matrix", {0}, {}, "eagle.fuse.weight"},
  };
  fuse_faults[3].faults.skip_tensor = "eagle.fuse.weight";
  fuse_faults[4].faults.misshape_tensor = "eagle.fuse.weight";
  for (const FuseFault& f : fuse_faults) {
    testing::EagleFileSpec spec;
    spec.fuse_layers = f.layers;
    spec.faults = f.faults;
    const std::string path = testing::temp_dir() + "/heads_bad_eagle_fuse.gguf";
    testing::write_random_eagle(path, *target, spec);
    expect_error([&] { EagleLayer::load(path, *target); }, {path, f.needle}, std::string("eagle ") + f.label);
  }
  testing::EagleFileSpec heads3;
  heads3.n_heads = 3;  // 32 is not a multiple of 3
  const std::string path = testing::temp_dir() + "/heads_bad_eagle_heads.gguf";
  testing::write_random_eagle(path, *target, heads3);
  expect_error([&] { EagleLayer::load(path, *target); }, {path, "head_count 3"}, "eagle head count");
}

// eagle.draft_vocab: the layer scores its ids with the target's output rows (bit for bit the
// full head's values) and gives every other id -inf; malformed lists name the file and value.
TEST(HeadsFiles, EagleDraftVocabulary) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  const auto& files = testing::tiny_heads();
  auto layer = EagleLayer::load(files.eagle_vocab, *target);
  ASSERT_EQ(layer->draft_vocab(), std::vector<Token>(files.draft_vocab.begin(), files.draft_vocab.end()));
  EXPECT_TRUE(EagleLayer::load(files.eagle, *target)->draft_vocab().empty());
  const int n_vocab = target->config().n_vocab, n_embd = target->config().n_embd;
  const uint64_t seed = testing::test_seed("HeadsFiles.EagleDraftVocabulary");
  Rng rng(seed);
  for (int n_rows : {1, 3, 9}) {
    std::vector<float> g(static_cast<size_t>(n_rows * n_embd));  // (n_rows, n_embd)
    for (float& v : g) v = static_cast<float>(rng.uniform() * 2.0 - 1.0);
    std::vector<float> full(static_cast<size_t>(n_rows * n_vocab)), reduced(full.size());  // (n_rows, n_vocab)
    target->output_head(g.data(), n_rows, full.data());
    layer->draft_logits(g.data(), n_rows, reduced.data());
    for (int r = 0; r < n_rows; ++r) {
      for (int id = 0; id < n_vocab; ++id) {
        const size_t i = static_cast<size_t>(r * n_vocab + id);
        if (id % 3 != 1) {
          ASSERT_EQ(std::memcmp(&reduced[i], &full[i], sizeof(float)), 0) << "row " << r << " id " << id;
        } else {
          ASSERT_EQ(reduced[i], -std::numeric_limits<float>::infinity()) << "row " << r << " id " << id;
        }
      }
    }
  }
  struct Bad { std::vector<int32_t> ids; std::string message; };
  for (const Bad& bad : {Bad{{3, 1}, "holds 1 at index 1"}, Bad{{2, 2}, "holds 2 at index 1"},
                         Bad{{0, n_vocab}, "holds " + std::to_string(n_vocab)}, Bad{{-1, 4}, "holds -1"}, Bad{{}, "is empty"}}) {
    testing::EagleFileSpec spec;
    spec.draft_vocab = bad.ids;
    spec.write_empty_draft_vocab = bad.ids.empty();
    const std::string path = testing::temp_dir() + "/heads_bad_eagle_vocab.gguf";
    testing::write_random_eagle(path, *target, spec);
    expect_error([&] { EagleLayer::load(path, *target); }, {path, "eagle.draft_vocab", bad.message}, bad.message);
  }
}

TEST(HeadsFiles, MedusaChoicesAreValidated) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  auto heads = MedusaHeads::load(testing::micro_heads().medusa, *target);
  for (const std::vector<std::vector<int>>& bad :
       {std::vector<std::vector<int>>{{0, 0}}, {{0}, {0}}, {{0}, {-1}}, {{0}, {}}}) {
    MedusaOptions options;
    options.choices = bad;
    EXPECT_THROW(MedusaDrafter(*target, *heads, options), Error);
  }
  EXPECT_EQ(MedusaDrafter::default_choices().size(), 63u);
  EXPECT_TRUE(heads->tree().empty());  // no medusa.tree_choices in the file
  MedusaOptions ok;  // the default tree is valid
  EXPECT_NO_THROW(MedusaDrafter(*target, *heads, ok));
}

// medusa.tree_choices (docs/HEADS.md): parsed at load, malformed text is an Error naming the
// file, the key and the bad choice; a tree breaking the prefix rule fails when a drafter uses it.
TEST(HeadsFiles, MedusaTreeChoicesKey) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  const std::string path = testing::temp_dir() + "/heads_tree_medusa.gguf";
  testing::MedusaFileSpec spec;
  spec.tree = "2;0;2,1;0,0;2,1,10";
  testing::write_random_medusa(path, *target, spec);
  auto heads = MedusaHeads::load(path, *target);
  EXPECT_EQ(heads->tree(), (std::vector<std::vector<int>>{{2}, {0}, {2, 1}, {0, 0}, {2, 1, 10}}));
  for (const std::string& bad : {std::string("0;;1"), std::string("0;1,x"), std::string("0,"), std::string(";"),
                                 std::string("0;-1"), std::string("1 ;2")}) {
    spec.tree = bad;
    testing::write_random_medusa(path, *target, spec);
    expect_error([&] { MedusaHeads::load(path, *target); }, {path, "medusa.tree_choices"}, "tree '" + bad + "'");
  }
  spec.tree = "0;1;0,0,0;0,0";  // {0, 0, 0} before its prefix {0, 0}
  testing::write_random_medusa(path, *target, spec);
  heads = MedusaHeads::load(path, *target);
  expect_error([&] { MedusaDrafter(*target, *heads); }, {path, "choice 2"}, "prefix rule");
}

}  // namespace
}  // namespace specdec
