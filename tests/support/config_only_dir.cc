#include "config_only_dir.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace deepinfer::testing {

namespace fs = std::filesystem;

ConfigOnlyDir::ConfigOnlyDir(const std::string& fixture, bool with_tokenizer) {
  static std::atomic<int> counter{0};
  const fs::path dir =
      fs::temp_directory_path() /
      ("deepinfer_config_only_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  path_ = dir.string();
  for (const char* name : {"config.json", "tokenizer.json"}) {
    if (std::string(name) == "tokenizer.json" && !with_tokenizer) continue;
    std::error_code ec;
    fs::copy_file(fs::path(fixture) / name, dir / name, ec);
    if (ec) {
      throw std::runtime_error("ConfigOnlyDir: cannot copy " + (fs::path(fixture) / name).string() +
                               ": " + ec.message());
    }
  }
}

ConfigOnlyDir::~ConfigOnlyDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace deepinfer::testing
