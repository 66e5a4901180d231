// The scalar rules of the CUDA kernels (src/kernels/cuda/common.cuh), checked on the CPU against
// the host definitions they must match bit for bit (base/numeric_types.h, backend/quant.h):
// every FP8/FP4/E8M0/F16 code, the E4M3x2 -> half2 conversion the decode GEMV uses (including
// which byte lands in which half), and BF16 rounding, power-of-two scales and the E4M3/E2M1
// round trips over a sweep of float bit patterns; the top-k ordering key's order; the GPU
// sampler's split of a row over a cluster's blocks, and its top-p radix select by mass run over
// whole rows against the host sampler's cut. Host code only, so it runs without a GPU (CI).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/quant.h"
#include "base/numeric_types.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/indexer/topk_key.cuh"
#include "kernels/cuda/sample/sample_slice.cuh"
#include "kernels/cuda/sample/top_p_mass.cuh"
#include "sample/processors.h"

namespace {

int failures = 0;

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

void expect_same(const char* what, uint64_t input, float got, float want) {
  if (same(got, want)) return;
  if (++failures <= 20) {
    std::printf("FAIL %s(0x%llx): got %.9g want %.9g\n", what,
                static_cast<unsigned long long>(input), static_cast<double>(got),
                static_cast<double>(want));
  }
}

}  // namespace

int main() {
  namespace kc = deepinfer::kernels::cuda;
  namespace be = deepinfer::backend;
  for (uint32_t v = 0; v < 256; ++v) {
    expect_same("fp8_e4m3_to_f", v, kc::fp8_e4m3_to_f(v),
                deepinfer::fp8_e4m3_to_float(static_cast<uint8_t>(v)));
    expect_same("e8m0_to_f", v, kc::e8m0_to_f(v),
                deepinfer::e8m0_to_float(static_cast<uint8_t>(v)));
  }
  for (uint32_t v = 0; v < 16; ++v) {
    expect_same("fp4_e2m1_to_f", v, kc::fp4_e2m1_to_f(v),
                deepinfer::fp4_e2m1_to_float(static_cast<uint8_t>(v)));
  }
  for (uint32_t v = 0; v < 65536; ++v) {
    expect_same("f16_bits_to_f", v, kc::f16_bits_to_f(static_cast<uint16_t>(v)),
                deepinfer::fp16_to_float(static_cast<uint16_t>(v)));
    expect_same("bf16_bits_to_f", v, kc::bf16_bits_to_f(static_cast<uint16_t>(v)),
                deepinfer::bf16_to_float(static_cast<uint16_t>(v)));
    // The GEMV's FP8 path: low byte -> .x, high byte -> .y, exact through half.
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    expect_same("cvt_fp8x2.x", v, f.x,
                deepinfer::fp8_e4m3_to_float(static_cast<uint8_t>(v & 0xff)));
    expect_same("cvt_fp8x2.y", v, f.y, deepinfer::fp8_e4m3_to_float(static_cast<uint8_t>(v >> 8)));
  }
  // Float sweep: every exponent with random mantissas, plus special values.
  std::mt19937 rng(5);
  auto check_float = [&](uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, 4);
    expect_same("bf16_round_d", bits, kc::bf16_round_d(x), be::bf16_round(x));
    expect_same("fp8_e4m3_round_d", bits, kc::fp8_e4m3_round_d(x), be::fp8_e4m3_round(x));
    expect_same("fp4_e2m1_round_d", bits, kc::fp4_e2m1_round_d(x), be::fp4_e2m1_round(x));
    if (std::isfinite(x) && x >= 0.0f) {
      expect_same("pow2_scale_d fp8", bits, kc::pow2_scale_d(x, kc::kFp8MaxD),
                  be::pow2_scale(x, be::kFp8Max));
      expect_same("pow2_scale_d fp4", bits, kc::pow2_scale_d(x, kc::kFp4MaxD),
                  be::pow2_scale(x, be::kFp4Max));
    }
  };
  for (uint32_t e = 0; e < 256; ++e) {
    for (int i = 0; i < 4000; ++i) {
      const uint32_t mant = (i < 8) ? static_cast<uint32_t>(i) : (rng() & 0x7fffffu);
      check_float((e << 23) | mant);
      check_float(0x80000000u | (e << 23) | mant);
    }
  }
  // Exact ties of the E4M3 and E2M1 grids (and their neighbours one ulp away).
  for (int c = 0; c < 0x7e; ++c) {
    const float a = deepinfer::fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const float b = deepinfer::fp8_e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = 0.5f * (a + b);
    uint32_t u;
    std::memcpy(&u, &mid, 4);
    for (uint32_t d : {u - 1, u, u + 1}) check_float(d);
  }
  for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f}) {
    uint32_t u;
    std::memcpy(&u, &mid, 4);
    for (uint32_t d : {u - 1, u, u + 1}) check_float(d);
  }
  // The top-k ordering key (indexer/topk_key.cuh) on every sign and exponent with sampled
  // mantissas (the extremes included): -inf and NaN take the never-picked key, every other float
  // a larger one, and in float order the keys rise exactly where the floats do (so +0 and -0,
  // which compare equal, share a key).
  {
    std::vector<float> pickable;
    for (uint32_t e = 0; e < 256; ++e) {
      for (int i = 0; i < 64; ++i) {
        const uint32_t mant = i < 3    ? static_cast<uint32_t>(i)
                              : i == 3 ? 0x7fffffu
                                       : (rng() & 0x7fffffu);
        for (uint32_t sign : {0u, 0x80000000u}) {
          const uint32_t bits = sign | (e << 23) | mant;
          float x;
          std::memcpy(&x, &bits, 4);
          if (std::isnan(x) || x == -INFINITY) {
            if (kc::topk_key(x) != kc::kTopkNeverKey && ++failures <= 20)
              std::printf("FAIL topk_key(0x%x) is not the never-picked key\n", bits);
          } else {
            pickable.push_back(x);
          }
        }
      }
    }
    std::sort(pickable.begin(), pickable.end());
    for (size_t i = 0; i < pickable.size(); ++i) {
      const float a = pickable[i];
      const uint32_t ka = kc::topk_key(a);
      bool ok = ka != kc::kTopkNeverKey;
      if (i + 1 < pickable.size()) {
        const float b = pickable[i + 1];
        const uint32_t kb = kc::topk_key(b);
        ok = ok && (a < b) == (ka < kb) && (a == b) == (ka == kb);
      }
      if (!ok && ++failures <= 20)
        std::printf("FAIL topk_key order at %.9g (key 0x%x)\n", static_cast<double>(a), ka);
    }
  }
  // The GPU sampler's slices (sample_slice.cuh): for every cluster size, the ranks' ids are
  // consecutive runs of whole mass blocks covering the row once, in rank order.
  for (const int64_t vocab : {1, 63, 64, 65, 100, 1000, 8191, 129280, 140000}) {
    for (const unsigned size : {1u, 2u, 4u, 8u}) {
      int64_t next = 0, next_block = 0;
      bool ok = true;
      for (unsigned rank = 0; rank < size; ++rank) {
        const kc::SampleSlice sl = kc::sample_slice(vocab, size, rank);
        if (sl.lo >= sl.hi) {  // owns nothing: only past the row's end
          ok = ok && sl.lo >= vocab && sl.b_lo == sl.b_hi;
          continue;
        }
        ok = ok && sl.lo == next && sl.b_lo == next_block && sl.lo == sl.b_lo * 64 &&
             sl.hi == std::min<int64_t>(vocab, sl.b_hi * 64);
        next = sl.hi;
        next_block = sl.b_hi;
      }
      ok = ok && next == vocab && next_block == (vocab + 63) / 64;
      if (!ok && ++failures <= 20) {
        std::printf("FAIL sample_slice vocab %lld over %u blocks\n", static_cast<long long>(vocab),
                    size);
      }
    }
  }
  // top_p's radix select by mass (top_p_mass.cuh), run over whole rows as the GPU sampler's
  // cluster runs it for a flat row (8 passes of 8 bits over the canonical keys, each digit
  // weighted by its tokens' fixed-point masses): its cut is the host sampler's, bit for bit, on
  // V4-sized rows from flat to peaked, with ties and -inf entries; and the fixed-point mass and
  // threshold are the host's.
  {
    std::mt19937 rng(45);
    const float inf = std::numeric_limits<float>::infinity();
    for (int trial = 0; trial < 24; ++trial) {
      const int64_t V = trial < 12 ? 129280 : 5000;
      const float scale = 0.25f + 0.5f * static_cast<float>(trial % 6);  // flat to peaked
      const float top_p = 0.1f + 0.08f * static_cast<float>(trial % 11);
      std::normal_distribution<float> nd(0.0f, scale);
      std::vector<float> row(static_cast<size_t>(V));
      for (float& x : row) x = std::round(nd(rng) * 16.0f) / 16.0f;  // many exact ties
      if (trial % 4 == 1) {
        for (size_t i = 0; i < row.size(); i += 7) row[i] = -inf;
      }
      std::vector<float> host = row;
      deepinfer::sample::TopPScratch scratch;
      deepinfer::sample::apply_top_p(host, top_p, scratch);

      float m = -inf;
      for (const float x : row) m = std::max(m, x);
      std::vector<float> w(row.size());
      unsigned long long total = 0;
      bool masses_agree = true;
      for (size_t i = 0; i < row.size(); ++i) {
        w[i] = deepinfer::sample::exp_nonpositive(row[i] - m);
        total += kc::top_p_mass_of(w[i]);
        masses_agree = masses_agree && kc::top_p_mass_of(w[i]) == deepinfer::sample::top_p_mass(w[i]);
      }
      const unsigned long long threshold = kc::top_p_threshold_of(top_p, total);
      unsigned long long prefix = 0, below = 0;
      for (int shift = 56; shift >= 0; shift -= 8) {
        unsigned long long mass[256] = {};
        const unsigned long long mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
        for (size_t i = 0; i < row.size(); ++i) {
          uint32_t bits;
          std::memcpy(&bits, &w[i], 4);
          const unsigned long long key = kc::top_p_key(bits, static_cast<uint32_t>(i));
          if ((key & mask) == (prefix & mask)) mass[(key >> shift) & 0xFF] += kc::top_p_mass_of(w[i]);
        }
        prefix |= static_cast<unsigned long long>(kc::top_p_radix_digit(mass, below, threshold, &below))
                  << shift;
      }
      const auto last = static_cast<size_t>(static_cast<uint32_t>(prefix));
      const uint32_t last_bits = kc::top_p_key_weight_bits(prefix);
      float last_w;
      std::memcpy(&last_w, &last_bits, 4);
      size_t differ = 0, kept = 0;
      for (size_t i = 0; i < row.size(); ++i) {
        const bool keep = w[i] > last_w || (w[i] == last_w && i <= last);
        const float got = keep ? row[i] : -inf;
        differ += same(got, host[i]) ? 0 : 1;
        kept += host[i] != -inf ? 1 : 0;
      }
      if ((differ > 0 || !masses_agree ||
           threshold != deepinfer::sample::top_p_threshold(top_p, total)) &&
          ++failures <= 20) {
        std::printf("FAIL top-p radix select, trial %d (vocab %lld, top_p %g): %zu ids differ from "
                    "the host's cut of %zu%s\n",
                    trial, static_cast<long long>(V), static_cast<double>(top_p), differ, kept,
                    masses_agree ? "" : ", fixed-point masses differ");
      }
    }
  }
  if (failures) {
    std::printf("%d mismatches between the CUDA scalar rules and the host definitions\n", failures);
    return 1;
  }
  std::printf("kernels_host_test: all CUDA scalar rules match the host definitions\n");
  return 0;
}
