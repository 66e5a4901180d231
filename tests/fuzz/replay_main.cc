// A `main` for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on every
// file given (a directory stands for the regular files directly in it, in name order). The
// default build (GCC, no clang) links each target with it as TARGET_replay, and CTest runs it
// over tests/fuzz/corpus/TARGET, so an input that once crashed a parser fails CI if it crashes
// again. No inputs at all is an error: a mistyped corpus path must not pass as an empty run.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The file's bytes in a buffer of exactly their size (a read past the end is a read past
// the allocation, as under libFuzzer).
bool run_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot open %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<uint8_t> data(bytes.begin(), bytes.end());
  // Named before it runs: when a parser crashes, the last line names the input.
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), data.size());
  LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(arg, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", arg.c_str(), ec.message().c_str());
        return 1;
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        if (!run_file(f)) return 1;
        ++ran;
      }
    } else {
      if (!run_file(arg)) return 1;
      ++ran;
    }
  }
  if (ran == 0) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  std::fprintf(stderr, "replay: %zu inputs ran\n", ran);
  return 0;
}
