// The limits of the checkpoint readers (safetensors headers, model.safetensors.index.json,
// config.json), in one place; docs/limits.md lists them with every other parser's. Each is far
// above what a real checkpoint needs (DeepSeek-V4: headers of a few MB, ~160 shards, rank <= 3,
// names under 100 bytes, JSON nested 4 deep) and low enough that a hostile file cannot make the
// reader allocate without bound or recurse off the stack.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::io {

// Largest safetensors header accepted (the reference implementation's limit, 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;
// Tensors in one safetensors file.
inline constexpr size_t kMaxTensorsPerFile = size_t{1} << 20;
// Bytes of one tensor name.
inline constexpr size_t kMaxTensorNameBytes = 1024;
// Dimensions of one tensor.
inline constexpr size_t kMaxTensorRank = 8;
// Nesting of arrays and objects in every JSON document of a checkpoint (header, index, config).
inline constexpr size_t kMaxCheckpointJsonDepth = 64;
// model.safetensors.index.json: file size and distinct shard files.
inline constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;
inline constexpr size_t kMaxShards = 16384;
// config.json file size.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

}  // namespace deepinfer::io
