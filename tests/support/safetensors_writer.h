// Writing safetensors files from test code (the engine itself only reads them): the committed
// fixtures derived at test time (derived_checkpoint.h) and the hand-made checkpoints of
// tests/unit/io.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deepinfer::io::testing {

struct RawTensor {
  std::string name;
  std::string dtype;  // safetensors spelling
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The bytes of a safetensors file: 8-byte little-endian header length, JSON header padded with
// spaces to a multiple of 8, then the tensors back to back, larger elements first (as the
// safetensors library orders them, so every tensor is aligned to its element size).
std::vector<uint8_t> safetensors_bytes(const std::vector<RawTensor>& tensors,
                                       const nlohmann::json& metadata = nullptr);
// Header + data with a hand-made JSON header (for malformed-header tests).
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes);

// Throw std::runtime_error naming the path when the write fails.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);
void write_safetensors(const std::string& path, const std::vector<RawTensor>& tensors,
                       const nlohmann::json& metadata = nullptr);

}  // namespace deepinfer::io::testing
