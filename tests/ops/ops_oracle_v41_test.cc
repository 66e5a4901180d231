// The ops DeepSeek-V4.1 adds to the contract (spec §6, §6.7), on every backend against
// independent oracles: float64 re-computations of the equations, hand-computed cases with their
// ties and edges, and the identities that link them to V4's ops. A device backend that claims
// a V4.1 feature joins backends() and must pass the same cases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops_test_util.h"

namespace deepinfer::backend::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

class V41OracleTest : public OracleTest {};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Single-pass mHC (spec §6.1): hc_pre with collapse_pre collapses the streams with the given
// rows, and returns this site's own pre, post and comb exactly as the V4 call computes them.
TEST_P(V41OracleTest, SinglePassHcPreCollapsesWithTheGivenPre) {
  const int n = 4;
  const int64_t D = 24, M = 3;
  Buf fn = random_buf(rng_, (2 + n) * n, n * D, -0.5f, 0.5f);
  Buf base = random_buf(rng_, 1, (2 + n) * n);
  Buf scale = random_buf(rng_, 1, 3, 0.5f, 2.0f);
  const HcParams p{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
  Buf X = random_buf(rng_, M, n * D, -2.0f, 2.0f);
  Buf prev = random_buf(rng_, M, n, 0.0f, 1.0f);

  Buf y0(M, D), post0(M, n), comb0(M, n * n);
  ops_->hc_pre(X.cmat(), p, {}, y0.mat(), {}, post0.mat(), comb0.mat());
  Buf y1(M, D), pre1(M, n), post1(M, n), comb1(M, n * n);
  ops_->hc_pre(X.cmat(), p, prev.cmat(), y1.mat(), pre1.mat(), post1.mat(), comb1.mat());
  EXPECT_EQ(post1.v, post0.v);  // the site's own mixing does not depend on what it collapses with
  EXPECT_EQ(comb1.v, comb0.v);

  Buf want_pre(M, n), want_y(M, D);
  for (int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (int64_t c = 0; c < n * D; ++c) ss += std::pow(static_cast<double>(X.at(m, c)), 2);
    const double rho = 1.0 / std::sqrt(ss / static_cast<double>(n * D) + 1e-6);
    for (int i = 0; i < n; ++i) {
      double mu = 0;
      for (int64_t c = 0; c < n * D; ++c) mu += static_cast<double>(fn.at(i, c)) * X.at(m, c);
      want_pre.at(m, i) = static_cast<float>(
          sigmoid(mu * rho * scale.v[0] + base.v[static_cast<size_t>(i)]) + 1e-6);
    }
    for (int64_t c = 0; c < D; ++c) {
      double a = 0;
      for (int i = 0; i < n; ++i) a += static_cast<double>(prev.at(m, i)) * X.at(m, i * D + c);
      want_y.at(m, c) = static_cast<float>(a);
    }
  }
  EXPECT_TRUE(close(pre1.v, want_pre.v, 1e-5));
  EXPECT_TRUE(close(y1.v, want_y.v, 1e-6));
  // V4's collapse is the V4.1 collapse with the site's own pre.
  Buf y_own(M, D);
  ops_->hc_collapse(X.cmat(), pre1.cmat(), n, y_own.mat());
  EXPECT_TRUE(close(y_own.v, y0.v, 1e-6));
  Buf y_prev(M, D);
  ops_->hc_collapse(X.cmat(), prev.cmat(), n, y_prev.mat());
  EXPECT_TRUE(close(y_prev.v, want_y.v, 1e-6));
}

// NVFP4 (spec §6.7 item 6): per 16-channel block, s = e4m3(max(amax, 6·2^-9) / 6) (round to
// nearest even), x <- e2m1(x / s) · s with ties to the even code.
TEST_P(V41OracleTest, FakeQuantNvfp4ScaleAndGrid) {
  Buf x(1, 32);
  std::fill(x.v.begin(), x.v.end(), 0.0f);
  // Block 0: amax 6 -> s = 1, the E2M1 grid itself; ties go to the even code.
  const float in0[6] = {6.0f, 0.25f, 0.75f, 5.0f, -2.5f, 1.3f};
  const float out0[6] = {6.0f, 0.0f, 1.0f, 4.0f, -2.0f, 1.5f};
  for (int i = 0; i < 6; ++i) x.v[static_cast<size_t>(i)] = in0[i];
  // Block 1: amax 7 -> 7/6 = 1.1667 rounds to the E4M3 value 1.125 (not a power of two, unlike
  // MXFP4); 7 / 1.125 = 6.22 clamps to 6 -> 6.75; 1.0 / 1.125 = 0.889 -> 1 -> 1.125.
  x.v[16] = 7.0f;
  x.v[17] = 1.0f;
  x.v[18] = -0.3f;  // 0.267 -> 0.5 is nearer than 0 -> -0.5625
  ops_->fake_quant_nvfp4(x.mat(), 16);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(x.v[static_cast<size_t>(i)], out0[i]) << i;
  EXPECT_EQ(x.v[16], 6.75f);
  EXPECT_EQ(x.v[17], 1.125f);
  EXPECT_EQ(x.v[18], -0.5625f);
  EXPECT_EQ(x.v[19], 0.0f);

  // A block of zeros stays zero (the floor keeps the scale positive), a tiny one uses the floor.
  Buf z(1, 16);
  std::fill(z.v.begin(), z.v.end(), 0.0f);
  z.v[3] = 1e-4f;  // below 6·2^-9 = 0.0117: s = 2^-9, 1e-4 / 2^-9 = 0.0512 -> 0
  ops_->fake_quant_nvfp4(z.mat(), 16);
  for (float v : z.v) EXPECT_EQ(v, 0.0f);

  // Random rows against the float64 oracle, with a partial last block (cols % 16 != 0).
  Buf r = random_buf(rng_, 3, 72, -3.0f, 3.0f);
  Buf want = r;
  for (int64_t m = 0; m < r.rows; ++m) {
    for (int64_t b = 0; b < r.cols; b += 16) {
      const int64_t e = std::min<int64_t>(b + 16, r.cols);
      double amax = 0;
      for (int64_t c = b; c < e; ++c)
        amax = std::max(amax, std::fabs(static_cast<double>(r.at(m, c))));
      const double s = grid_round(std::max(amax, 6.0 * std::ldexp(1.0, -9)) / 6.0, false);
      for (int64_t c = b; c < e; ++c)
        want.at(m, c) = static_cast<float>(grid_round(r.at(m, c) / s, true) * s);
    }
  }
  ops_->fake_quant_nvfp4(r.mat(), 16);
  EXPECT_TRUE(close(r.v, want.v, 0.0));
  Buf again = r;  // idempotent: quantized values are on the grid of their own scale
  ops_->fake_quant_nvfp4(again.mat(), 16);
  EXPECT_EQ(again.v, r.v);
}

// MXFP4's amax floor is 6·2^-126 in V4.1's references: a block of zeros stays zero and tiny
// blocks keep their values' scale (V4's 1e-4 floor would flush them).
TEST_P(V41OracleTest, FakeQuantFp4FloorKeepsTinyBlocks) {
  Buf x(1, 32);
  std::fill(x.v.begin(), x.v.end(), 0.0f);
  ops_->fake_quant_fp4(x.mat(), 32);
  for (float v : x.v) EXPECT_EQ(v, 0.0f);
  x.v[0] = 3e-5f;   // amax/6 = 5e-6 -> s = 2^-17; 3e-5 / 2^-17 = 3.93 -> 4 -> 4·2^-17
  x.v[1] = -1e-5f;  // 1.31 -> 1.5
  ops_->fake_quant_fp4(x.mat(), 32);
  EXPECT_EQ(x.v[0], std::ldexp(4.0f, -17));
  EXPECT_EQ(x.v[1], -std::ldexp(1.5f, -17));
}

// Hierarchical selection, level one (spec §6.2, §6.7 item 3) and level two's mask.
TEST_P(V41OracleTest, CandidateBlocksAndRestriction) {
  // Row 0: 10 visible rows in blocks of 3: [0,1,2] max 5, [3,4,5] max 7, [6,7,8] max 5 (a tie
  // with block 0: the lower block wins), [9] holds the newest row: +inf. Two blocks: 3 and 1.
  // Row 1: 4 visible rows, blocks [0,1,2] and [3] (newest): both, ascending.
  // Row 2: nothing visible: all -1.
  // Row 3: -inf scores are not candidates even when there is room (rows masked before).
  Buf s(4, 12);
  const float row0[12] = {1, 5, 2, 7, 0, -1, 5, 3, 4, -9, 100, 100};
  const float row1[12] = {0, 1, 2, 3, 50, 50, 50, 50, 50, 50, 50, 50};
  const float row3[12] = {-kInf, -kInf, -kInf, 2, 1, 0, 0, 0, 0, 0, 0, 0};
  for (int c = 0; c < 12; ++c) {
    s.at(0, c) = row0[c];
    s.at(1, c) = row1[c];
    s.at(2, c) = 1;
    s.at(3, c) = row3[c];
  }
  const int32_t visible[4] = {10, 4, 0, 5};
  std::vector<int32_t> blocks(4 * 3, 99);
  ops_->candidate_blocks(s.cmat(), visible, 3, 3, blocks.data());
  EXPECT_EQ(std::vector<int32_t>(blocks.begin(), blocks.begin() + 3),
            (std::vector<int32_t>{0, 1, 3}))
      << "block 3 (newest, +inf), block 1 (7), then block 0 over block 2 (both 5: the lower)";
  EXPECT_EQ(std::vector<int32_t>(blocks.begin() + 3, blocks.begin() + 6),
            (std::vector<int32_t>{0, 1, -1}));
  EXPECT_EQ(std::vector<int32_t>(blocks.begin() + 6, blocks.begin() + 9),
            (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(std::vector<int32_t>(blocks.begin() + 9, blocks.end()),
            (std::vector<int32_t>{1, -1, -1}))
      << "block 0 is all -inf: not a candidate; block 1 holds the newest row";

  Buf r = s;
  ops_->restrict_to_blocks(r.mat(), visible, blocks.data(), 3, 3);
  for (int c = 0; c < 12; ++c) {
    const bool kept0 = c >= 10 || (c / 3) != 2;  // rows past visible are untouched
    EXPECT_EQ(r.at(0, c), kept0 ? s.at(0, c) : -kInf) << "row 0 col " << c;
    EXPECT_EQ(r.at(1, c), s.at(1, c)) << "row 1: both blocks kept";
    EXPECT_EQ(r.at(2, c), s.at(2, c)) << "row 2: nothing visible, nothing masked";
  }
  // A top-k over the restricted scores never picks a masked row, even with room to spare.
  std::vector<int32_t> top(4 * 12);
  ops_->topk(r.cmat(), visible, 12, top.data());
  for (int c = 0; c < 12; ++c) {
    const int32_t pick = top[static_cast<size_t>(c)];
    if (pick >= 0) {
      EXPECT_NE(pick / 3, 2) << "a masked row was picked";
    }
  }
  EXPECT_EQ(std::count_if(top.begin(), top.begin() + 12, [](int32_t v) { return v >= 0; }), 7);
  EXPECT_EQ(std::count_if(top.begin() + 36, top.end(), [](int32_t v) { return v >= 0; }), 2);
}

// The Engram gate (spec §6.7 item 1), float64 oracle; also the sign of a negative dot.
TEST_P(V41OracleTest, EngramGateMatchesFloat64) {
  const int n = 4;
  const int64_t D = 32, M = 5;
  Buf streams = random_buf(rng_, M, n * D, -2.0f, 2.0f);
  Buf kv = random_buf(rng_, M, (n + 1) * D, -1.5f, 1.5f);
  Buf w = random_buf(rng_, n, D, 0.5f, 1.5f);
  const float eps = 1e-6f;
  Buf want = streams;
  int negative = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int k = 0; k < n; ++k) {
      double hh = 0, kk = 0, dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double h = streams.at(m, k * D + d), key = kv.at(m, k * D + d);
        hh += h * h;
        kk += key * key;
        dot += h * w.at(k, d) * key;
      }
      dot *= 1.0 / std::sqrt(hh / D + eps) / std::sqrt(kk / D + eps) / std::sqrt(double(D));
      negative += dot < 0;
      const double g = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(dot), 1e-6)), dot));
      for (int64_t d = 0; d < D; ++d) {
        want.at(m, k * D + d) =
            static_cast<float>(streams.at(m, k * D + d) + g * kv.at(m, n * D + d));
      }
    }
  }
  EXPECT_GT(negative, 0) << "the case should exercise a negative dot";
  ops_->engram_gate(streams.mat(), kv.cmat(), w.cmat(), n, eps);
  EXPECT_TRUE(close(streams.v, want.v, 2e-6));
}

// V4.1's router options (spec §6.7 item 5): z / gate_temp before sqrt(softplus); normalisation
// p / (Σp + floor) only when asked (top_k > 1); none for top-1.
TEST_P(V41OracleTest, RouterTemperatureAndNormalisation) {
  const int64_t E = 10, D = 16, M = 3;
  OwnedWeight gate = random_weight(rng_, WKind::kF32, E, D, 1.0f);
  Buf x = random_buf(rng_, M, D, -2.0f, 2.0f), bias = random_buf(rng_, 1, E, -0.3f, 0.3f);
  for (const RouteOpts& opts : {RouteOpts{0.7f, true, 1e-20f}, RouteOpts{1.3f, false, 0.0f}}) {
    for (int top_k : {1, 3}) {
      std::vector<double> p(static_cast<size_t>(M * E));
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t e = 0; e < E; ++e) {
          double z = 0;
          for (int64_t c = 0; c < D; ++c)
            z += static_cast<double>(x.at(m, c)) * weight_at(gate.ref, e, c);
          p[static_cast<size_t>(m * E + e)] = std::sqrt(std::log1p(std::exp(z / opts.temperature)));
        }
      }
      std::vector<int32_t> ids(static_cast<size_t>(M * top_k));
      Buf w(M, top_k);
      ops_->moe_route_score(x.cmat(), gate.ref, bias.v.data(), top_k, 1.5f, opts, ids.data(),
                            w.mat());
      for (int64_t m = 0; m < M; ++m) {
        std::vector<int32_t> order(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
          return p[static_cast<size_t>(m * E + a)] + bias.v[static_cast<size_t>(a)] >
                 p[static_cast<size_t>(m * E + b)] + bias.v[static_cast<size_t>(b)];
        });
        double sum = 0;
        for (int j = 0; j < top_k; ++j)
          sum += p[static_cast<size_t>(m * E + order[static_cast<size_t>(j)])];
        for (int j = 0; j < top_k; ++j) {
          const double pj = p[static_cast<size_t>(m * E + order[static_cast<size_t>(j)])];
          EXPECT_EQ(ids[static_cast<size_t>(m * top_k + j)], order[static_cast<size_t>(j)]);
          const double want = (opts.normalize ? pj / (sum + opts.norm_floor) : pj) * 1.5;
          EXPECT_NEAR(w.at(m, j), want, 1e-5 * std::max(1.0, std::fabs(want)))
              << "temperature " << opts.temperature << " top_k " << top_k;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, V41OracleTest, ::testing::ValuesIn(backends()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace deepinfer::backend::testing
