// The tensors a DeepSeek-V4 checkpoint must hold for a given ModelConfig (spec §4), with their
// logical shapes and the storage layouts each may use. Derived from the config alone, so the
// model code and the loader agree on one table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_config.h"
#include "tensor/dtype.h"

namespace deepinfer::io {

// What a tensor is, which decides the layouts it may be stored in.
enum class TensorRole : uint8_t {
  kLinear,        // [out, in]: BF16/F16/F32, or F8_E4M3 + `.scale` (E8M0 or F32) per block
  kExpertLinear,  // routed expert [out, in]: as kLinear, or FP4 E2M1 packed in I8 [out, in/2]
                  // + `.scale` E8M0 [out, in/32]
  kFloat,         // any float dtype, never quantized (norms, embeddings, router, compressor,
                  // mHC parameters, sinks, biases)
  kIndexTable,    // integer lookup table (tid2eid): I64 or I32
  kEngramTable,   // V4.1 Engram table [rows, dim]: any float dtype, or F8_E4M3 + `.scale` E8M0
                  // [rows, dim/32] (one scale per row and 32 values)
};
std::string_view tensor_role_name(TensorRole r);

// Which part of the model a tensor belongs to (for parameter/byte accounting).
enum class WeightGroup : uint8_t {
  kEmbeddingHead,
  kAttention,
  kExperts,
  kShared,
  kRouter,
  kMhc,
  kMtp,     // V4 MTP blocks, V4.1 DSpark stages
  kEngram,  // V4.1 Engram tables and their projections
};
inline constexpr int kNumWeightGroups = 8;
std::string_view weight_group_name(WeightGroup g);  // "embedding_head", "attention", ...

struct ExpectedTensor {
  std::string name;            // canonical (official) name
  std::vector<int64_t> shape;  // logical shape (unpacked; [out, in] for linears)
  TensorRole role = TensorRole::kFloat;
  WeightGroup group = WeightGroup::kAttention;
  int layer = -1;    // block index; -1 for top-level tensors
  bool mtp = false;  // part of an MTP block / DSpark stage (`mtp.{i}.*`): may be absent as a whole
  bool optional = false;  // may be absent alone (V4.1's bias_vl: unused by the text path)
};

// Every tensor of the model, main layers first, then the MTP blocks (V4) or DSpark stages
// (V4.1). `head.weight` is listed even with tie_word_embeddings (the loader then accepts its
// absence).
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// `.scale` companion of a quantized `.weight` ("a.b.weight" -> "a.b.scale").
std::string scale_name_for(std::string_view weight_name);

// Storage of one weight as found in a checkpoint.
enum class WeightFormat : uint8_t {
  kPlain,     // BF16 / F16 / F32 (or an integer table), no scale
  kFp8Block,  // F8_E4M3 [out, in] + scale [ceil(out/bo), ceil(in/bi)]
  kFp4Block,  // I8 [out, in/2] (two E2M1 codes per byte, low nibble = even column)
              // + E8M0 scale [out, in/32]
};
std::string_view weight_format_name(WeightFormat f);  // "plain", "fp8", "fp4"

// The stored shapes a layout implies for a logical [out, in] weight.
std::vector<int64_t> fp8_scale_shape(const std::vector<int64_t>& logical, int block_out,
                                     int block_in);
std::vector<int64_t> fp4_packed_shape(const std::vector<int64_t>& logical);
std::vector<int64_t> fp4_scale_shape(const std::vector<int64_t>& logical, int block);
// Row scales of an FP8 Engram table: [rows, dim / 32].
inline constexpr int kEngramScaleBlock = 32;

bool is_float_dtype(DType t);

}  // namespace deepinfer::io
