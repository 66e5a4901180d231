// Every backend against independent oracles: hand-decoded bytes, hand-computed small cases and
// float64 re-computations written here from the spec's equations (spec §2.2-§2.7, §4).
#include <algorithm>
#include <bit>
#include <numeric>

#include "backend/cpu/ref/ref_ops.h"
#include "ops_test_util.h"

namespace deepinfer::backend::testing {
namespace {

TEST_P(OracleTest, AddScaleCopyRows) {
  Buf a(2, 3), b(1, 3), out(2, 3);
  a.v = {1, 2, 3, 4, 5, 6};
  b.v = {10, 20, 30};
  ops_->add(a.cmat(), b.cmat(), out.mat());  // broadcast row
  EXPECT_EQ(out.v, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  ops_->add(a.cmat(), a.cmat(), a.mat());  // aliasing out = a
  EXPECT_EQ(a.v, (std::vector<float>{2, 4, 6, 8, 10, 12}));
  ops_->scale(a.mat(), 0.5f);
  EXPECT_EQ(a.v, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const int32_t rows[3] = {1, 1, 0};
  Buf g(3, 3);
  ops_->copy_rows(a.cmat(), rows, g.mat());
  EXPECT_EQ(g.v, (std::vector<float>{4, 5, 6, 4, 5, 6, 1, 2, 3}));
  Buf strided(2, 5);
  ops_->copy_rows(a.cmat(), nullptr, strided.mat().cols_slice(1, 3));
  EXPECT_EQ(strided.at(1, 3), 6.0f);
  EXPECT_TRUE(std::isnan(strided.at(1, 4)));  // outside the slice: untouched
}

TEST_P(OracleTest, LinearDenseAndActQuantMatchFloat64) {
  for (WKind kind : {WKind::kBf16, WKind::kF32, WKind::kFp8E8m0, WKind::kFp4}) {
    OwnedWeight w = random_weight(rng_, kind, 9, 160);
    Buf x = random_buf(rng_, 3, 160);
    for (bool aq : {false, true}) {
      Buf want(3, 9);
      for (int64_t m = 0; m < 3; ++m) {
        std::vector<double> xv(x.v.begin() + m * 160, x.v.begin() + (m + 1) * 160);
        if (aq && w.ref.quantized()) {
          for (int64_t b = 0; b < 160; b += 128) {
            const int64_t e = std::min<int64_t>(160, b + 128);
            double amax = 0;
            for (int64_t c = b; c < e; ++c)
              amax = std::max(amax, std::fabs(xv[static_cast<size_t>(c)]));
            const double s = pow2_ceil_scale(amax, 448.0);
            for (int64_t c = b; c < e; ++c)
              xv[static_cast<size_t>(c)] = grid_round(xv[static_cast<size_t>(c)] / s, false) * s;
          }
        }
        for (int64_t n = 0; n < 9; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < 160; ++k)
            acc += xv[static_cast<size_t>(k)] * weight_at(w.ref, n, k);
          want.at(m, n) = static_cast<float>(acc);
        }
      }
      Buf y(3, 9);
      ops_->linear(x.cmat(), w.ref, y.mat(), {.act_quant = aq});
      EXPECT_TRUE(close(y.v, want.v, 1e-5)) << wkind_name(kind) << " act_quant " << aq;
    }
  }
}

TEST_P(OracleTest, EmbedAndRmsNorm) {
  OwnedWeight table = random_weight(rng_, WKind::kBf16, 10, 24);
  const int32_t ids[3] = {7, 0, 7};
  Buf e(3, 24);
  ops_->embed(ids, 3, table.ref, e.mat());
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 24; ++c) EXPECT_EQ(e.at(i, c), weight_at(table.ref, ids[i], c));
  OwnedWeight nw = random_weight(rng_, WKind::kBf16, 1, 8, 1.0f);
  for (int64_t group : {0, 8}) {
    Buf y(3, 24);
    const WeightRef* wp = group == 8 ? &nw.ref : nullptr;
    ops_->rms_norm(e.cmat(), wp, 1e-6f, group, y.mat());
    const int64_t g = group ? group : 24;
    Buf want(3, 24);
    for (int64_t m = 0; m < 3; ++m) {
      for (int64_t c0 = 0; c0 < 24; c0 += g) {
        double ss = 0;
        for (int64_t c = 0; c < g; ++c) ss += std::pow(e.at(m, c0 + c), 2);
        for (int64_t c = 0; c < g; ++c) {
          want.at(m, c0 + c) = static_cast<float>(e.at(m, c0 + c) / std::sqrt(ss / g + 1e-6) *
                                                  (wp ? weight_at(*wp, 0, c) : 1.0));
        }
      }
    }
    EXPECT_TRUE(close(y.v, want.v, 1e-6)) << "group " << group;
  }
}

TEST_P(OracleTest, YarnRangeAndRope) {
  const YarnParams yarn{16.0f, 65536, 32.0f, 1.0f};
  const YarnRange r = yarn_range(160000.0f, 64, yarn);
  EXPECT_EQ(r.low, 15);
  EXPECT_EQ(r.high, 25);
  const std::vector<float> plain = make_rope_freqs(10000.0f, 64);
  const std::vector<float> f = make_rope_freqs(160000.0f, 64, &yarn);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_NEAR(plain[1], std::pow(10000.0, -2.0 / 64), 1e-7);
  EXPECT_NEAR(f[3], std::pow(160000.0, -6.0 / 64), 1e-7);          // below low: unchanged
  EXPECT_NEAR(f[30], std::pow(160000.0, -60.0 / 64) / 16, 1e-10);  // above high: /factor
  const double ramp20 = (20.0 - 15) / 10;
  EXPECT_NEAR(f[20], std::pow(160000.0, -40.0 / 64) * (1 - ramp20 + ramp20 / 16), 1e-8);
  // Interleaved pairs on the last rope_dim channels: pair j of head h rotates by pos·f_j.
  const int64_t H = 2, hd = 12;
  const std::vector<float> fr = {0.5f, 0.25f};  // rope_dim 4
  Buf x = random_buf(rng_, 2, H * hd);
  Buf orig = x;
  const int32_t pos[2] = {3, 1000};
  ops_->rope(x.mat(), H, hd, pos, fr, false);
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(x.at(m, h * hd + c), orig.at(m, h * hd + c));
      for (int j = 0; j < 2; ++j) {
        const double a =
            static_cast<double>(static_cast<float>(pos[m]) * fr[static_cast<size_t>(j)]);
        const double re = orig.at(m, h * hd + 8 + 2 * j), im = orig.at(m, h * hd + 9 + 2 * j);
        EXPECT_NEAR(x.at(m, h * hd + 8 + 2 * j), re * std::cos(a) - im * std::sin(a), 1e-5);
        EXPECT_NEAR(x.at(m, h * hd + 9 + 2 * j), re * std::sin(a) + im * std::cos(a), 1e-5);
      }
    }
  }
  ops_->rope(x.mat(), H, hd, pos, fr, true);  // inverse undoes
  EXPECT_TRUE(close(x.v, orig.v, 1e-5));
}

// float64 mHC from the spec (§2.2): returns y, post, comb for one token.
void hc_pre_f64(const float* x, int n, int64_t D, const HcParams& p, std::vector<double>& y,
                std::vector<double>& post, std::vector<double>& C) {
  double ss = 0;
  for (int64_t c = 0; c < n * D; ++c) ss += static_cast<double>(x[c]) * x[c];
  const double rho = 1 / std::sqrt(ss / (n * D) + p.norm_eps);
  std::vector<double> mu(static_cast<size_t>((2 + n) * n));
  for (size_t r = 0; r < mu.size(); ++r) {
    double a = 0;
    for (int64_t c = 0; c < n * D; ++c)
      a += static_cast<double>(p.fn.at(static_cast<int64_t>(r), c)) * x[c];
    mu[r] = a * rho;
  }
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> pre(static_cast<size_t>(n));
  post.assign(static_cast<size_t>(n), 0);
  C.assign(static_cast<size_t>(n * n), 0);
  for (int i = 0; i < n; ++i) {
    pre[static_cast<size_t>(i)] =
        sig(mu[static_cast<size_t>(i)] * p.scale[0] + p.base[i]) + p.hc_eps;
    post[static_cast<size_t>(i)] =
        2 * sig(mu[static_cast<size_t>(n + i)] * p.scale[1] + p.base[n + i]);
  }
  for (int i = 0; i < n * n; ++i)
    C[static_cast<size_t>(i)] = mu[static_cast<size_t>(2 * n + i)] * p.scale[2] + p.base[2 * n + i];
  auto rows = [&](bool softmax) {
    for (int i = 0; i < n; ++i) {
      double mx = -1e300, s = 0;
      for (int j = 0; j < n; ++j) mx = std::max(mx, C[static_cast<size_t>(i * n + j)]);
      for (int j = 0; j < n; ++j)
        s += softmax ? std::exp(C[static_cast<size_t>(i * n + j)] - mx)
                     : C[static_cast<size_t>(i * n + j)];
      for (int j = 0; j < n; ++j) {
        double& c = C[static_cast<size_t>(i * n + j)];
        c = softmax ? std::exp(c - mx) / s + p.hc_eps : c / (s + p.hc_eps);
      }
    }
  };
  auto cols = [&] {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += C[static_cast<size_t>(i * n + j)];
      for (int i = 0; i < n; ++i) C[static_cast<size_t>(i * n + j)] /= s + p.hc_eps;
    }
  };
  rows(true);
  cols();
  for (int it = 1; it < p.sinkhorn_iters; ++it) {
    rows(false);
    cols();
  }
  y.assign(static_cast<size_t>(D), 0);
  for (int64_t c = 0; c < D; ++c)
    for (int i = 0; i < n; ++i)
      y[static_cast<size_t>(c)] += pre[static_cast<size_t>(i)] * x[i * D + c];
}

TEST_P(OracleTest, HyperConnectionsSinkhornAndTranspose) {
  const int n = 4;
  const int64_t D = 40, M = 3;
  Buf fn = random_buf(rng_, 24, n * D, -0.5f, 0.5f);
  Buf base = random_buf(rng_, 1, 24);
  Buf scale = random_buf(rng_, 1, 3, 0.5f, 2.0f);
  HcParams p{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
  Buf X = random_buf(rng_, M, n * D);
  Buf y(M, D), post(M, n), comb(M, n * n);
  ops_->hc_pre(X.cmat(), p, {}, y.mat(), {}, post.mat(), comb.mat());
  Buf wy(M, D), wpost(M, n), wcomb(M, n * n);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> yy, pp, cc;
    hc_pre_f64(X.cmat().row(m), n, D, p, yy, pp, cc);
    for (int64_t c = 0; c < D; ++c) wy.at(m, c) = static_cast<float>(yy[static_cast<size_t>(c)]);
    for (int i = 0; i < n; ++i) wpost.at(m, i) = static_cast<float>(pp[static_cast<size_t>(i)]);
    for (int i = 0; i < n * n; ++i) wcomb.at(m, i) = static_cast<float>(cc[static_cast<size_t>(i)]);
    for (int i = 0; i < n; ++i) {  // columns normalised last; rows only approximately
      double rs = 0, cs = 0;
      for (int j = 0; j < n; ++j) {
        rs += comb.at(m, i * n + j);
        cs += comb.at(m, j * n + i);
      }
      EXPECT_NEAR(rs, 1.0, 0.1);
      EXPECT_NEAR(cs, 1.0, 1e-5);
    }
  }
  {  // With enough iterations Sinkhorn reaches a doubly stochastic matrix.
    HcParams many = p;
    many.sinkhorn_iters = 500;
    Buf c2(M, n * n);
    ops_->hc_pre(X.cmat(), many, {}, y.mat(), {}, post.mat(), c2.mat());
    for (int64_t m = 0; m < M; ++m) {
      for (int i = 0; i < n; ++i) {
        double rs = 0, cs = 0;
        for (int j = 0; j < n; ++j) {
          rs += c2.at(m, i * n + j);
          cs += c2.at(m, j * n + i);
        }
        EXPECT_NEAR(rs, 1.0, 1e-4);
        EXPECT_NEAR(cs, 1.0, 1e-5);
      }
    }
    ops_->hc_pre(X.cmat(), p, {}, y.mat(), {}, post.mat(), comb.mat());
  }
  EXPECT_TRUE(close(y.v, wy.v, 1e-5));
  EXPECT_TRUE(close(post.v, wpost.v, 1e-5));
  EXPECT_TRUE(close(comb.v, wcomb.v, 1e-5));
  // hc_post with a deliberately asymmetric comb: X'_k = post_k o + Σ_j C_jk X_j.
  Buf o = random_buf(rng_, M, D);
  Buf C = random_buf(rng_, M, n * n, 0.0f, 1.0f);
  Buf want(M, n * D);
  for (int64_t m = 0; m < M; ++m) {
    for (int k = 0; k < n; ++k) {
      for (int64_t c = 0; c < D; ++c) {
        double a = static_cast<double>(post.at(m, k)) * o.at(m, c);
        for (int j = 0; j < n; ++j)
          a += static_cast<double>(C.at(m, j * n + k)) * X.at(m, j * D + c);
        want.at(m, k * D + c) = static_cast<float>(a);
      }
    }
  }
  Buf out = X;  // in place: out aliases streams
  ops_->hc_post(out.cmat(), o.cmat(), post.cmat(), C.cmat(), n, out.mat());
  EXPECT_TRUE(close(out.v, want.v, 1e-5));
  // hc_head.
  Buf hfn = random_buf(rng_, n, n * D, -0.5f, 0.5f);
  HcParams hp{n, hfn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 0};
  Buf hy(M, D), hwant(M, D);
  ops_->hc_head(X.cmat(), hp, hy.mat());
  for (int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (int64_t c = 0; c < n * D; ++c) ss += std::pow(X.at(m, c), 2);
    const double rho = 1 / std::sqrt(ss / (n * D) + 1e-6);
    for (int64_t c = 0; c < D; ++c) {
      double a = 0;
      for (int i = 0; i < n; ++i) {
        double mu = 0;
        for (int64_t cc = 0; cc < n * D; ++cc)
          mu += static_cast<double>(hfn.at(i, cc)) * X.at(m, cc);
        a +=
            (1 / (1 + std::exp(-(mu * rho * scale.v[0] + base.v[static_cast<size_t>(i)]))) + 1e-6) *
            X.at(m, i * D + c);
      }
      hwant.at(m, c) = static_cast<float>(a);
    }
  }
  EXPECT_TRUE(close(hy.v, hwant.v, 1e-5));
}

TEST_P(OracleTest, SparseAttentionWithSinkEqualsFormula) {
  const int64_t H = 3, d = 16, R = 10, L = 6, M = 3;
  Buf q = random_buf(rng_, M, H * d, -2.0f, 2.0f), kv = random_buf(rng_, R, d);
  const std::vector<int32_t> idx = {0,  3,  -1, 9,  4,  4,   //
                                    -1, -1, -1, -1, -1, -1,  // no key: zero output
                                    1,  2,  5,  6,  7,  8};
  const float sink[3] = {0.5f, -1.0f, 2.0f};
  for (bool bf16 : {false, true}) {
    for (bool with_sink : {true, false}) {
      Buf o(M, H * d), want(M, H * d);
      ops_->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, with_sink ? sink : nullptr,
                             0.25f, bf16, o.mat());
      for (int64_t t = 0; t < M; ++t) {
        for (int64_t h = 0; h < H; ++h) {
          std::vector<double> z;
          std::vector<int32_t> rows;
          for (int64_t j = 0; j < L; ++j) {
            const int32_t r = idx[static_cast<size_t>(t * L + j)];
            if (r < 0) continue;
            double a = 0;
            for (int64_t c = 0; c < d; ++c)
              a += static_cast<double>(q.at(t, h * d + c)) * kv.at(r, c);
            z.push_back(a * 0.25);
            rows.push_back(r);
          }
          for (int64_t c = 0; c < d; ++c) want.at(t, h * d + c) = 0.0f;
          if (rows.empty()) continue;
          const double mx = *std::max_element(z.begin(), z.end());
          double den = with_sink ? std::exp(sink[h] - mx) : 0.0;
          for (double v : z) den += std::exp(v - mx);
          for (size_t j = 0; j < rows.size(); ++j) {
            double pj = std::exp(z[j] - mx);
            if (bf16) pj = bf16_round(static_cast<float>(pj));
            for (int64_t c = 0; c < d; ++c)
              want.at(t, h * d + c) += static_cast<float>(pj / den * kv.at(rows[j], c));
          }
        }
      }
      EXPECT_TRUE(close(o.v, want.v, bf16 ? 1e-4 : 1e-5))
          << "bf16 " << bf16 << " sink " << with_sink;
    }
  }
}

TEST_P(OracleTest, SoftmaxPoolWithMissingSlots) {
  const int64_t W = 5, S = 4;
  Buf vals = random_buf(rng_, 8, W, -3.0f, 3.0f), gates = random_buf(rng_, 8, W, -4.0f, 4.0f);
  std::vector<PoolSlot> slots;
  for (int r = 0; r < 3; ++r) {
    for (int s = 0; s < S; ++s) {
      const bool missing = (r == 0 && s < 2) || r == 2;
      const int row = (r * S + s) % 8;
      slots.push_back(missing ? PoolSlot{} : PoolSlot{vals.cmat().row(row), gates.cmat().row(row)});
    }
  }
  Buf out(3, W), want(3, W);
  ops_->softmax_pool(slots, S, out.mat());
  for (int r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < W; ++c) {
      double num = 0, den = 0;
      for (int s = 0; s < S; ++s) {
        const PoolSlot& sl = slots[static_cast<size_t>(r * S + s)];
        if (!sl.value) continue;
        den += std::exp(static_cast<double>(sl.gate[c]));
        num += std::exp(static_cast<double>(sl.gate[c])) * sl.value[c];
      }
      want.at(r, c) = den > 0 ? static_cast<float>(num / den) : 0.0f;
    }
  }
  EXPECT_TRUE(close(out.v, want.v, 1e-6));
}

TEST_P(OracleTest, Hadamard128) {
  Buf x = random_buf(rng_, 2, 256);
  Buf orig = x, want(2, 256);
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t c0 = 0; c0 < 256; c0 += 128) {
      for (int i = 0; i < 128; ++i) {
        double a = 0;
        for (int j = 0; j < 128; ++j)
          a += (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * x.at(m, c0 + j);
        want.at(m, c0 + i) = static_cast<float>(a / std::sqrt(128.0));
      }
    }
  }
  ops_->hadamard128(x.mat());
  EXPECT_TRUE(close(x.v, want.v, 1e-6));
  ops_->hadamard128(x.mat());  // normalised H is its own inverse
  EXPECT_TRUE(close(x.v, orig.v, 1e-6));
}

TEST_P(OracleTest, IndexerScoresAndTopk) {
  const int64_t Hi = 4, di = 8, R = 9, M = 3;
  Buf q = random_buf(rng_, M, Hi * di), w = random_buf(rng_, M, Hi, 0.0f, 1.0f),
      keys = random_buf(rng_, R, di);
  const int32_t vis[3] = {9, 4, 0};
  for (bool bf16 : {false, true}) {
    Buf s(M, R), want(M, R);
    ops_->indexer_scores(q.cmat(), Hi, w.cmat(), keys.cmat(), vis, bf16, s.mat());
    for (int64_t t = 0; t < M; ++t) {
      for (int64_t r = 0; r < R; ++r) {
        if (r >= vis[t]) {
          want.at(t, r) = -std::numeric_limits<float>::infinity();
          continue;
        }
        double a = 0;
        for (int64_t h = 0; h < Hi; ++h) {
          double dot = 0;
          for (int64_t c = 0; c < di; ++c)
            dot += static_cast<double>(q.at(t, h * di + c)) * keys.at(r, c);
          a += w.at(t, h) * std::max(dot, 0.0);
        }
        want.at(t, r) = static_cast<float>(a);
      }
    }
    EXPECT_TRUE(close(s.v, want.v, bf16 ? 2e-2 : 1e-6)) << "bf16 " << bf16;
  }
  Buf sc(2, 6);
  sc.v = {0.5f, 3.0f, 0.5f, -1.0f, 7.0f, 3.0f,  //
          1.0f, 2.0f, 9.0f, 9.0f,  9.0f, 9.0f};
  const int32_t v2[2] = {6, 2};
  std::vector<int32_t> out(8, 99);
  ops_->topk(sc.cmat(), v2, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{4, 1, 5, 0, 1, 0, -1, -1}));
}

TEST_P(OracleTest, RoutingScoreAndHash) {
  const int64_t E = 12, D = 20, M = 2;
  OwnedWeight gate = random_weight(rng_, WKind::kBf16, E, D, 1.0f);
  Buf x = random_buf(rng_, M, D), bias = random_buf(rng_, 1, E, -0.3f, 0.3f);
  std::vector<double> p(static_cast<size_t>(M * E));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t e = 0; e < E; ++e) {
      double z = 0;
      for (int64_t c = 0; c < D; ++c)
        z += static_cast<double>(x.at(m, c)) * weight_at(gate.ref, e, c);
      p[static_cast<size_t>(m * E + e)] = std::sqrt(std::log1p(std::exp(z)));
    }
  }
  std::vector<int32_t> ids(static_cast<size_t>(M * 3));
  Buf w(M, 3);
  ops_->moe_route_score(x.cmat(), gate.ref, bias.v.data(), 3, 1.5f, {}, ids.data(), w.mat());
  for (int64_t m = 0; m < M; ++m) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return p[static_cast<size_t>(m * E + a)] + bias.v[static_cast<size_t>(a)] >
             p[static_cast<size_t>(m * E + b)] + bias.v[static_cast<size_t>(b)];
    });
    double sum = 0;
    for (int j = 0; j < 3; ++j)
      sum += p[static_cast<size_t>(m * E + order[static_cast<size_t>(j)])];
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(ids[static_cast<size_t>(m * 3 + j)], order[static_cast<size_t>(j)]);
      EXPECT_NEAR(w.at(m, j),
                  p[static_cast<size_t>(m * E + order[static_cast<size_t>(j)])] / sum * 1.5, 1e-5);
    }
  }
  const std::vector<int64_t> table = {3, 1, 7, 0, 11, 5, 2, 2, 9};  // [3 tokens, 3]
  const int32_t tok[2] = {2, 0};
  ops_->moe_route_hash(x.cmat(), tok, TensorView::make(DType::kI64, {3, 3}, table.data()), gate.ref,
                       1.5f, ids.data(), w.mat());
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 2, 9, 3, 1, 7}));
  const double s1 = p[12 + 3] + p[12 + 1] + p[12 + 7];
  EXPECT_NEAR(w.at(1, 0), p[12 + 3] / s1 * 1.5, 1e-5);
  EXPECT_NEAR(w.at(1, 2), p[12 + 7] / s1 * 1.5, 1e-5);
}

TEST_P(OracleTest, SwigluClamp) {
  Buf a(1, 4), b(1, 4), o(1, 4);
  a.v = {12.0f, -1.0f, 0.0f, 2.0f};
  b.v = {1.0f, -20.0f, 5.0f, 3.0f};
  ops_->swiglu(a.cmat(), b.cmat(), 10.0f, o.mat());
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  EXPECT_NEAR(o.v[0], silu(10.0) * 1.0, 1e-5);
  EXPECT_NEAR(o.v[1], silu(-1.0) * -10.0, 1e-5);
  EXPECT_EQ(o.v[2], 0.0f);
  EXPECT_NEAR(o.v[3], silu(2.0) * 3.0, 1e-5);
}

TEST_P(OracleTest, MoeExpertsMatchFloat64) {
  const int64_t D = 64, I = 32, M = 4, E = 3;
  std::vector<OwnedWeight> own;
  std::vector<ExpertWeights> ex;
  for (int e = 0; e < E; ++e) {
    own.push_back(random_weight(rng_, WKind::kFp4, I, D, 1.0f));
    own.push_back(random_weight(rng_, WKind::kFp4, I, D, 1.0f));
    own.push_back(random_weight(rng_, WKind::kFp8E8m0, D, I));
  }
  for (int e = 0; e < E; ++e)
    ex.push_back({own[static_cast<size_t>(3 * e)].ref, own[static_cast<size_t>(3 * e + 1)].ref,
                  own[static_cast<size_t>(3 * e + 2)].ref});
  Buf x = random_buf(rng_, M, D), g = random_buf(rng_, M, 2, 0.1f, 1.0f);
  const std::vector<int32_t> ids = {2, 0, 1, -1, 0, 2, 1, 0};
  Buf want(M, D);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> acc(static_cast<size_t>(D), 0.0);
    for (int j = 0; j < 2; ++j) {
      const int32_t e = ids[static_cast<size_t>(m * 2 + j)];
      if (e < 0) continue;
      std::vector<double> h(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double a = 0, b = 0;
        for (int64_t c = 0; c < D; ++c) {
          a += x.at(m, c) * static_cast<double>(weight_at(ex[static_cast<size_t>(e)].w1, i, c));
          b += x.at(m, c) * static_cast<double>(weight_at(ex[static_cast<size_t>(e)].w3, i, c));
        }
        a = std::min(a, 10.0);
        b = std::clamp(b, -10.0, 10.0);
        h[static_cast<size_t>(i)] = a / (1 + std::exp(-a)) * b;
      }
      for (int64_t c = 0; c < D; ++c) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i)
          y += h[static_cast<size_t>(i)] * weight_at(ex[static_cast<size_t>(e)].w2, c, i);
        acc[static_cast<size_t>(c)] += g.at(m, j) * y;
      }
    }
    for (int64_t c = 0; c < D; ++c) want.at(m, c) = static_cast<float>(acc[static_cast<size_t>(c)]);
  }
  for (bool before : {true, false}) {
    Buf out(M, D);
    MoeOpts o;
    o.weight_before_w2 = before;
    ops_->moe_experts(x.cmat(), ids.data(), g.cmat(), 2, ex, o, out.mat());
    EXPECT_TRUE(close(out.v, want.v, 1e-5)) << "before " << before;
    o.accumulate = true;  // out += again doubles it
    ops_->moe_experts(x.cmat(), ids.data(), g.cmat(), 2, ex, o, out.mat());
    for (float& v : want.v) v *= 2;
    EXPECT_TRUE(close(out.v, want.v, 1e-5)) << "accumulate";
    for (float& v : want.v) v /= 2;
  }
}

TEST(OpsContract, RequireNamesMissingFeatures) {
  auto ref = cpu::make_ref_ops();
  EXPECT_TRUE(require(*ref, {Feature::kFp8Weights, Feature::kSparseAttention}).ok());
  struct NoFp4 : cpu::RefOps {
    const char* name() const override { return "no-fp4"; }
    bool supports(Feature f) const override {
      return f != Feature::kFp4Weights && RefOps::supports(f);
    }
  } partial;
  const Status s = require(partial, {Feature::kFp8Weights, Feature::kFp4Weights});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("no-fp4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("FP4"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("FP8"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Backends, OracleTest, ::testing::ValuesIn(backends()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace deepinfer::backend::testing
