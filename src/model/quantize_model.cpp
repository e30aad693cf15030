// Quantizing a GGUF file with a llama.cpp preset, streamed (see specdec/make_model.h).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/gguf_stream_writer.h"
#include "model/tensor_row_stream.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/kernels.h"
#include "specdec/make_model.h"

namespace specdec {

namespace {

// Per-tensor rules need the layer count and GQA factor; both come from `<arch>.*` when present.
TensorTypeContext context_of(const GgufFile& in) {
  TensorTypeContext c;
  const std::string arch = in.get_string_or("general.architecture", "llama");
  c.n_layers = static_cast<int>(in.get_u32_or(arch + ".block_count", 0));
  const uint32_t n_heads = in.get_u32_or(arch + ".attention.head_count", 1);
  const uint32_t n_kv_heads = in.get_u32_or(arch + ".attention.head_count_kv", n_heads);
  c.n_gqa = n_kv_heads > 0 ? static_cast<int>(n_heads / n_kv_heads) : 1;
  c.has_output = in.find_tensor("output.weight") != nullptr;
  if (c.n_layers == 0) {  // no metadata: count the blocks
    for (const auto& t : in.tensors())
      if (t.name.rfind("blk.", 0) == 0) c.n_layers = std::max(c.n_layers, std::atoi(t.name.c_str() + 4) + 1);
  }
  return c;
}

bool is_weight_matrix(const GgufTensorInfo& t) {
  return t.dims.size() == 2 && dtype_is_weight_type(t.type) && t.name.size() > 7 &&
         t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
}

}  // namespace

QuantizeModelStats quantize_model(const std::string& in_path, const std::string& out_path,
                                  const QuantPreset& preset, ThreadPool* pool,
                                  const ModelFileProgress& progress) {
  if (in_path == out_path) throw Error("quantize: input and output are the same file '" + in_path + "'");
  auto in = GgufFile::open(in_path);
  const TensorTypeContext context = context_of(*in);

  GgufWriter meta;
  for (const auto& [key, value] : in->metadata()) {
    if (key == "general.alignment" || key == "general.file_type" ||
        key == "general.quantization_version")
      continue;
    meta.set(key, value);
  }
  meta.set_u32("general.quantization_version", 2);
  meta.set_u32("general.file_type", preset.file_type);

  QuantizeModelStats stats;
  std::vector<model_files::StreamTensor> tensors;
  for (const auto& t : in->tensors()) {
    DType type = t.type;
    if (is_weight_matrix(t)) type = preset_tensor_type(preset, t.name, t.dims, context);
    tensors.push_back({t.name, type, t.dims});
    stats.types.emplace_back(t.name, type);
  }

  model_files::GgufStreamWriter writer(out_path, meta, tensors);
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const GgufTensorInfo& t = in->tensors()[i];
    const DType type = tensors[i].type;
    stats.bytes_in += t.n_bytes;
    if (type == t.type) {
      writer.write(t.data, static_cast<size_t>(t.n_bytes));
    } else {
      model_files::restream_tensor(writer, t, type, pool);
      ++stats.n_quantized;
    }
    stats.bytes_out += writer.tensor_bytes(i);
    ++stats.n_tensors;
    if (progress) progress(i + 1, in->tensors().size(), t.name);
  }
  writer.finish();
  return stats;
}

}  // namespace specdec
