// Chunked, parallel row conversion for the streaming model writers.
#include "model/tensor_row_stream.h"

#include <algorithm>
#include <vector>

#include "specdec/kernels.h"
#include "specdec/thread_pool.h"

namespace specdec::model_files {

void stream_tensor_rows(GgufStreamWriter& writer, DType type, int64_t n_per_row, int64_t n_rows,
                        const RowSource& source, ThreadPool* pool) {
  constexpr int64_t kChunkFloats = int64_t{1} << 22;
  const size_t row_bytes = dtype_row_bytes(type, n_per_row);
  const int64_t chunk_rows = std::max<int64_t>(1, std::min<int64_t>(n_rows, kChunkFloats / n_per_row));
  std::vector<float> rows(static_cast<size_t>(chunk_rows * n_per_row));  // (chunk_rows, n_per_row)
  std::vector<uint8_t> packed(static_cast<size_t>(chunk_rows) * row_bytes);  // (chunk_rows, row_bytes)
  for (int64_t first = 0; first < n_rows; first += chunk_rows) {
    const int n_in_chunk = static_cast<int>(std::min(chunk_rows, n_rows - first));
    auto convert = [&](int r, int /*thread*/) {
      float* x = rows.data() + static_cast<int64_t>(r) * n_per_row;
      source(first + r, x);
      quantize_row(type, x, packed.data() + static_cast<size_t>(r) * row_bytes, n_per_row);
    };
    if (pool) {
      pool->parallel_for(n_in_chunk, convert);
    } else {
      for (int r = 0; r < n_in_chunk; ++r) convert(r, 0);
    }
    writer.write(packed.data(), static_cast<size_t>(n_in_chunk) * row_bytes);
  }
}

void restream_tensor(GgufStreamWriter& writer, const GgufTensorInfo& in, DType type, ThreadPool* pool,
                     const RowEdit& edit) {
  const int64_t n_per_row = in.dims[0];
  const int64_t n_rows = in.n_elements() / n_per_row;
  const size_t in_row_bytes = dtype_row_bytes(in.type, n_per_row);
  const uint8_t* data = in.data;
  const DType in_type = in.type;
  const RowSource source = [=](int64_t row, float* out) {
    dequantize_row(in_type, data + static_cast<size_t>(row) * in_row_bytes, out, n_per_row);
    if (edit) edit(row, out, n_per_row);
  };
  stream_tensor_rows(writer, type, n_per_row, n_rows, source, pool);
}

}  // namespace specdec::model_files
