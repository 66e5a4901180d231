// Every non-reference backend against the ref backend on many random shapes (odd sizes, K not a
// multiple of the block, M = 1 and M = 300), with a per-op tolerance; plus thread-count
// invariance (bit-identical outputs for 1 and 3 threads).
#include <bit>
#include <numeric>

#include "ops_test_util.h"
#include "paged_rows.h"

namespace deepinfer::backend::testing {
namespace {

std::vector<BackendCase> candidates() {
  std::vector<BackendCase> all = backends();
  all.erase(all.begin());  // ref is the oracle here
  return all;
}

class BackendVsRef : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    ops_ = GetParam().make();
    ref_ = cpu::make_ref_ops();
  }
  std::unique_ptr<Ops> ops_, ref_;
  std::mt19937 rng_{99};
};

TEST_P(BackendVsRef, Linear) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 37, 200}, {7, 130, 256}, {300, 48, 96}, {2, 257, 130}, {1, 4, 32}};
  for (WKind kind :
       {WKind::kBf16, WKind::kF16, WKind::kF32, WKind::kFp8E8m0, WKind::kFp8F32, WKind::kFp4}) {
    for (const Shape& s : shapes) {
      const int64_t k = kind == WKind::kFp4 ? (s.k + 1) / 2 * 2 : s.k;
      OwnedWeight w = random_weight(rng_, kind, s.n, k);
      Buf x = random_buf(rng_, s.m, k);
      for (bool aq : {false, true}) {
        Buf y(s.m, s.n), want(s.m, s.n);
        ref_->linear(x.cmat(), w.ref, want.mat(), {.act_quant = aq});
        ops_->linear(x.cmat(), w.ref, y.mat(), {.act_quant = aq});
        EXPECT_TRUE(close(y.v, want.v, 1e-5))
            << wkind_name(kind) << " m" << s.m << " n" << s.n << " k" << k << " aq" << aq;
      }
    }
  }
  // A strided input (column slice) and a row slice of an FP8 weight (grouped wo_a).
  OwnedWeight w = random_weight(rng_, WKind::kFp8E8m0, 256, 64, 0.1f, 128, 128);
  Buf big = random_buf(rng_, 5, 200);
  const CMat xs = big.cmat().cols_slice(10, 64);
  const WeightRef half = w.ref.slice_rows(128, 128);
  Buf y(5, 128), want(5, 128);
  ref_->linear(xs, half, want.mat());
  ops_->linear(xs, half, y.mat());
  EXPECT_TRUE(close(y.v, want.v, 1e-5));
}

// The GEMM's block edges (opt_gemm_avx2.cc: 4 x 3 and 1-2 x 4 register blocks, 24-row tasks,
// 512-column chunks, 8-lane masked tails): every row count mod 4, weight-row counts around the
// block and task widths, K below one vector, odd, and past a chunk; an unaligned, strided x.
TEST_P(BackendVsRef, LinearBlockEdges) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{3, 25, 77},  {5, 50, 13}, {6, 23, 1100}, {9, 7, 5},
                          {4, 49, 520}, {2, 3, 129}, {13, 48, 64}};
  for (WKind kind :
       {WKind::kBf16, WKind::kF16, WKind::kF32, WKind::kFp8E8m0, WKind::kFp8F32, WKind::kFp4}) {
    for (const Shape& s : shapes) {
      const int64_t k = kind == WKind::kFp4 ? (s.k + 1) / 2 * 2 : s.k;
      OwnedWeight w = random_weight(rng_, kind, s.n, k);
      Buf big = random_buf(rng_, s.m, k + 7);
      const CMat x = big.cmat().cols_slice(3, k);  // ld = k + 7, rows start unaligned
      Buf y(s.m, s.n), want(s.m, s.n);
      ref_->linear(x, w.ref, want.mat());
      ops_->linear(x, w.ref, y.mat());
      EXPECT_TRUE(close(y.v, want.v, 1e-5))
          << wkind_name(kind) << " m" << s.m << " n" << s.n << " k" << k;
    }
  }
}

TEST_P(BackendVsRef, RowOps) {
  for (int64_t M : {1, 7, 300}) {
    Buf x = random_buf(rng_, M, 256, -3.0f, 3.0f);
    OwnedWeight nw = random_weight(rng_, WKind::kBf16, 1, 256, 1.0f);
    Buf a(M, 256), b(M, 256);
    ref_->rms_norm(x.cmat(), &nw.ref, 1e-6f, 0, a.mat());
    ops_->rms_norm(x.cmat(), &nw.ref, 1e-6f, 0, b.mat());
    EXPECT_TRUE(close(b.v, a.v, 1e-6)) << "rms_norm M" << M;
    ref_->rms_norm(x.cmat(), nullptr, 1e-6f, 64, a.mat());
    ops_->rms_norm(x.cmat(), nullptr, 1e-6f, 64, b.mat());
    EXPECT_TRUE(close(b.v, a.v, 1e-6)) << "rms_norm per head";
    Buf r1 = x, r2 = x;
    ref_->round_bf16(r1.mat());
    ops_->round_bf16(r2.mat());
    EXPECT_TRUE(close(r2.v, r1.v, 0.0));
    std::vector<int32_t> pos(static_cast<size_t>(M));
    std::iota(pos.begin(), pos.end(), 5000);
    const YarnParams yarn{16.0f, 65536, 32.0f, 1.0f};
    const std::vector<float> f = make_rope_freqs(160000.0f, 64, &yarn);
    r1 = x;
    r2 = x;
    ref_->rope(r1.mat(), 2, 128, pos.data(), f, false);
    ops_->rope(r2.mat(), 2, 128, pos.data(), f, false);
    EXPECT_TRUE(close(r2.v, r1.v, 0.0)) << "rope";
    r1 = x;
    r2 = x;
    ref_->hadamard128(r1.mat());
    ops_->hadamard128(r2.mat());
    EXPECT_TRUE(close(r2.v, r1.v, 1e-6)) << "hadamard";
    r1 = x;
    r2 = x;
    ref_->fake_quant_fp8(r1.mat(), 200, 64);
    ops_->fake_quant_fp8(r2.mat(), 200, 64);
    EXPECT_TRUE(close(r2.v, r1.v, 0.0)) << "fake_quant_fp8";
    r1 = x;
    r2 = x;
    ref_->fake_quant_fp4(r1.mat(), 32);
    ops_->fake_quant_fp4(r2.mat(), 32);
    EXPECT_TRUE(close(r2.v, r1.v, 0.0)) << "fake_quant_fp4";
    Buf y = random_buf(rng_, M, 256, -15.0f, 15.0f);
    ref_->swiglu(x.cmat(), y.cmat(), 10.0f, a.mat());
    ops_->swiglu(x.cmat(), y.cmat(), 10.0f, b.mat());
    EXPECT_TRUE(close(b.v, a.v, 1e-6)) << "swiglu";
    Buf bias = random_buf(rng_, 1, 256);
    ref_->add(x.cmat(), bias.cmat(), a.mat());
    ops_->add(x.cmat(), bias.cmat(), b.mat());
    EXPECT_TRUE(close(b.v, a.v, 0.0)) << "add";
    r1 = x;
    r2 = x;
    ref_->scale(r1.mat(), 0.37f);
    ops_->scale(r2.mat(), 0.37f);
    EXPECT_TRUE(close(r2.v, r1.v, 0.0)) << "scale";
    OwnedWeight table = random_weight(rng_, WKind::kBf16, 50, 256);
    std::vector<int32_t> ids(static_cast<size_t>(M));
    for (auto& i : ids) i = static_cast<int32_t>(rng_() % 50);
    ref_->embed(ids.data(), M, table.ref, a.mat());
    ops_->embed(ids.data(), M, table.ref, b.mat());
    EXPECT_TRUE(close(b.v, a.v, 0.0)) << "embed";
  }
}

TEST_P(BackendVsRef, HyperConnections) {
  const int n = 4;
  for (int64_t M : {1, 33}) {
    const int64_t D = 300;
    Buf fn = random_buf(rng_, 24, n * D, -0.2f, 0.2f), base = random_buf(rng_, 1, 24),
        scale = random_buf(rng_, 1, 3, 0.5f, 2.0f);
    HcParams p{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
    Buf X = random_buf(rng_, M, n * D);
    Buf y1(M, D), p1(M, n), c1(M, n * n), y2(M, D), p2(M, n), c2(M, n * n);
    ref_->hc_pre(X.cmat(), p, {}, y1.mat(), {}, p1.mat(), c1.mat());
    ops_->hc_pre(X.cmat(), p, {}, y2.mat(), {}, p2.mat(), c2.mat());
    EXPECT_TRUE(close(y2.v, y1.v, 1e-5));
    EXPECT_TRUE(close(p2.v, p1.v, 1e-5));
    EXPECT_TRUE(close(c2.v, c1.v, 1e-5));
    Buf o = random_buf(rng_, M, D), a(M, n * D), b(M, n * D);
    ref_->hc_post(X.cmat(), o.cmat(), p1.cmat(), c1.cmat(), n, a.mat());
    ops_->hc_post(X.cmat(), o.cmat(), p1.cmat(), c1.cmat(), n, b.mat());
    EXPECT_TRUE(close(b.v, a.v, 1e-6));
    HcParams hp{n, fn.cmat().rows_slice(0, n), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 0};
    ref_->hc_head(X.cmat(), hp, y1.mat());
    ops_->hc_head(X.cmat(), hp, y2.mat());
    EXPECT_TRUE(close(y2.v, y1.v, 1e-5));
  }
}

TEST_P(BackendVsRef, AttentionPoolIndexer) {
  for (int64_t M : {1, 5, 300}) {
    const int64_t H = 4, d = 72, R = 150, L = 40;
    Buf q = random_buf(rng_, M, H * d, -1.0f, 1.0f), kv = random_buf(rng_, R, d);
    std::vector<int32_t> idx(static_cast<size_t>(M * L));
    for (auto& i : idx) i = static_cast<int32_t>(rng_() % (R + 20)) - 20;  // some -1s... and below
    for (auto& i : idx) i = i < 0 ? -1 : i;
    Buf sink = random_buf(rng_, 1, H);
    for (bool bf16 : {false, true}) {
      Buf a(M, H * d), b(M, H * d);
      ref_->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, sink.v.data(), 0.1f, bf16,
                             a.mat());
      ops_->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, sink.v.data(), 0.1f, bf16,
                             b.mat());
      EXPECT_TRUE(close(b.v, a.v, bf16 ? 1e-3 : 1e-5)) << "attention M" << M << " bf16 " << bf16;
      // The same keys by address, each row's list padded with absent entries in other places
      // (the model's [window | compressed] columns): this backend's bits exactly.
      const int64_t L2 = L + 7;
      std::vector<const float*> rows(static_cast<size_t>(M * L2), nullptr);
      for (int64_t t = 0; t < M; ++t) {
        for (int64_t j = 0; j < L; ++j) {
          const int32_t r = idx[static_cast<size_t>(t * L + j)];
          rows[static_cast<size_t>(t * L2 + j + (j >= L / 2 ? 7 : 0))] =
              r >= 0 ? kv.cmat().row(r) : nullptr;
        }
      }
      Buf c(M, H * d);
      ops_->sparse_attention_rows(q.cmat(), H, rows.data(), L2, d, sink.v.data(), 0.1f, bf16,
                                  c.mat());
      EXPECT_TRUE(close(c.v, b.v, 0.0)) << "attention by address M" << M << " bf16 " << bf16;
    }
    // Compressor pooling: 8 slots per row of width 96, some missing.
    Buf vals = random_buf(rng_, 16, 96), gates = random_buf(rng_, 16, 96, -5.0f, 5.0f);
    std::vector<PoolSlot> slots;
    for (int64_t r = 0; r < M; ++r) {
      for (int s = 0; s < 8; ++s) {
        const bool missing = (r % 3 == 0 && s < 4) || (r % 7 == 6);
        const int64_t row = (r * 8 + s) % 16;
        slots.push_back(missing ? PoolSlot{}
                                : PoolSlot{vals.cmat().row(row), gates.cmat().row(row)});
      }
    }
    Buf pa(M, 96), pb(M, 96);
    ref_->softmax_pool(slots, 8, pa.mat());
    ops_->softmax_pool(slots, 8, pb.mat());
    EXPECT_TRUE(close(pb.v, pa.v, 1e-6)) << "pool";
    // Indexer scores and top-k.
    const int64_t Hi = 8, di = 64, Rk = 200;
    Buf qi = random_buf(rng_, M, Hi * di), wi = random_buf(rng_, M, Hi, 0.0f, 0.5f),
        keys = random_buf(rng_, Rk, di);
    std::vector<int32_t> vis(static_cast<size_t>(M));
    for (auto& v : vis) v = static_cast<int32_t>(rng_() % (Rk + 1));
    for (bool bf16 : {false, true}) {
      Buf sa(M, Rk), sb(M, Rk);
      ref_->indexer_scores(qi.cmat(), Hi, wi.cmat(), keys.cmat(), vis.data(), bf16, sa.mat());
      ops_->indexer_scores(qi.cmat(), Hi, wi.cmat(), keys.cmat(), vis.data(), bf16, sb.mat());
      EXPECT_TRUE(close(sb.v, sa.v, bf16 ? 1e-2 : 1e-5)) << "indexer bf16 " << bf16;
      std::vector<int32_t> ta(static_cast<size_t>(M * 50)), tb(ta.size());
      ref_->topk(sa.cmat(), vis.data(), 50, ta.data());
      ops_->topk(sa.cmat(), vis.data(), 50, tb.data());
      EXPECT_EQ(ta, tb);
    }
    // The multi form: rows of three "sequences" (the middle one without keys) reading their
    // own paged key matrices (pages of 64 and of 5 rows, stored in reverse order); only the
    // visible part of each row is specified.
    const Buf keys_b = random_buf(rng_, 37, di);
    const ReversedPages pages_a = reverse_pages(keys.v, Rk, di, 64);
    const ReversedPages pages_b = reverse_pages(keys_b.v, keys_b.rows, di, 5);
    const std::vector<const float*> table_a = pages_a.table(pages_a.storage.data());
    const std::vector<const float*> table_b = pages_b.table(pages_b.storage.data());
    const int64_t split = M / 3;
    std::vector<PagedCMat> row_keys;
    std::vector<CMat> row_keys_flat;
    std::vector<int32_t> vis_m(static_cast<size_t>(M));
    for (int64_t t = 0; t < M; ++t) {
      const bool first = t < split, empty = !first && t < 2 * split;
      row_keys.push_back(first   ? pages_a.view(table_a)
                         : empty ? PagedCMat{nullptr, 0, di, 1}
                                 : pages_b.view(table_b));
      row_keys_flat.push_back(first ? keys.cmat() : empty ? CMat{nullptr, 0, di} : keys_b.cmat());
      const int64_t nk = row_keys.back().rows;
      vis_m[static_cast<size_t>(t)] = static_cast<int32_t>(nk == 0 ? 0 : rng_() % (nk + 1));
    }
    for (bool bf16 : {false, true}) {
      Buf sa(M, Rk), sb(M, Rk);
      ops_->indexer_scores_multi(qi.cmat(), Hi, wi.cmat(), row_keys, vis_m.data(), bf16, sb.mat());
      for (int64_t t = 0; t < M; ++t) {
        const CMat k = row_keys_flat[static_cast<size_t>(t)];
        if (k.rows == 0) continue;
        Buf one(1, k.rows), same(1, k.rows);
        ref_->indexer_scores(qi.cmat().rows_slice(t, 1), Hi, wi.cmat().rows_slice(t, 1), k,
                             vis_m.data() + t, bf16, one.mat());
        ops_->indexer_scores(qi.cmat().rows_slice(t, 1), Hi, wi.cmat().rows_slice(t, 1), k,
                             vis_m.data() + t, bf16, same.mat());
        const int64_t v = vis_m[static_cast<size_t>(t)];
        const std::vector<float> got(sb.v.begin() + t * Rk, sb.v.begin() + t * Rk + v);
        const std::vector<float> want(one.v.begin(), one.v.begin() + v);
        const std::vector<float> flat(same.v.begin(), same.v.begin() + v);
        EXPECT_TRUE(close(got, want, bf16 ? 1e-2 : 1e-5)) << "indexer multi row " << t;
        // Paging is storage only: the same bits as this backend's call on the contiguous keys.
        EXPECT_TRUE(close(got, flat, 0.0)) << "indexer multi row " << t << " paged != flat";
      }
    }
    // The addresses of selected rows of each row's paged matrix (-1: none), written at a
    // column offset of a wider table.
    {
      const int64_t K = 6, ld = K + 3;
      std::vector<int32_t> sel(static_cast<size_t>(M * K));
      for (int64_t t = 0; t < M; ++t) {
        const int64_t nk = row_keys[static_cast<size_t>(t)].rows;
        for (int64_t k = 0; k < K; ++k) {
          sel[static_cast<size_t>(t * K + k)] =
              nk == 0 || k == 4 ? -1 : static_cast<int32_t>((t * 7 + k * 13) % nk);
        }
      }
      std::vector<const float*> out(static_cast<size_t>(M * ld), &keys.v[0]);
      ops_->paged_row_addresses(sel.data(), K, row_keys, out.data() + 2, ld);
      for (int64_t t = 0; t < M; ++t) {
        const CMat flat = row_keys_flat[static_cast<size_t>(t)];
        for (int64_t k = 0; k < K; ++k) {
          const int32_t r = sel[static_cast<size_t>(t * K + k)];
          const float* got = out[static_cast<size_t>(t * ld + 2 + k)];
          if (r < 0) {
            EXPECT_EQ(got, nullptr);
          } else {
            ASSERT_NE(got, nullptr);
            EXPECT_EQ(std::vector<float>(got, got + di),
                      std::vector<float>(flat.row(r), flat.row(r) + di))
                << "row " << t << " sel " << r;
          }
        }
        EXPECT_EQ(out[static_cast<size_t>(t * ld)], &keys.v[0]) << "wrote outside its columns";
      }
    }
  }
}

TEST_P(BackendVsRef, RoutingAndMoe) {
  const int64_t D = 96, I = 64, E = 6;
  for (int64_t M : {1, 9, 300}) {
    OwnedWeight gate = random_weight(rng_, WKind::kBf16, E, D, 1.0f);
    Buf x = random_buf(rng_, M, D), bias = random_buf(rng_, 1, E, -0.2f, 0.2f);
    std::vector<int32_t> ia(static_cast<size_t>(M * 2)), ib(ia.size());
    Buf wa(M, 2), wb(M, 2);
    ref_->moe_route_score(x.cmat(), gate.ref, bias.v.data(), 2, 1.5f, {}, ia.data(), wa.mat());
    ops_->moe_route_score(x.cmat(), gate.ref, bias.v.data(), 2, 1.5f, {}, ib.data(), wb.mat());
    EXPECT_EQ(ia, ib);
    EXPECT_TRUE(close(wb.v, wa.v, 1e-5));
    std::vector<int32_t> table(static_cast<size_t>(40 * 2));
    for (auto& t : table) t = static_cast<int32_t>(rng_() % E);
    std::vector<int32_t> tok(static_cast<size_t>(M));
    for (auto& t : tok) t = static_cast<int32_t>(rng_() % 40);
    const TensorView tv = TensorView::make(DType::kI32, {40, 2}, table.data());
    ref_->moe_route_hash(x.cmat(), tok.data(), tv, gate.ref, 1.5f, ia.data(), wa.mat());
    ops_->moe_route_hash(x.cmat(), tok.data(), tv, gate.ref, 1.5f, ib.data(), wb.mat());
    EXPECT_EQ(ia, ib);
    EXPECT_TRUE(close(wb.v, wa.v, 1e-5));
    for (WKind kind : {WKind::kFp4, WKind::kFp8E8m0, WKind::kBf16}) {
      std::vector<OwnedWeight> own;
      std::vector<ExpertWeights> ex;
      for (int64_t e = 0; e < E; ++e) {
        own.push_back(random_weight(rng_, kind, I, D, 0.3f));
        own.push_back(random_weight(rng_, kind, I, D, 0.3f));
        own.push_back(random_weight(rng_, kind, D, I, 0.3f));
      }
      for (int64_t e = 0; e < E; ++e)
        ex.push_back({own[static_cast<size_t>(3 * e)].ref, own[static_cast<size_t>(3 * e + 1)].ref,
                      own[static_cast<size_t>(3 * e + 2)].ref});
      for (int variant = 0; variant < 4; ++variant) {
        MoeOpts o;
        o.act_quant = variant & 1;
        o.bf16_rounding = variant & 2;
        o.weight_before_w2 = variant != 3;
        Buf a(M, D), b(M, D);
        ref_->moe_experts(x.cmat(), ia.data(), wa.cmat(), 2, ex, o, a.mat());
        ops_->moe_experts(x.cmat(), ia.data(), wa.cmat(), 2, ex, o, b.mat());
        // Rounding options can flip one FP8/BF16 rounding of an intermediate between backends.
        EXPECT_TRUE(close(b.v, a.v, variant == 0 ? 1e-5 : 2e-2))
            << wkind_name(kind) << " M" << M << " variant " << variant;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendVsRef, ::testing::ValuesIn(candidates()),
                         [](const auto& p) { return p.param.name; });

TEST(OptThreads, OutputsIndependentOfThreadCount) {
  std::mt19937 rng(5);
  auto one = cpu::make_opt_ops(1), three = cpu::make_opt_ops(3);
  OwnedWeight w = random_weight(rng, WKind::kFp8E8m0, 200, 384);
  Buf x = random_buf(rng, 37, 384), a(37, 200), b(37, 200);
  one->linear(x.cmat(), w.ref, a.mat(), {.act_quant = true});
  three->linear(x.cmat(), w.ref, b.mat(), {.act_quant = true});
  EXPECT_TRUE(close(b.v, a.v, 0.0));
  const int64_t H = 8, d = 64, L = 30;
  Buf q = random_buf(rng, 9, H * d), kv = random_buf(rng, 50, d), oa(9, H * d), ob(9, H * d);
  std::vector<int32_t> idx(static_cast<size_t>(9 * L));
  for (auto& i : idx) i = static_cast<int32_t>(rng() % 50);
  one->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, nullptr, 0.125f, true, oa.mat());
  three->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, nullptr, 0.125f, true, ob.mat());
  EXPECT_TRUE(close(ob.v, oa.v, 0.0));
}

TEST(OptBatchInvariance, RowResultsDoNotDependOnBatch) {
  // DEEPINFER_BATCH_INVARIANT: a token's outputs must be the same bits alone or in a batch.
  std::mt19937 rng(11);
  auto ops = cpu::make_opt_ops(2);
  // K = 64, 256, 258, 512: one chunk (short, with and without a vector tail); 1100: two full
  // chunks and a tail. M = 9: 4-row blocks, a 1-row tail, and (BF16/FP16)
  // the scratch-decode path where M = 1 widens in the loads.
  for (WKind kind : {WKind::kFp8E8m0, WKind::kFp4, WKind::kBf16, WKind::kF16, WKind::kF32}) {
    for (int64_t K : {64, 256, 258, 512, 1100}) {
      const int64_t M = 9;
      OwnedWeight w = random_weight(rng, kind, 70, K);
      Buf x = random_buf(rng, M, K), all(M, 70);
      ops->linear(x.cmat(), w.ref, all.mat(), {.act_quant = true});
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t rows : {1, 2, 3}) {
          if (m + rows > M) continue;
          Buf part(rows, 70);
          ops->linear(x.cmat().rows_slice(m, rows), w.ref, part.mat(), {.act_quant = true});
          for (int64_t n = 0; n < 70; ++n) {
            ASSERT_EQ(std::bit_cast<uint32_t>(part.at(0, n)), std::bit_cast<uint32_t>(all.at(m, n)))
                << wkind_name(kind) << " K " << K << " row " << m << "+" << rows << " col " << n;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::backend::testing
