// A model directory holding only a committed fixture's config.json (and its tokenizer.json when
// asked): what `--load-format dummy` loads. Shared by the io, model and engine tests of it.
#pragma once

#include <string>

namespace deepinfer::testing {

class ConfigOnlyDir {
 public:
  // `fixture`: a committed model folder (absolute path). Throws std::runtime_error naming the
  // file when a copy fails.
  explicit ConfigOnlyDir(const std::string& fixture, bool with_tokenizer = false);
  ~ConfigOnlyDir();
  ConfigOnlyDir(const ConfigOnlyDir&) = delete;
  ConfigOnlyDir& operator=(const ConfigOnlyDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace deepinfer::testing
