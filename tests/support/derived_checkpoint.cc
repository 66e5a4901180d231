#include "derived_checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "base/numeric_types.h"
#include "io/safetensors.h"
#include "safetensors_writer.h"
#include "tensor/dtype.h"

namespace deepinfer::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const std::string& dir, const std::string& what) {
  throw std::runtime_error(dir + "/derive.json: " + what);
}

float float_at(const TensorView& v, int64_t i) {
  switch (v.dtype) {
    case DType::kF32:
      return v.ptr<float>()[i];
    case DType::kBF16:
      return bf16_to_float(v.ptr<uint16_t>()[i]);
    default:
      throw std::logic_error("float_at: not F32/BF16");
  }
}

// Source bytes converted to `to` (F32 <-> BF16; anything else must keep its dtype).
std::vector<uint8_t> convert(const TensorView& v, DType to, const std::string& dir,
                             const std::string& name) {
  const auto* src = static_cast<const uint8_t*>(v.data);
  if (v.dtype == to) return {src, src + v.nbytes()};
  const bool floats = (v.dtype == DType::kF32 || v.dtype == DType::kBF16) &&
                      (to == DType::kF32 || to == DType::kBF16);
  if (!floats) {
    fail(dir, name + ": cannot convert " + std::string(dtype_name(v.dtype)) + " to " +
                  std::string(dtype_name(to)));
  }
  const int64_t n = v.numel();
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_size(to)));
  for (int64_t i = 0; i < n; ++i) {
    const float x = float_at(v, i);
    if (to == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else {
      const uint16_t b = float_to_bf16(x);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

std::vector<uint8_t> filled(double value, DType dtype, int64_t n, const std::string& dir,
                            const std::string& name) {
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_size(dtype)));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      const float x = static_cast<float>(value);
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else if (dtype == DType::kBF16) {
      const uint16_t b = float_to_bf16(static_cast<float>(value));
      std::memcpy(out.data() + 2 * i, &b, 2);
    } else {
      fail(dir, name + ": fill needs F32 or BF16");
    }
  }
  return out;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw std::runtime_error(path.string() + " is not valid JSON");
  return j;
}

// Per-process cache of materialized folders, removed when the process exits.
class DerivedFolders {
 public:
  ~DerivedFolders() {
    std::error_code ec;
    for (const auto& [dir, out] : made_) fs::remove_all(out, ec);
  }
  std::string get(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = made_.find(dir);
    if (it != made_.end()) return it->second;
    const fs::path out = fs::temp_directory_path() /
                         ("deepinfer_derived_" + std::to_string(::getpid()) + "_" +
                          std::to_string(made_.size()));
    fs::remove_all(out);
    fs::create_directories(out);
    materialize_derived(dir, out.string());
    made_[dir] = out.string();
    return out.string();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> made_;
};

}  // namespace

void materialize_derived(const std::string& dir, const std::string& out) {
  const json spec = read_json(fs::path(dir) / "derive.json");
  if (!spec.contains("from") || !spec["from"].is_string()) fail(dir, "\"from\" (a folder) missing");
  if (!spec.contains("tensors") || !spec["tensors"].is_array()) fail(dir, "\"tensors\" missing");
  const fs::path from = fs::path(dir) / spec["from"].get<std::string>();
  auto file = io::SafetensorsFile::open((from / "model.safetensors").string());
  if (!file.ok()) fail(dir, file.status().to_string());

  std::vector<io::testing::RawTensor> tensors;
  for (const json& t : spec["tensors"]) {
    const std::string name = t.at("name").get<std::string>();
    const auto dtype = dtype_from_safetensors(t.at("dtype").get<std::string>());
    if (!dtype) fail(dir, name + ": unknown dtype " + t.at("dtype").dump());
    io::testing::RawTensor raw{name, std::string(dtype_name(*dtype)), {}, {}};
    if (t.contains("fill")) {
      raw.shape = t.at("shape").get<std::vector<int64_t>>();
      int64_t n = 1;
      for (int64_t d : raw.shape) n *= d;
      raw.bytes = filled(t["fill"].get<double>(), *dtype, n, dir, name);
    } else {
      const std::string source = t.contains("source") ? t["source"].get<std::string>() : name;
      const io::SafetensorsEntry* e = (*file)->find(source);
      if (e == nullptr) fail(dir, name + ": source tensor " + source + " not in " + from.string());
      raw.shape = e->shape;
      raw.bytes = convert((*file)->view(*e), *dtype, dir, name);
    }
    tensors.push_back(std::move(raw));
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().filename() != "derive.json") {
      fs::copy_file(entry.path(), fs::path(out) / entry.path().filename(),
                    fs::copy_options::overwrite_existing);
    }
  }
  if (spec.contains("copy")) {
    for (const json& f : spec["copy"]) {
      const std::string name = f.get<std::string>();
      fs::copy_file(from / name, fs::path(out) / name, fs::copy_options::overwrite_existing);
    }
  }
  const json metadata = spec.contains("metadata") ? spec["metadata"] : json();
  io::testing::write_safetensors((fs::path(out) / "model.safetensors").string(), tensors,
                                 metadata);
}

std::string checkpoint_dir(const std::string& dir) {
  const fs::path d(dir);
  if (fs::exists(d / "model.safetensors") || fs::exists(d / "model.safetensors.index.json") ||
      !fs::exists(d / "derive.json")) {
    return dir;  // committed weights (or a folder the loader will explain is missing)
  }
  static DerivedFolders folders;
  return folders.get(dir);
}

}  // namespace deepinfer::testing
