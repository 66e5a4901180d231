// DType: the element types DeepInfer stores, with their safetensors names and sizes.
//
// kI8 is also the storage of packed FP4 E2M1 experts (two codes per byte): whether an I8 tensor
// holds FP4 is decided by its role and its `.scale` companion, not by the dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t {
  kBF16,
  kF16,
  kF32,
  kF8E4M3,
  kF8E8M0,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
  kF64,
};

// Size of one element in bytes.
int dtype_size(DType t);
// The safetensors spelling ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string; nullopt for one DeepInfer does not know.
std::optional<DType> dtype_from_safetensors(std::string_view name);

}  // namespace deepinfer
