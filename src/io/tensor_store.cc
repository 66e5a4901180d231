#include "io/tensor_store.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "base/input_limits.h"
#include "io/io_limits.h"
#include "io/json_fields.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<json> read_index(const fs::path& path) {
  DI_ASSIGN_OR_RETURN(const std::string text,
                      read_checkpoint_json(path.string(), kMaxIndexBytes, "kMaxIndexBytes"));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return data_loss(path.string() + " is not valid JSON: " + e.what());
  }
}

// A shard name from the index must stay inside the model directory.
bool is_plain_relative(const std::string& name) {
  if (name.empty()) return false;
  const fs::path p(name);
  if (p.is_absolute()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

std::string_view store_layout_name(StoreLayout layout) {
  switch (layout) {
    case StoreLayout::kSingleFile:
      return "single file";
    case StoreLayout::kIndexed:
      return "sharded (index)";
    case StoreLayout::kDirectory:
      return "directory of shards (no index)";
  }
  return "?";
}

Status TensorStore::add_file(std::unique_ptr<SafetensorsFile> file) {
  for (const auto& e : file->entries()) {
    auto [it, inserted] = by_name_.emplace(e.name, Location{file.get(), &e});
    if (!inserted) {
      return data_loss("tensor '" + e.name + "' is stored twice: in " + it->second.file->path() +
                       " and in " + file->path());
    }
    names_.push_back(e.name);
  }
  files_.push_back(std::move(file));
  return Status::ok_status();
}

Expected<TensorStore> TensorStore::open(const std::string& path) {
  std::error_code ec;
  const fs::path root(path);
  const auto status = fs::status(root, ec);
  if (ec || !fs::exists(status)) return not_found("model path not found: " + path);

  TensorStore store;
  store.root_ = path;
  if (!fs::is_directory(status)) {
    auto file = SafetensorsFile::open(path);
    if (!file.ok()) return file.status();
    store.layout_ = StoreLayout::kSingleFile;
    DI_TRY(store.add_file(std::move(file).value()));
    std::sort(store.names_.begin(), store.names_.end());
    return store;
  }

  const fs::path index_path = root / kSafetensorsIndexName;
  if (fs::exists(index_path, ec)) {
    store.layout_ = StoreLayout::kIndexed;
    auto index = read_index(index_path);
    if (!index.ok()) return index.status();
    if (!index->is_object() || !index->contains("weight_map") ||
        !(*index)["weight_map"].is_object()) {
      return data_loss(index_path.string() +
                       ": expected an object with a 'weight_map' object (tensor name -> shard "
                       "file)");
    }
    const json& weight_map = (*index)["weight_map"];
    // shard file -> tensors the index places there, in index order
    std::map<std::string, std::vector<std::string>> by_shard;
    for (const auto& [name, shard] : weight_map.items()) {
      if (!shard.is_string()) {
        return data_loss(index_path.string() + ": weight_map entry for '" + name +
                         "' must be a file name string, found " + json_brief(shard));
      }
      const auto& shard_name = shard.get_ref<const std::string&>();
      if (!is_plain_relative(shard_name)) {
        return data_loss(index_path.string() + ": weight_map entry for '" + name +
                         "' names shard '" + shard_name +
                         "', which is not a file inside the model directory");
      }
      by_shard[shard_name].push_back(name);
    }
    if (by_shard.empty()) return data_loss(index_path.string() + ": weight_map is empty");
    if (by_shard.size() > kMaxShards) {
      return invalid_argument(index_path.string() + ": " +
                              limit_message(format_count(by_shard.size()) + " shard files",
                                            kMaxShards, "kMaxShards in src/io/io_limits.h",
                                            "merge the shards into fewer, larger files"));
    }
    for (const auto& [shard_name, tensors] : by_shard) {
      const fs::path shard_path = root / shard_name;
      if (!fs::exists(shard_path, ec)) {
        return not_found(index_path.string() + " places tensor '" + tensors.front() +
                         "' in shard '" + shard_name + "', but " + shard_path.string() +
                         " does not exist");
      }
      auto file = SafetensorsFile::open(shard_path.string());
      if (!file.ok()) return file.status();
      for (const auto& name : tensors) {
        if ((*file)->find(name) == nullptr) {
          return data_loss("tensor '" + name + "' is listed in " + index_path.string() +
                           " for shard " + shard_name + ", but " + shard_path.string() +
                           " does not contain it");
        }
      }
      for (const auto& e : (*file)->entries()) {
        if (!weight_map.contains(e.name)) {
          store.warnings_.push_back("tensor '" + e.name + "' is stored in " + shard_name +
                                    " but not listed in " + kSafetensorsIndexName);
        }
      }
      DI_TRY(store.add_file(std::move(file).value()));
    }
  } else if (fs::exists(root / "model.safetensors", ec)) {
    store.layout_ = StoreLayout::kSingleFile;
    auto file = SafetensorsFile::open((root / "model.safetensors").string());
    if (!file.ok()) return file.status();
    DI_TRY(store.add_file(std::move(file).value()));
  } else {
    store.layout_ = StoreLayout::kDirectory;
    std::vector<fs::path> shards;
    for (const auto& de : fs::directory_iterator(root, ec)) {
      if (de.path().extension() == ".safetensors") shards.push_back(de.path());
    }
    if (ec) return failed_precondition("cannot list " + path + ": " + ec.message());
    if (shards.empty()) {
      return not_found("no safetensors files in " + path + " (expected " + kSafetensorsIndexName +
                       ", model.safetensors, or *.safetensors shards)");
    }
    std::sort(shards.begin(), shards.end());
    for (const auto& shard : shards) {
      auto file = SafetensorsFile::open(shard.string());
      if (!file.ok()) return file.status();
      DI_TRY(store.add_file(std::move(file).value()));
    }
  }
  std::sort(store.names_.begin(), store.names_.end());
  return store;
}

const TensorStore::Location* TensorStore::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &it->second;
}

}  // namespace deepinfer::io
