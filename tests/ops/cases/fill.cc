// Ops::fill_random (the weights of `--load-format dummy`): every fill kind, at every element
// size, written by the backend under test in its own memory equals the host fill
// (fill_random_host, tensor/random_fill.h) bit for bit, also past a CUDA grid's first stride and
// at odd lengths. On CudaOps this is the device kernel against the host rule it shares.
#include <cstring>
#include <string>
#include <vector>

#include "../op_harness.h"
#include "tensor/random_fill.h"

namespace deepinfer::backend::testing {

OP_CASE(fill_random, kOnAll) {
  struct Fill {
    const char* what;
    RandomFill f;
  };
  const uint64_t seed = 20240617;
  const Fill fills[] = {
      {"normal bf16", normal_fill(random_fill_key(seed, 1, 0), DType::kBF16, 1.0f, 0.1f)},
      {"normal f32", normal_fill(random_fill_key(seed, 2, 0), DType::kF32, 0.0f, 0.02f)},
      {"fp8 near one", fp8_near_one_fill(random_fill_key(seed, 3, 0))},
      {"bytes (fp4)", byte_fill(random_fill_key(seed, 4, 0))},
      {"e8m0 constant", constant_fill(DType::kF8E8M0, 122)},
      {"ids i64", distinct_ids_fill(random_fill_key(seed, 5, 0), DType::kI64, 256, 6)},
      {"ids i32", distinct_ids_fill(random_fill_key(seed, 6, 0), DType::kI32, 7, 7)},
  };
  // 1 and 4093 (odd), 6 x 10007 ids rows; on CUDA also 2^24 + 3 one-byte elements: past the
  // kernel's 65536 blocks of 256 threads, into its grid-stride loop.
  const int64_t kLong = (int64_t{1} << 24) + 3;
  const int64_t lengths[] = {1, 4093, 60042, kLong};
  for (const Fill& fl : fills) {
    for (int64_t n : lengths) {
      if (n == kLong && (ctx.on != kOnCuda || fl.f.elem_bytes > 1)) continue;
      const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(fl.f.elem_bytes);
      std::vector<uint8_t> want(bytes);
      fill_random_host(want.data(), n, fl.f);
      BackendMem dev(*ctx.ops, bytes);
      ctx.ops->fill_random(dev.data(), n, fl.f);
      const std::vector<uint8_t> got = download_array<uint8_t>(ctx, dev, bytes);
      size_t first = 0;
      while (first < bytes && got[first] == want[first]) ++first;
      check(ctx,
            std::string("fill_random ") + fl.what + " n" + std::to_string(n) +
                (first < bytes ? ": first differing byte " + std::to_string(first) : ""),
            first == bytes);
    }
  }
}

}  // namespace deepinfer::backend::testing
