// Fuzz target: a safetensors image (header length, JSON header, data) as any file on disk may
// hold it. parse_safetensors must return a value or an error, never crash, read out of bounds or
// allocate without bound (io/safetensors.h: header at most 100 MB, every offset checked).
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = deepinfer::io::parse_safetensors(data, size, "fuzz.safetensors");
  if (parsed.ok()) {
    // Touch what a loader reads: every entry's extent lies inside the image.
    for (const auto& e : parsed->entries) (void)e;
  }
  return 0;
}
