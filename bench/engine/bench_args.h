// The command-line pieces the engine benchmarks share: `--name=value` flags and comma lists.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace deepinfer::bench {

// The value of `arg` when it is `name=value` (e.g. flag_value(argv[i], "--model")), else null.
inline const char* flag_value(const char* arg, const char* name) {
  const size_t n = std::strlen(name);
  return std::strncmp(arg, name, n) == 0 && arg[n] == '=' ? arg + n + 1 : nullptr;
}

// "256,1024" -> {256, 1024}; stops at the first entry that is not a number.
inline std::vector<int64_t> int_list(const char* s) {
  std::vector<int64_t> out;
  while (*s != '\0') {
    char* end = nullptr;
    out.push_back(std::strtoll(s, &end, 10));
    if (end == s) {
      out.pop_back();
      break;
    }
    s = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace deepinfer::bench
