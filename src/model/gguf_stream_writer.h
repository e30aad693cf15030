// model/gguf_stream_writer.h — writes a GGUF file whose tensor data is produced piece by piece
// (internal to the model layer; used by make_model and quantize_model so that multi-GB models
// never sit in memory).
//
// The metadata is encoded by GgufWriter (a writer holding metadata only); the tensor infos,
// alignment padding and data follow the GGUF v3 layout of specdec/gguf.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "specdec/dtype.h"
#include "specdec/gguf.h"

namespace specdec::model_files {

struct StreamTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;  // GGUF order
};

class GgufStreamWriter {
 public:
  // Creates PATH.tmp and writes header, metadata and tensor infos. `metadata` must hold no
  // tensors. Throws Error for I/O problems or invalid tensors (size overflow, bad row length).
  GgufStreamWriter(const std::string& path, const GgufWriter& metadata,
                   std::vector<StreamTensor> tensors);
  // Unlinks PATH.tmp unless finish() succeeded.
  ~GgufStreamWriter();
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Appends n bytes of tensor data, tensors in declaration order; a tensor's padding is written
  // when its last byte arrives. Throws Error if more bytes come than declared.
  void write(const void* data, size_t n);
  // Requires every tensor complete. Flushes, syncs and renames PATH.tmp to PATH.
  void finish();

  size_t n_tensors() const { return tensors_.size(); }
  // Index of the tensor the next byte belongs to (n_tensors() when all are complete).
  size_t current_tensor() const { return current_; }
  uint64_t tensor_bytes(size_t i) const { return sizes_[i]; }

 private:
  void put(const void* data, size_t n);
  void advance_past_complete_tensors();

  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
  std::vector<StreamTensor> tensors_;
  std::vector<uint64_t> sizes_;  // (n_tensors) data bytes per tensor
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
  bool finished_ = false;
};

}  // namespace specdec::model_files
