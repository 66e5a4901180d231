// MappedFile: a read-only memory mapping of one file, unmapped when the object dies.
//
// Tensor views handed out by the safetensors reader point into this mapping (zero copy), so
// the MappedFile must outlive them; the mapping address stays fixed when the object is moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace deepinfer::io {

class MappedFile {
 public:
  // Errors: kNotFound (no such file), kInvalidArgument (a directory or not a regular file),
  // kFailedPrecondition (cannot be opened or mapped, e.g. permission denied).
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;  // nullptr for an empty file
  size_t size_ = 0;
};

}  // namespace deepinfer::io
