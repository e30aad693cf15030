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

}  // namespace specdec::model_files
