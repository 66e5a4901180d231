// safetensors reader: an 8-byte little-endian header length, a JSON header, then raw tensor
// bytes. Tensors are handed out as zero-copy TensorViews into the file's memory mapping.
//
// Everything in the header is validated before any view is made (dtype, shape, offsets inside
// the data section, byte size = numel x element size, no two tensors overlapping), so a corrupt
// or hostile file gives a Status naming the file and the tensor, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/io_limits.h"
#include "io/mapped_file.h"
#include "tensor/tensor_view.h"

namespace deepinfer::io {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;

  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file (8 + header length)
};

// The header limits (io_limits.h); a test lowers max_tensors to reach it cheaply.
struct SafetensorsLimits {
  uint64_t max_header_bytes = kMaxSafetensorsHeaderBytes;
  size_t max_tensors = kMaxTensorsPerFile;
  size_t max_name_bytes = kMaxTensorNameBytes;
  size_t max_rank = kMaxTensorRank;
  size_t max_json_depth = kMaxCheckpointJsonDepth;
};

// Parses and validates a whole safetensors image (header + data) of `size` bytes. `label` names
// the file in error messages. Never reads outside [bytes, bytes + size).
Expected<SafetensorsHeader> parse_safetensors(const uint8_t* bytes, size_t size,
                                              const std::string& label,
                                              const SafetensorsLimits& limits = {});

class SafetensorsFile {
 public:
  // Maps `path` and parses its header.
  static Expected<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(std::string_view name) const;
  // A view into the mapping; `entry` must come from this file.
  TensorView view(const SafetensorsEntry& entry) const;
  const MappedFile& mapping() const { return file_; }

  // Held by unique_ptr only: the name index refers into the entries.
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

 private:
  SafetensorsFile(MappedFile file, SafetensorsHeader header);

  MappedFile file_;
  SafetensorsHeader header_;
  std::unordered_map<std::string_view, size_t> index_;  // name -> entries position
};

}  // namespace deepinfer::io
