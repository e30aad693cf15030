// model/tensor_row_stream.h — converts a tensor's rows to their file type and streams them
// (internal to the model layer; shared by make_model and quantize_model).
#pragma once

#include <cstdint>
#include <functional>

#include "model/gguf_stream_writer.h"
#include "specdec/dtype.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::model_files {

// Fills out[0..n_per_row) with float32 row `row` of the tensor. Called concurrently for
// different rows: it must depend on `row` only (no shared mutable state).
using RowSource = std::function<void(int64_t row, float* out)>;

// Produces rows [0, n_rows) a chunk at a time (about 4 M floats), quantizes each with
// quantize_row(type) on the pool (rows split across threads; each row's bytes depend on that
// row only), and appends them to `writer` in row order.
// Requires: n_per_row a multiple of type's block size. Cost: O(n_rows * n_per_row) time,
// O(chunk) memory.
void stream_tensor_rows(GgufStreamWriter& writer, DType type, int64_t n_per_row, int64_t n_rows,
                        const RowSource& source, ThreadPool* pool);

// Changes a row of float32 values in place (row index, values (n_per_row)). Called concurrently
// for different rows: it must depend on the row and its values only.
using RowEdit = std::function<void(int64_t row, float* values, int64_t n_per_row)>;

// Streams an input tensor's rows converted to `type`: each row dequantized to float32, passed to
// `edit` when given, and quantized with stream_tensor_rows. Requires: `in` a tensor of a mapped
// GGUF with at least one dimension. Cost: as stream_tensor_rows.
void restream_tensor(GgufStreamWriter& writer, const GgufTensorInfo& in, DType type, ThreadPool* pool,
                     const RowEdit& edit = nullptr);

}  // namespace specdec::model_files
