// Op cases for Ops::topk at the indexer's sizes: long rows (4,096 and 16,384 visible, k 512 and
// 2048, the V4 family's index_topk range), exact ties at the cut (a coarse grid, BF16-rounded
// scores, every score equal, +0 and -0), -inf rows and rows with fewer finite scores than k,
// visible below k, 0, negative or past the columns, the extremes of the float range, and the
// shapes where the CUDA launcher changes kernel (docs/cuda_backend.md: the rank count up to 256
// columns and past k 4096, the radix select otherwise). Every result is the oracle's indices
// exactly, through host and through device visible/out arrays.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../op_harness.h"

namespace deepinfer::backend::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs topk on the backend under test (scores with a padded leading dimension) and checks it
// against the oracle, with visible/out in host memory and in the backend's memory.
void check_topk(CaseContext& ctx, const std::string& what, const Buf& scores,
                const std::vector<int32_t>& visible, int64_t k) {
  std::vector<int32_t> want(static_cast<size_t>(scores.rows * k));
  ctx.ref->topk(scores.cmat(), visible.data(), k, want.data());
  const DBuf dscores = dev_copy(ctx, scores, 3);
  std::vector<int32_t> got(want.size(), -7);
  ctx.ops->topk(dscores.cmat(), visible.data(), k, got.data());
  const std::string shape = " [" + std::to_string(scores.rows) + " x " +
                            std::to_string(scores.cols) + "] k=" + std::to_string(k);
  equal_ints(ctx, "topk " + what + shape, got, want);
  BackendMem dout = dev_array(ctx, std::vector<int32_t>(want.size(), -7));
  const BackendMem dvis = dev_array(ctx, visible);
  ctx.ops->topk(dscores.cmat(), dvis.as<int32_t>(), k, dout.as<int32_t>());
  equal_ints(ctx, "topk device arrays " + what + shape, download_ints(ctx, dout, want.size()),
             want);
}

// BF16 rounding (to nearest even) of every score: what the indexer's official-semantics scores
// look like, 256 values per octave, so long rows hold many exact ties.
void round_to_bf16(Buf& b) {
  for (float& v : b.v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&v, &u, 4);
  }
}

std::vector<int32_t> full_rows(int64_t rows, int64_t visible) {
  return std::vector<int32_t>(static_cast<size_t>(rows), static_cast<int32_t>(visible));
}

}  // namespace

OP_CASE(topk_long_rows, kOnAll, Feature::kIndexer) {
  for (int64_t R : {4096, 16384}) {
    // Whole rows, an odd length, about half, and past the columns (clamped to R).
    const std::vector<int32_t> vis = {static_cast<int32_t>(R), static_cast<int32_t>(R - 1),
                                      static_cast<int32_t>(R / 2 + 3), static_cast<int32_t>(R + 7)};
    const int64_t M = static_cast<int64_t>(vis.size());
    Buf fp32 = random_buf(ctx.rng, M, R, -4.0f, 4.0f);
    Buf bf16 = random_buf(ctx.rng, M, R, -1.0f, 3.0f);
    round_to_bf16(bf16);
    for (int64_t k : {512, 2048}) {
      check_topk(ctx, "fp32 scores", fp32, vis, k);
      check_topk(ctx, "bf16 scores", bf16, vis, k);
    }
  }
}

OP_CASE(topk_ties, kOnAll, Feature::kIndexer) {
  for (int64_t R : {4096, 16384}) {
    const int64_t M = 5;
    Buf sc(M, R);
    for (int64_t j = 0; j < R; ++j) {
      sc.at(0, j) = static_cast<float>(ctx.rng() % 8);     // R/8 copies of each value
      sc.at(1, j) = 1.5f;                                  // all equal
      sc.at(2, j) = (ctx.rng() & 1) ? 0.0f : -0.0f;        // +0 == -0: ties by index
      sc.at(3, j) = (ctx.rng() % 64 == 0) ? 2.0f : -1.0f;  // few above, a huge tie below
      sc.at(4, j) = static_cast<float>(j % 3) - 1.0f;      // periodic
    }
    for (int64_t k : {1, 512, 2048}) check_topk(ctx, "ties", sc, full_rows(M, R), k);
  }
  // Scores one ulp apart, the k-th among thousands equal to it: the select resolves every digit
  // and then breaks the tie by index.
  {
    const int64_t R = 8192, k = 1000;
    const float below = std::nextafter(1.0f, 0.0f), above = std::nextafter(1.0f, 2.0f);
    Buf sc(1, R);
    for (int64_t j = 0; j < R; ++j) {
      const uint32_t r = ctx.rng() % 100;
      sc.at(0, j) = r < 5 ? above : r < 65 ? 1.0f : below;
    }
    check_topk(ctx, "ulp-apart ties", sc, full_rows(1, R), k);
  }
}

OP_CASE(topk_masked_and_short, kOnAll, Feature::kIndexer) {
  const int64_t R = 4096, k = 512;
  const std::vector<float> extremes = {kInf,
                                       std::numeric_limits<float>::max(),
                                       1.0f,
                                       std::numeric_limits<float>::denorm_min(),
                                       0.0f,
                                       -0.0f,
                                       -std::numeric_limits<float>::denorm_min(),
                                       -1.0f,
                                       std::numeric_limits<float>::lowest(),
                                       -kInf};
  Buf sc = random_buf(ctx.rng, 8, R, -2.0f, 2.0f);
  for (int64_t j = 0; j < R; ++j) {
    sc.at(0, j) = -kInf;                                  // all masked
    if ((j / 64) % 16 != 5) sc.at(1, j) = -kInf;          // 4 blocks of 64 left
    if (j >= k) sc.at(2, j) = -kInf;                      // exactly k finite
    if (j % 2 == 1) sc.at(3, j) = -kInf;                  // half masked
    sc.at(4, j) = extremes[ctx.rng() % extremes.size()];  // the float range
  }
  // Rows 5..7: visible below k, zero, negative.
  const std::vector<int32_t> vis = {static_cast<int32_t>(R),
                                    static_cast<int32_t>(R),
                                    static_cast<int32_t>(R),
                                    static_cast<int32_t>(R),
                                    static_cast<int32_t>(R),
                                    300,
                                    0,
                                    -3};
  check_topk(ctx, "masked and short rows", sc, vis, k);
  check_topk(ctx, "masked and short rows", sc, vis, 2048);
  // k = visible exactly, and k past every row.
  check_topk(ctx, "k = visible", sc, full_rows(sc.rows, R / 2), R / 2);
  check_topk(ctx, "k past the row", sc, full_rows(sc.rows, 1000), 1500);
}

// Where the CUDA launcher switches kernel: both sides of 256 columns, k past 4096 (the rank
// count), one row of a single column, and many rows at once.
OP_CASE(topk_paths, kOnAll, Feature::kIndexer) {
  struct Shape {
    int64_t M, R, k;
  };
  for (Shape s : {Shape{3, 1, 4}, Shape{6, 200, 64}, Shape{6, 256, 300}, Shape{6, 257, 64},
                  Shape{2, 6000, 5000}, Shape{2, 6000, 4096}, Shape{300, 1024, 512}}) {
    Buf sc = random_buf(ctx.rng, s.M, s.R, -1.0f, 1.0f);
    round_to_bf16(sc);
    std::vector<int32_t> vis(static_cast<size_t>(s.M));
    for (int64_t t = 0; t < s.M; ++t)
      vis[static_cast<size_t>(t)] = static_cast<int32_t>(s.R - (t * 37) % (s.R + 1));
    check_topk(ctx, "paths", sc, vis, s.k);
  }
}

// NaN scores (the indexer never produces them): the CUDA kernels never pick one, as if it were
// -inf. Unspecified on the CPU backends (ops.h), so CUDA only, against the oracle on the scores
// with every NaN made -inf.
OP_CASE(topk_nan_never_picked, kOnCuda, Feature::kIndexer) {
  for (int64_t R : {200, 4096}) {
    const int64_t M = 3, k = 128;
    Buf sc = random_buf(ctx.rng, M, R);
    Buf as_inf = sc;
    for (size_t i = 0; i < sc.v.size(); ++i) {
      if (ctx.rng() % 3 == 0 || i < static_cast<size_t>(R)) {  // row 0: every score NaN
        sc.v[i] = std::numeric_limits<float>::quiet_NaN();
        as_inf.v[i] = -kInf;
      }
    }
    std::vector<int32_t> want(static_cast<size_t>(M * k)), got(want.size(), -7);
    const std::vector<int32_t> vis = full_rows(M, R);
    ctx.ref->topk(as_inf.cmat(), vis.data(), k, want.data());
    const DBuf dsc = dev_copy(ctx, sc, 1);
    ctx.ops->topk(dsc.cmat(), vis.data(), k, got.data());
    equal_ints(ctx, "topk with NaN scores R=" + std::to_string(R), got, want);
  }
}

}  // namespace deepinfer::backend::testing
