// A noisy copy of a GGUF model, streamed (see specdec/make_model.h): a stand-in draft model
// that is partly right, for tests and benchmarks of speculative decoding.
#include <cmath>
#include <string>
#include <vector>

#include "model/gguf_stream_writer.h"
#include "model/tensor_row_stream.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/make_model.h"
#include "specdec/rng.h"

namespace specdec {

namespace {

bool is_numeric(const GgufTensorInfo& t) {
  return !t.dims.empty() && (t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16 ||
                             dtype_is_weight_type(t.type));
}

// Row `row` of tensor `tensor` draws its noise from its own stream, so rows can be produced in
// any order and on any thread.
uint64_t noise_row_seed(uint64_t seed, size_t tensor, int64_t row) {
  return seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(tensor) + 1)) ^
         (0xC2B2AE3D27D4EB4Full * (static_cast<uint64_t>(row) + 1));
}

}  // namespace

NoisyCopyStats make_noisy_copy(const std::string& in_path, const std::string& out_path, float noise_scale,
                               uint64_t seed, ThreadPool* pool, const ModelFileProgress& progress) {
  if (in_path == out_path) throw Error("noisy copy: input and output are the same file '" + in_path + "'");
  if (!(noise_scale >= 0.0f) || !std::isfinite(noise_scale)) {
    throw Error("noisy copy: noise scale " + std::to_string(noise_scale) + " must be a finite number >= 0");
  }
  auto in = GgufFile::open(in_path);
  GgufWriter meta;
  for (const auto& [key, value] : in->metadata()) {
    if (key != "general.alignment") meta.set(key, value);
  }
  std::vector<model_files::StreamTensor> tensors;
  for (const auto& t : in->tensors()) tensors.push_back({t.name, t.type, t.dims});

  NoisyCopyStats stats;
  model_files::GgufStreamWriter writer(out_path, meta, tensors);
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const GgufTensorInfo& t = in->tensors()[i];
    if (!is_numeric(t)) {
      writer.write(t.data, static_cast<size_t>(t.n_bytes));
    } else {
      // x + noise_scale * rms(x) * u, u uniform in [-sqrt(3), sqrt(3)) (unit variance).
      const model_files::RowEdit add_noise = [=](int64_t row, float* x, int64_t n) {
        double sum_sq = 0.0;
        for (int64_t j = 0; j < n; ++j) sum_sq += static_cast<double>(x[j]) * x[j];
        const double rms = std::sqrt(sum_sq / static_cast<double>(n));
        const float amplitude = static_cast<float>(noise_scale * rms * std::sqrt(3.0));
        Rng rng(noise_row_seed(seed, i, row));
        for (int64_t j = 0; j < n; ++j) x[j] += amplitude * static_cast<float>(rng.uniform() * 2.0 - 1.0);
      };
      model_files::restream_tensor(writer, t, t.type, pool, add_noise);
      ++stats.n_noisy;
    }
    ++stats.n_tensors;
    stats.n_bytes += writer.tensor_bytes(i);
    if (progress) progress(i + 1, in->tensors().size(), t.name);
  }
  writer.finish();
  return stats;
}

}  // namespace specdec
