// Streaming GGUF writer (see gguf_stream_writer.h).
#include "model/gguf_stream_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "specdec/error.h"

namespace specdec::model_files {

namespace {

constexpr uint64_t kAlignment = 32;  // GGUF default; metadata must not set general.alignment

uint64_t align_up(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

template <typename T>
void append_pod(std::vector<uint8_t>& buf, T value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  buf.insert(buf.end(), p, p + sizeof(T));
}

void append_string(std::vector<uint8_t>& buf, const std::string& s) {
  append_pod<uint64_t>(buf, s.size());
  buf.insert(buf.end(), s.begin(), s.end());
}

uint64_t tensor_size(const StreamTensor& t) {
  if (t.dims.empty() || t.dims.size() > 4)
    throw Error("tensor '" + t.name + "' has " + std::to_string(t.dims.size()) + " dimensions");
  uint64_t n_rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) {
    if (t.dims[i] < 1) throw Error("tensor '" + t.name + "' has a dimension < 1");
    n_rows *= static_cast<uint64_t>(t.dims[i]);
  }
  return n_rows * dtype_row_bytes(t.type, t.dims[0]);
}

}  // namespace

GgufStreamWriter::GgufStreamWriter(const std::string& path, const GgufWriter& metadata,
                                   std::vector<StreamTensor> tensors)
    : path_(path), tmp_path_(path + ".tmp"), tensors_(std::move(tensors)) {
  // GgufWriter encodes magic, version, n_tensors (0 here), n_kv and the metadata; with no
  // tensors it adds no padding, so the tensor infos can follow directly.
  std::vector<uint8_t> header = metadata.to_bytes();
  uint64_t n_tensors_field = 1;
  if (header.size() < 24 || std::memcmp(header.data(), "GGUF", 4) != 0 ||
      (std::memcpy(&n_tensors_field, header.data() + 8, 8), n_tensors_field != 0))
    throw InternalError("GgufStreamWriter: metadata writer must hold no tensors");
  const uint64_t n_tensors = tensors_.size();
  std::memcpy(header.data() + 8, &n_tensors, 8);
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    sizes_.push_back(tensor_size(t));
    append_string(header, t.name);
    append_pod<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) append_pod<uint64_t>(header, static_cast<uint64_t>(d));
    append_pod<uint32_t>(header, static_cast<uint32_t>(t.type));
    append_pod<uint64_t>(header, offset);
    offset = align_up(offset + sizes_.back());
  }
  header.resize(align_up(header.size()), 0);

  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) throw Error("cannot create '" + tmp_path_ + "': " + std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, size_t{4} << 20);
  put(header.data(), header.size());
  advance_past_complete_tensors();  // zero-size tensors cannot exist, but stay consistent
}

GgufStreamWriter::~GgufStreamWriter() {
  if (file_) std::fclose(file_);
  if (!finished_) ::unlink(tmp_path_.c_str());
}

void GgufStreamWriter::put(const void* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, file_) != n)
    throw Error("cannot write '" + tmp_path_ + "': " + std::strerror(errno));
}

void GgufStreamWriter::advance_past_complete_tensors() {
  static const uint8_t zeros[kAlignment] = {};
  while (current_ < tensors_.size() && written_in_current_ == sizes_[current_]) {
    put(zeros, static_cast<size_t>(align_up(sizes_[current_]) - sizes_[current_]));
    ++current_;
    written_in_current_ = 0;
  }
}

void GgufStreamWriter::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (current_ >= tensors_.size())
      throw Error("GGUF stream '" + path_ + "': " + std::to_string(n) + " bytes past the last tensor");
    const uint64_t room = sizes_[current_] - written_in_current_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(room, n));
    put(p, take);
    p += take;
    n -= take;
    written_in_current_ += take;
    advance_past_complete_tensors();
  }
}

void GgufStreamWriter::finish() {
  if (current_ != tensors_.size())
    throw Error("GGUF stream '" + path_ + "': tensor '" + tensors_[current_].name + "' incomplete (" +
                std::to_string(written_in_current_) + " of " + std::to_string(sizes_[current_]) +
                " bytes)");
  const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed)
    throw Error("cannot write '" + tmp_path_ + "': " + std::strerror(flushed ? errno : flush_errno));
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw Error("cannot rename '" + tmp_path_ + "' to '" + path_ + "': " + std::strerror(errno));
  finished_ = true;
}

}  // namespace specdec::model_files
