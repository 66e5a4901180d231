// Checkpoint: a DeepSeek-V4 model directory opened and validated once, at load time.
//
// open() reads config.json, maps every safetensors file, detects the tensor-name family, and
// checks every tensor the config implies (presence, dtype, shape, quantization companions)
// against expected_tensors(). Afterwards get() hands out zero-copy views by canonical
// (official) name; shapes need no further checks in the model code. `mtp.*` may be absent as a
// whole (Hugging Face saves have none): mtp_available() then says false. Stored tensors the model
// does not use are listed as warnings, not errors. dummy() (load format "dummy",
// dummy_weights.h) builds the same table from config.json alone: weights with a layout and a
// random fill but no bytes, which the binder generates where they are placed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/expected_tensors.h"
#include "io/model_config.h"
#include "io/tensor_names.h"
#include "io/tensor_store.h"
#include "tensor/random_fill.h"
#include "tensor/tensor_view.h"

namespace deepinfer::io {

struct Weight {
  TensorView data;                  // as stored: I8 [out, in/2] for FP4
  std::optional<TensorView> scale;  // E8M0 (or F32 for FP8) block scales when quantized
  WeightFormat format = WeightFormat::kPlain;
  std::vector<int64_t> logical_shape;  // unpacked shape ([out, in] for linears)
  int block_out = 1;                   // one scale covers block_out x block_in logical elements
  int block_in = 1;
  std::string stored_name;  // name in the file (family spelling)
  std::string file;         // path of the safetensors file holding it
  // A dummy checkpoint's weight (load format "dummy", io/dummy_weights.h): data.data and
  // scale->data are null, and these say how the bytes are generated where the weight is placed
  // (model::Binder, backend::Ops::fill_random).
  std::optional<RandomFill> data_fill, scale_fill;
  bool generated() const { return data_fill.has_value(); }
};

// Where the weights come from (EngineOptions::load_format): kAuto reads the checkpoint's
// safetensors; kDummy needs only config.json and generates random weights (dummy_weights.h).
enum class LoadFormat : uint8_t { kAuto, kDummy };
struct LoadOptions {
  LoadFormat format = LoadFormat::kAuto;
  uint64_t seed = 0;  // kDummy: the same seed and config give the same weights, bit for bit
};
// "auto" | "dummy"; anything else is kInvalidArgument naming `option` and the accepted values.
Expected<LoadFormat> parse_load_format(std::string_view text, std::string_view option);

class Checkpoint {
 public:
  // Errors: kNotFound (directory, config.json, safetensors or shard missing), kInvalidArgument /
  // kUnimplemented (config.json), kDataLoss (corrupt file, missing or mis-shaped tensor).
  static Expected<Checkpoint> open(const std::string& model_dir);
  // open(), or dummy() for LoadFormat::kDummy.
  static Expected<Checkpoint> open(const std::string& model_dir, const LoadOptions& load);
  // A checkpoint made from model_dir/config.json alone (dummy_weights.cc): every tensor the config
  // implies (no MTP / DSpark block: mtp_available() is false), with its layout and its random
  // fill but no bytes; nothing else in the directory is read.
  static Expected<Checkpoint> dummy(const std::string& model_dir, uint64_t seed);

  const ModelConfig& config() const { return config_; }
  NameFamily name_family() const { return family_; }
  const TensorStore& store() const { return store_; }
  const std::string& model_dir() const { return model_dir_; }

  bool has(std::string_view canonical_name) const { return find(canonical_name) != nullptr; }
  const Weight* find(std::string_view canonical_name) const;
  // kNotFound naming the tensor when absent.
  Expected<Weight> get(std::string_view canonical_name) const;

  bool mtp_available() const { return mtp_available_; }
  // The full table the config implies, incl. MTP entries even when absent.
  const std::vector<ExpectedTensor>& expected() const { return expected_; }
  // Stored names the model does not use.
  const std::vector<std::string>& unknown_tensors() const { return unknown_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  Status validate_all();
  Status validate_one(const ExpectedTensor& t, const TensorStore::Location& loc,
                      const std::string& stored);
  void check_declared_quantization();

  std::string model_dir_;
  ModelConfig config_;
  TensorStore store_;
  NameFamily family_ = NameFamily::kOfficial;
  std::vector<ExpectedTensor> expected_;
  std::unordered_map<std::string, std::string> canonical_to_stored_;
  std::unordered_map<std::string, Weight> weights_;  // canonical name -> weight
  std::vector<std::string> consumed_;                // stored names used (weights + scales)
  std::vector<std::string> unknown_;
  std::vector<std::string> warnings_;
  bool mtp_available_ = false;
  size_t misaligned_ = 0;  // views whose address is not a multiple of their element size
  std::string first_misaligned_;
};

}  // namespace deepinfer::io
