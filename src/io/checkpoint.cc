#include "io/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <unordered_set>

namespace deepinfer::io {
namespace {

std::string dtype_list(std::initializer_list<DType> types) {
  std::string s;
  for (DType t : types) {
    if (!s.empty()) s += "/";
    s += dtype_name(t);
  }
  return s;
}

}  // namespace

Expected<LoadFormat> parse_load_format(std::string_view text, std::string_view option) {
  if (text == "auto") return LoadFormat::kAuto;
  if (text == "dummy") return LoadFormat::kDummy;
  return invalid_argument(std::string(option) + " is '" + std::string(text) +
                          "'; expected 'auto' (read the checkpoint's safetensors) or 'dummy' "
                          "(random weights generated where they live; config.json only)");
}

Expected<Checkpoint> Checkpoint::open(const std::string& model_dir, const LoadOptions& load) {
  if (load.format == LoadFormat::kDummy) return dummy(model_dir, load.seed);
  return open(model_dir);
}

Expected<Checkpoint> Checkpoint::open(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(model_dir, ec)) return not_found("model directory not found: " + model_dir);
  if (!fs::is_directory(model_dir, ec)) {
    return invalid_argument(model_dir +
                            " is not a directory; expected a model directory with "
                            "config.json and safetensors files");
  }
  Checkpoint ck;
  ck.model_dir_ = model_dir;
  auto config = load_model_config(model_dir);
  if (!config.ok()) return config.status();
  ck.config_ = std::move(config).value();
  auto store = TensorStore::open(model_dir);
  if (!store.ok()) return store.status();
  ck.store_ = std::move(store).value();
  ck.warnings_ = ck.store_.warnings();
  ck.family_ = detect_name_family(ck.store_.names(),
                                   ck.config_.family == ModelFamily::kDeepseekV41);
  ck.expected_ = expected_tensors(ck.config_);
  DI_TRY(ck.validate_all());
  return ck;
}

Status Checkpoint::validate_all() {
  for (const auto& stored : store_.names()) {
    std::string canonical = to_canonical_name(stored, family_);
    auto [it, inserted] = canonical_to_stored_.emplace(canonical, stored);
    if (!inserted) {
      return data_loss("tensors '" + it->second + "' and '" + stored +
                       "' both name the same weight '" + canonical + "' in " + model_dir_);
    }
  }

  std::vector<const ExpectedTensor*> missing;
  size_t mtp_expected = 0, mtp_missing = 0;
  std::string first_mtp_present, first_mtp_missing;
  for (const auto& t : expected_) {
    if (t.mtp && !t.optional) ++mtp_expected;
    auto it = canonical_to_stored_.find(t.name);
    if (it == canonical_to_stored_.end()) {
      if (t.mtp && !t.optional) {
        if (mtp_missing++ == 0) first_mtp_missing = t.name;
      } else if (!t.optional && !(t.name == "head.weight" && config_.tie_word_embeddings)) {
        missing.push_back(&t);
      }
      continue;
    }
    if (t.mtp && first_mtp_present.empty()) first_mtp_present = t.name;
    DI_TRY(validate_one(t, *store_.find(it->second), it->second));
  }

  if (!missing.empty()) {
    std::string m = "checkpoint " + model_dir_ + " lacks " + std::to_string(missing.size()) +
                    " tensor(s) that config.json implies (" +
                    std::string(name_family_name(family_)) + " names): ";
    for (size_t i = 0; i < missing.size() && i < 5; ++i) {
      if (i > 0) m += ", ";
      m += '\'';
      m += to_stored_name(missing[i]->name, family_);
      m += "' ";
      m += shape_to_string(missing[i]->shape);
    }
    if (missing.size() > 5) m += ", ...";
    return data_loss(m);
  }

  if (config_.tie_word_embeddings && !weights_.count("head.weight")) {
    weights_["head.weight"] = weights_.at("embed.weight");
  }

  if (mtp_expected > 0) {
    if (mtp_missing == 0) {
      mtp_available_ = true;
    } else if (mtp_missing == mtp_expected) {
      mtp_available_ = false;
      const bool v41 = config_.family == ModelFamily::kDeepseekV41;
      warnings_.push_back("config declares " + std::to_string(config_.num_mtp_layers()) +
                          (v41 ? " DSpark stage(s)" : " MTP layer(s)") +
                          " but the checkpoint has no mtp.* tensors (Hugging Face saves drop "
                          "them): " + (v41 ? "DSpark" : "MTP") +
                          " speculative decoding is unavailable");
    } else {
      return data_loss("checkpoint " + model_dir_ + " has an incomplete " +
                       (config_.family == ModelFamily::kDeepseekV41 ? "DSpark drafter" : "MTP block") +
                       ": it holds '" +
                       first_mtp_present + "' but lacks '" +
                       to_stored_name(first_mtp_missing, family_) + "' (and " +
                       std::to_string(mtp_missing - 1) + " more)");
    }
  }

  std::unordered_set<std::string> used(consumed_.begin(), consumed_.end());
  for (const auto& stored : store_.names()) {
    if (!used.count(stored)) unknown_.push_back(stored);
  }
  if (!unknown_.empty()) {
    std::string w = std::to_string(unknown_.size()) +
                    " stored tensor(s) are not part of the model and will be ignored: ";
    for (size_t i = 0; i < unknown_.size() && i < 5; ++i) w += (i ? ", " : "") + unknown_[i];
    if (unknown_.size() > 5) w += ", ...";
    warnings_.push_back(w);
  }
  if (misaligned_ > 0) {
    warnings_.push_back(std::to_string(misaligned_) +
                        " tensor(s) are not aligned to their element size in the "
                        "file (first: " +
                        first_misaligned_ +
                        "); the header was not padded to 8 bytes, "
                        "so typed reads of these views must copy first");
  }
  check_declared_quantization();
  return Status::ok_status();
}

Status Checkpoint::validate_one(const ExpectedTensor& t, const TensorStore::Location& loc,
                                const std::string& stored) {
  const SafetensorsEntry& e = *loc.entry;
  const std::string where = "tensor '" + t.name + "'" +
                            (stored != t.name ? " (stored as '" + stored + "')" : "") + " in " +
                            loc.file->path();
  auto mismatch = [&](const std::string& what) { return data_loss(where + ": " + what); };
  auto shape_is = [&](const std::vector<int64_t>& want, const std::string& layout) -> Status {
    if (e.shape != want) {
      return mismatch("shape " + shape_to_string(e.shape) + " as " +
                      std::string(dtype_name(e.dtype)) + ", expected " + shape_to_string(want) +
                      " (" + layout + ")");
    }
    return Status::ok_status();
  };

  Weight w;
  w.data = loc.file->view(e);
  if (reinterpret_cast<uintptr_t>(w.data.data) % static_cast<uintptr_t>(dtype_size(e.dtype)) != 0 &&
      misaligned_++ == 0) {
    first_misaligned_ = where;
  }
  w.logical_shape = t.shape;
  w.stored_name = stored;
  w.file = loc.file->path();

  const std::string scale_canonical = scale_name_for(t.name);
  const TensorStore::Location* scale_loc = nullptr;
  std::string scale_stored;
  if (auto it = canonical_to_stored_.find(scale_canonical);
      it != canonical_to_stored_.end() && t.name != scale_canonical) {
    scale_loc = store_.find(it->second);
    scale_stored = it->second;
  }
  auto check_scale = [&](std::initializer_list<DType> dtypes, const std::vector<int64_t>& want,
                         const std::string& layout) -> Status {
    if (scale_loc == nullptr) {
      return mismatch("is " + std::string(dtype_name(e.dtype)) + " but its scale '" +
                      to_stored_name(scale_canonical, family_) + "' is missing (" + layout + ")");
    }
    const SafetensorsEntry& s = *scale_loc->entry;
    const std::string swhere =
        "scale '" + scale_stored + "' of tensor '" + t.name + "' in " + scale_loc->file->path();
    if (std::find(dtypes.begin(), dtypes.end(), s.dtype) == dtypes.end()) {
      return data_loss(swhere + ": dtype " + std::string(dtype_name(s.dtype)) + ", expected " +
                       dtype_list(dtypes) + " (" + layout + ")");
    }
    if (s.shape != want) {
      return data_loss(swhere + ": shape " + shape_to_string(s.shape) + ", expected " +
                       shape_to_string(want) + " (" + layout + ")");
    }
    w.scale = scale_loc->file->view(s);
    consumed_.push_back(scale_stored);
    return Status::ok_status();
  };

  const bool linear = t.role == TensorRole::kLinear || t.role == TensorRole::kExpertLinear;
  if (t.role == TensorRole::kEngramTable && e.dtype == DType::kF8E4M3) {
    const std::string layout = "FP8 E4M3 rows with one E8M0 scale per 32 values";
    DI_TRY(shape_is(t.shape, layout));
    if (t.shape[1] % kEngramScaleBlock != 0) {
      return mismatch("is FP8 but its row width " + std::to_string(t.shape[1]) +
                      " is not a multiple of " + std::to_string(kEngramScaleBlock));
    }
    DI_TRY(check_scale({DType::kF8E8M0}, {t.shape[0], t.shape[1] / kEngramScaleBlock}, layout));
    w.format = WeightFormat::kFp8Block;
    w.block_out = 1;
    w.block_in = kEngramScaleBlock;
  } else if (t.role == TensorRole::kIndexTable) {
    if (e.dtype != DType::kI64 && e.dtype != DType::kI32) {
      return mismatch("dtype " + std::string(dtype_name(e.dtype)) +
                      ", expected I64 or I32 (token -> expert table)");
    }
    DI_TRY(shape_is(t.shape, "token -> expert table"));
  } else if (is_float_dtype(e.dtype)) {
    DI_TRY(shape_is(t.shape, "unquantized"));
    if (linear && scale_loc != nullptr) {
      return mismatch("is " + std::string(dtype_name(e.dtype)) + " but has a scale '" +
                      scale_stored + "'; a scale belongs only to an F8_E4M3 or FP4 (I8) weight");
    }
  } else if (linear && e.dtype == DType::kF8E4M3) {
    const auto& bs = config_.quantization.weight_block_size;
    const std::string layout =
        "FP8 E4M3 with " + std::to_string(bs[0]) + "x" + std::to_string(bs[1]) + " block scales";
    DI_TRY(shape_is(t.shape, layout));
    DI_TRY(
        check_scale({DType::kF8E8M0, DType::kF32}, fp8_scale_shape(t.shape, bs[0], bs[1]), layout));
    w.format = WeightFormat::kFp8Block;
    w.block_out = bs[0];
    w.block_in = bs[1];
  } else if (t.role == TensorRole::kExpertLinear && e.dtype == DType::kI8) {
    const int block = config_.quantization.expert_block_size;
    if (t.shape[1] % block != 0) {
      return mismatch("is FP4 (I8) but its input dimension " + std::to_string(t.shape[1]) +
                      " is not a multiple of the FP4 scale block " + std::to_string(block));
    }
    const std::string layout =
        "FP4 E2M1 packed two per byte, 1x" + std::to_string(block) + " E8M0 scales";
    DI_TRY(shape_is(fp4_packed_shape(t.shape), layout));
    DI_TRY(check_scale({DType::kF8E8M0}, fp4_scale_shape(t.shape, block), layout));
    w.format = WeightFormat::kFp4Block;
    w.block_out = 1;
    w.block_in = block;
  } else {
    std::string allowed = "BF16/F16/F32";
    if (linear) allowed += ", or F8_E4M3 with a .scale";
    if (t.role == TensorRole::kExpertLinear) allowed += ", or FP4 packed in I8 with a .scale";
    return mismatch("dtype " + std::string(dtype_name(e.dtype)) + " " + shape_to_string(e.shape) +
                    " is not allowed here; expected " + allowed + " for logical shape " +
                    shape_to_string(t.shape));
  }
  consumed_.push_back(stored);
  weights_.emplace(t.name, std::move(w));
  return Status::ok_status();
}

void Checkpoint::check_declared_quantization() {
  size_t dense[3] = {0, 0, 0}, expert[3] = {0, 0, 0};
  for (const auto& t : expected_) {
    const Weight* w = find(t.name);
    if (w == nullptr) continue;
    if (t.role == TensorRole::kLinear) ++dense[static_cast<int>(w->format)];
    if (t.role == TensorRole::kExpertLinear) ++expert[static_cast<int>(w->format)];
  }
  const size_t quantized = dense[1] + dense[2] + expert[1] + expert[2];
  const auto& q = config_.quantization;
  if (!q.quantized && quantized > 0) {
    warnings_.push_back("config.json declares no quantization, but " + std::to_string(quantized) +
                        " weights are stored as FP8/FP4; the stored dtypes are used");
  } else if (q.quantized && quantized == 0) {
    warnings_.push_back(
        "config.json declares fp8 quantization, but every weight is stored "
        "unquantized; the stored dtypes are used");
  } else if (q.quantized && q.expert_format == ExpertFormat::kFp4 && expert[0] + expert[1] > 0) {
    warnings_.push_back("config.json declares FP4 routed experts, but " +
                        std::to_string(expert[0] + expert[1]) +
                        " expert weights are stored otherwise; the stored dtypes are used");
  } else if (q.quantized && q.expert_format != ExpertFormat::kFp4 && expert[2] > 0) {
    warnings_.push_back("config.json does not declare FP4 routed experts, but " +
                        std::to_string(expert[2]) +
                        " expert weights are FP4; the stored dtypes are used");
  }
}

const Weight* Checkpoint::find(std::string_view canonical_name) const {
  auto it = weights_.find(std::string(canonical_name));
  return it == weights_.end() ? nullptr : &it->second;
}

Expected<Weight> Checkpoint::get(std::string_view canonical_name) const {
  if (const Weight* w = find(canonical_name)) return *w;
  std::string m = "tensor '" + std::string(canonical_name) + "' is not in checkpoint " + model_dir_;
  if (canonical_name.substr(0, 4) == "mtp." && !mtp_available_) m += " (it has no MTP block)";
  return not_found(m);
}

}  // namespace deepinfer::io
