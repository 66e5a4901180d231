// Fuzz target: config.json text in any of the forms the loader accepts (Hugging Face V4, the
// official names, V4.1's composite and flat layouts). parse_model_config must return a config
// or an error naming the field, never crash, recurse without bound or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = deepinfer::io::parse_model_config(text, "fuzz/config.json");
  (void)cfg;
  return 0;
}
