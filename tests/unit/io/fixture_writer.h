// Test fixtures written from C++ (no Python needed by the gtest binary): safetensors files by
// hand, and a tiny DeepSeek-V4 checkpoint with every layer kind, mirroring
// tests/reference/make_tiny_checkpoint.py (same config; deterministic values instead of random).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/tensor_names.h"
#include "safetensors_writer.h"  // RawTensor, safetensors_bytes, write_*

namespace deepinfer::io::testing {

// A fresh empty directory under the system temp dir, removed by ~TempDir.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The tiny model: hidden 64, 5 layers (0 SWA, 1 CSA(4), 2 HCA(8), 3 CSA(4), 4 HCA(8); layers 0-1
// hash MoE, 2-4 score), head_dim 64 with 16 rope channels, 8 experts top-2, vocab 512, window
// 8, one MTP layer.
nlohmann::json tiny_config_hf(bool quantized);
nlohmann::json tiny_config_official(bool quantized);

enum class Layout { kSingle, kIndexed, kDirectory };

struct TinyOptions {
  NameFamily names = NameFamily::kOfficial;
  bool quantized = false;    // FP8 dense linears + FP4 experts
  bool fp8_experts = false;  // with quantized: FP8 experts (V4-Base style) instead of FP4
  Layout layout = Layout::kSingle;
  int shards = 3;  // for kIndexed / kDirectory
  bool official_config = false;
  bool with_mtp = true;
  // Edits the tensor list before it is written (for broken-checkpoint tests).
  std::function<void(std::vector<RawTensor>&)> mutate;
};

// Writes config.json and the tensors. Deterministic contents; the first elements of each kind
// are fixed so tests can check decoding:
//   float tensors   [1.0, -2.5, 0.5, 3.0, ...] (stored in the tensor's dtype)
//   FP8 weights     bytes [0x38, 0xC0, 0x7E, 0x01, ...] = 1.0, -2.0, 448, 2^-9
//   FP4 experts     bytes [0x2F, 0x91, ...] = columns -6, 1, 0.5, -0.5
//   E8M0 scales     bytes [127, 128, ...] = 1, 2
void write_tiny_checkpoint(const std::string& dir, const TinyOptions& options);

// The stored name of a canonical tensor in a tiny checkpoint of `family`.
std::string stored(const std::string& canonical, NameFamily family);

}  // namespace deepinfer::io::testing
