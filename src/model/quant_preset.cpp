// Quantization presets and per-tensor type rules, after llama.cpp's `quantize`
// (llama_tensor_get_type, non-imatrix paths, Llama architecture).
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "specdec/error.h"
#include "specdec/make_model.h"

namespace specdec {

namespace {

struct PresetEntry {
  const char* name;
  DType base;
  uint32_t file_type;  // llama_ftype
};

constexpr PresetEntry kPresets[] = {
    {"F32", DType::F32, 0},      {"F16", DType::F16, 1},      {"BF16", DType::BF16, 32},
    {"Q4_0", DType::Q4_0, 2},    {"Q4_1", DType::Q4_1, 3},    {"Q5_0", DType::Q5_0, 8},
    {"Q5_1", DType::Q5_1, 9},    {"Q8_0", DType::Q8_0, 7},    {"Q2_K", DType::Q2_K, 10},
    {"Q3_K_S", DType::Q3_K, 11}, {"Q3_K_M", DType::Q3_K, 12}, {"Q3_K_L", DType::Q3_K, 13},
    {"Q4_K_S", DType::Q4_K, 14}, {"Q4_K_M", DType::Q4_K, 15}, {"Q5_K_S", DType::Q5_K, 16},
    {"Q5_K_M", DType::Q5_K, 17}, {"Q6_K", DType::Q6_K, 18},
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Layer index of "blk.N.xxx", or -1.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
         (i_layer - n_layers / 8) % 3 == 2;
}

bool is_k_quant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K;
}

// K-quants need rows that are a multiple of 256; llama.cpp falls back to a legacy type.
DType fallback_for_row(DType t, int64_t n_per_row) {
  if (!is_k_quant(t) || n_per_row % 256 == 0) return t;
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    default: return DType::Q4_0;  // Q2_K, Q3_K (llama.cpp: IQ4_NL)
  }
}

}  // namespace

QuantPreset quant_preset(const std::string& name, bool pure) {
  std::string upper = name;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "Q3_K" || upper == "Q4_K" || upper == "Q5_K") upper += "_M";
  for (const auto& e : kPresets)
    if (upper == e.name) return QuantPreset{e.name, e.base, e.file_type, pure};
  std::string valid;
  for (const auto& n : quant_preset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error("unknown quantization type '" + name + "' (valid: " + valid + ")");
}

std::vector<std::string> quant_preset_names() {
  std::vector<std::string> names;
  for (const auto& e : kPresets) names.emplace_back(e.name);
  return names;
}

DType preset_tensor_type(const QuantPreset& preset, const std::string& tensor_name,
                         const std::vector<int64_t>& dims, const TensorTypeContext& context) {
  if (dims.size() != 2 || !ends_with(tensor_name, ".weight")) return DType::F32;
  const DType base = preset.base_type;
  if (base == DType::F32 || base == DType::F16 || base == DType::BF16) return base;
  const int64_t n_per_row = dims[0];
  if (preset.pure) return fallback_for_row(base, n_per_row);

  const std::string& p = preset.name;
  const int i_layer = layer_of(tensor_name);
  const int n_layers = context.n_layers;
  DType type = base;
  const bool is_output = tensor_name == "output.weight" ||
                         (!context.has_output && tensor_name == "token_embd.weight");
  if (is_output) {
    if (n_per_row % 256 != 0) type = DType::Q8_0;
    else if (base != DType::Q8_0) type = DType::Q6_K;
  } else if (ends_with(tensor_name, "attn_v.weight") && i_layer >= 0) {
    if (p == "Q2_K") type = context.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (p == "Q3_K_M") type = i_layer < 2 ? DType::Q5_K : DType::Q4_K;
    else if (p == "Q3_K_L") type = DType::Q5_K;
    else if ((p == "Q4_K_M" || p == "Q5_K_M") && use_more_bits(i_layer, n_layers)) type = DType::Q6_K;
    else if (p == "Q4_K_S" && i_layer < 4) type = DType::Q5_K;
  } else if (ends_with(tensor_name, "ffn_down.weight") && i_layer >= 0) {
    if (p == "Q2_K") type = DType::Q3_K;
    else if (p == "Q3_K_M") type = i_layer < n_layers / 16 ? DType::Q5_K : DType::Q4_K;
    else if (p == "Q3_K_L") type = DType::Q5_K;
    else if ((p == "Q4_K_M" || p == "Q5_K_M") && use_more_bits(i_layer, n_layers)) type = DType::Q6_K;
    else if (p == "Q4_K_S" && i_layer < n_layers / 8) type = DType::Q5_K;
  } else if (ends_with(tensor_name, "attn_output.weight")) {
    if (p == "Q2_K") type = DType::Q3_K;
    else if (p == "Q3_K_M") type = DType::Q4_K;
    else if (p == "Q3_K_L") type = DType::Q5_K;
  }
  return fallback_for_row(type, n_per_row);
}

}  // namespace specdec
