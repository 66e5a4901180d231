// TensorStore: every tensor of a model directory, whatever the file layout.
//
// Layouts: `model.safetensors.index.json` (weight_map: tensor -> shard file; each shard mapped
// once), a single `model.safetensors`, or a directory of *.safetensors with no index. A tensor
// name may live in one file only. Names are kept exactly as stored (no renaming here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"

namespace deepinfer::io {

enum class StoreLayout : uint8_t { kSingleFile, kIndexed, kDirectory };
std::string_view store_layout_name(StoreLayout layout);

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

class TensorStore {
 public:
  struct Location {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };

  // `path` is a model directory, or one .safetensors file. Errors name the file and tensor:
  // kNotFound for a missing directory/file/shard, kDataLoss for a corrupt file, a tensor listed
  // in the index but absent from its shard, or a name stored in two files.
  static Expected<TensorStore> open(const std::string& path);

  const Location* find(std::string_view name) const;
  TensorView view(const Location& loc) const { return loc.file->view(*loc.entry); }
  // All stored names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  StoreLayout layout() const { return layout_; }
  const std::string& root() const { return root_; }
  // Non-fatal findings (e.g. a tensor stored in a shard but not listed in the index).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  Status add_file(std::unique_ptr<SafetensorsFile> file);

  std::string root_;
  StoreLayout layout_ = StoreLayout::kSingleFile;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, Location> by_name_;
  std::vector<std::string> names_;
  std::vector<std::string> warnings_;
};

}  // namespace deepinfer::io
