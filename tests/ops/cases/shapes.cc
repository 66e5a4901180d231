// Op cases on many random shapes (odd sizes, K not a multiple of the block, M = 1 and M = 300),
// with a per-op tolerance: linear in every format and at the CPU GEMM's block edges, the row-wise
// ops, mHC, sparse attention (by index and by address), pooling, the indexer (plain and paged),
// routing and the grouped MoE. These were the CPU backends' list (opt vs ref); their inputs are
// the same as there (seed 99 per case).
#include <numeric>
#include <string>

#include "../op_harness.h"
#include "../paged_rows.h"

namespace deepinfer::backend::testing {
namespace {

std::string shape_tag(const char* op, WKind k, int64_t m, int64_t n, int64_t kk) {
  return std::string(op) + " " + wkind_name(k) + " m" + std::to_string(m) + " n" +
         std::to_string(n) + " k" + std::to_string(kk);
}

}  // namespace

OP_CASE(linear_odd_shapes, kOnAll, Feature::kDenseBf16, Feature::kDenseF16, Feature::kDenseF32,
        Feature::kFp8Weights, Feature::kFp4Weights, Feature::kActQuantFp8) {
  ctx.rng.seed(99);
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 37, 200}, {7, 130, 256}, {300, 48, 96}, {2, 257, 130}, {1, 4, 32}};
  for (WKind kind :
       {WKind::kBf16, WKind::kF16, WKind::kF32, WKind::kFp8E8m0, WKind::kFp8F32, WKind::kFp4}) {
    for (const Shape& s : shapes) {
      const int64_t k = kind == WKind::kFp4 ? (s.k + 1) / 2 * 2 : s.k;
      auto w = test_weight(ctx, kind, s.n, k);
      const Buf x = random_buf(ctx.rng, s.m, k);
      const DBuf dx = dev_copy(ctx, x);
      for (bool aq : {false, true}) {
        Buf want(s.m, s.n);
        DBuf y = dev_poisoned(ctx, s.m, s.n);
        ctx.ref->linear(x.cmat(), w->ref, want.mat(), {.act_quant = aq});
        ctx.ops->linear(dx.cmat(), w->dev.ref, y.mat(), {.act_quant = aq});
        close(ctx, shape_tag("linear", kind, s.m, s.n, k) + " aq" + std::to_string(aq),
              y.download(), want.v, 1e-5);
      }
    }
  }
  // A strided input (column slice) and a row slice of an FP8 weight (grouped wo_a).
  auto w = test_weight(ctx, WKind::kFp8E8m0, 256, 64, 0.1f, 128, 128);
  const Buf big = random_buf(ctx.rng, 5, 200);
  const DBuf dbig = dev_copy(ctx, big);
  Buf want(5, 128);
  DBuf y = dev_poisoned(ctx, 5, 128);
  ctx.ref->linear(big.cmat().cols_slice(10, 64), w->ref.slice_rows(128, 128), want.mat());
  ctx.ops->linear(dbig.cmat().cols_slice(10, 64), w->dev.ref.slice_rows(128, 128), y.mat());
  close(ctx, "linear strided x, fp8 rows 128..255", y.download(), want.v, 1e-5);
}

// The CPU GEMM's block edges (opt_gemm_avx2.cc: 4 x 3 and 1-2 x 4 register blocks, 24-row tasks,
// 512-column chunks, 8-lane masked tails): every row count mod 4, weight-row counts around the
// block and task widths, K below one vector, odd, and past a chunk; an unaligned, strided x.
OP_CASE(linear_block_edges, kOnAll, Feature::kDenseBf16, Feature::kDenseF16, Feature::kDenseF32,
        Feature::kFp8Weights, Feature::kFp4Weights) {
  ctx.rng.seed(99);
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{3, 25, 77},  {5, 50, 13}, {6, 23, 1100}, {9, 7, 5},
                          {4, 49, 520}, {2, 3, 129}, {13, 48, 64}};
  for (WKind kind :
       {WKind::kBf16, WKind::kF16, WKind::kF32, WKind::kFp8E8m0, WKind::kFp8F32, WKind::kFp4}) {
    for (const Shape& s : shapes) {
      const int64_t k = kind == WKind::kFp4 ? (s.k + 1) / 2 * 2 : s.k;
      auto w = test_weight(ctx, kind, s.n, k);
      const Buf big = random_buf(ctx.rng, s.m, k + 7);
      const DBuf dbig = dev_copy(ctx, big);
      Buf want(s.m, s.n);
      DBuf y = dev_poisoned(ctx, s.m, s.n);
      // ld = k + 7, rows start unaligned
      ctx.ref->linear(big.cmat().cols_slice(3, k), w->ref, want.mat());
      ctx.ops->linear(dbig.cmat().cols_slice(3, k), w->dev.ref, y.mat());
      close(ctx, shape_tag("linear", kind, s.m, s.n, k), y.download(), want.v, 1e-5);
    }
  }
}

OP_CASE(row_ops, kOnAll, Feature::kDenseBf16, Feature::kHadamard128, Feature::kFakeQuantFp8,
        Feature::kFakeQuantFp4) {
  ctx.rng.seed(99);
  for (int64_t M : {1, 7, 300}) {
    const std::string t = " M" + std::to_string(M);
    const Buf x = random_buf(ctx.rng, M, 256, -3.0f, 3.0f);
    auto nw = test_weight(ctx, WKind::kBf16, 1, 256, 1.0f);
    const DBuf dx = dev_copy(ctx, x);
    Buf a(M, 256);
    DBuf b = dev_poisoned(ctx, M, 256);
    ctx.ref->rms_norm(x.cmat(), &nw->ref, 1e-6f, 0, a.mat());
    ctx.ops->rms_norm(dx.cmat(), &nw->dev.ref, 1e-6f, 0, b.mat());
    close(ctx, "rms_norm" + t, b.download(), a.v, 1e-6);
    ctx.ref->rms_norm(x.cmat(), nullptr, 1e-6f, 64, a.mat());
    ctx.ops->rms_norm(dx.cmat(), nullptr, 1e-6f, 64, b.mat());
    close(ctx, "rms_norm per head" + t, b.download(), a.v, 1e-6);
    // In-place ops: the oracle on a host copy of x, the backend on its own copy.
    auto in_place = [&](const char* op, double tol, auto&& fn) {
      Buf r = x;
      DBuf d = dev_copy(ctx, x);
      fn(*ctx.ref, r.mat());
      fn(*ctx.ops, d.mat());
      close(ctx, op + t, d.download(), r.v, tol);
    };
    in_place("round_bf16", 0.0, [](Ops& o, Mat m) { o.round_bf16(m); });
    std::vector<int32_t> pos(static_cast<size_t>(M));
    std::iota(pos.begin(), pos.end(), 5000);
    const YarnParams yarn{16.0f, 65536, 32.0f, 1.0f};
    const std::vector<float> f = make_rope_freqs(160000.0f, 64, &yarn);
    // The same bits on the CPU; CUDA's sin/cos differ in the last bit (its rope case's 2e-6).
    in_place("rope", ctx.on == kOnCuda ? 2e-6 : 0.0,
             [&](Ops& o, Mat m) { o.rope(m, 2, 128, pos.data(), f, false); });
    in_place("hadamard", 1e-6, [](Ops& o, Mat m) { o.hadamard128(m); });
    in_place("fake_quant_fp8", 0.0, [](Ops& o, Mat m) { o.fake_quant_fp8(m, 200, 64); });
    in_place("fake_quant_fp4", 0.0, [](Ops& o, Mat m) { o.fake_quant_fp4(m, 32); });
    const Buf y = random_buf(ctx.rng, M, 256, -15.0f, 15.0f);
    const DBuf dy = dev_copy(ctx, y);
    ctx.ref->swiglu(x.cmat(), y.cmat(), 10.0f, a.mat());
    ctx.ops->swiglu(dx.cmat(), dy.cmat(), 10.0f, b.mat());
    close(ctx, "swiglu" + t, b.download(), a.v, 1e-6);
    const Buf bias = random_buf(ctx.rng, 1, 256);
    const DBuf dbias = dev_copy(ctx, bias);
    ctx.ref->add(x.cmat(), bias.cmat(), a.mat());
    ctx.ops->add(dx.cmat(), dbias.cmat(), b.mat());
    close(ctx, "add" + t, b.download(), a.v, 0.0);
    in_place("scale", 0.0, [](Ops& o, Mat m) { o.scale(m, 0.37f); });
    auto table = test_weight(ctx, WKind::kBf16, 50, 256);
    std::vector<int32_t> ids(static_cast<size_t>(M));
    for (auto& i : ids) i = static_cast<int32_t>(ctx.rng() % 50);
    ctx.ref->embed(ids.data(), M, table->ref, a.mat());
    ctx.ops->embed(ids.data(), M, table->dev.ref, b.mat());
    close(ctx, "embed" + t, b.download(), a.v, 0.0);
  }
}

OP_CASE(hc_ops, kOnAll, Feature::kHyperConnections) {
  ctx.rng.seed(99);
  const int n = 4;
  // M = 130: CUDA makes the logits' dots with a cuBLAS GEMM from 128 rows.
  for (int64_t M : {1, 33, 130}) {
    const int64_t D = 300;
    const std::string t = " M" + std::to_string(M);
    const Buf fn = random_buf(ctx.rng, 24, n * D, -0.2f, 0.2f), base = random_buf(ctx.rng, 1, 24),
              scale = random_buf(ctx.rng, 1, 3, 0.5f, 2.0f);
    const DBuf dfn = dev_copy(ctx, fn);
    const BackendMem dbase = dev_array(ctx, base.v), dscale = dev_array(ctx, scale.v);
    const HcParams p{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
    const HcParams dp{n, dfn.cmat(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20};
    const Buf X = random_buf(ctx.rng, M, n * D);
    const DBuf dX = dev_copy(ctx, X);
    Buf y1(M, D), p1(M, n), c1(M, n * n);
    DBuf y2 = dev_poisoned(ctx, M, D), p2 = dev_poisoned(ctx, M, n),
         c2 = dev_poisoned(ctx, M, n * n);
    ctx.ref->hc_pre(X.cmat(), p, {}, y1.mat(), {}, p1.mat(), c1.mat());
    ctx.ops->hc_pre(dX.cmat(), dp, {}, y2.mat(), {}, p2.mat(), c2.mat());
    close(ctx, "hc_pre y" + t, y2.download(), y1.v, 1e-5);
    close(ctx, "hc_pre post" + t, p2.download(), p1.v, 1e-5);
    close(ctx, "hc_pre comb" + t, c2.download(), c1.v, 1e-5);
    const Buf o = random_buf(ctx.rng, M, D);
    const DBuf dO = dev_copy(ctx, o), dp1 = dev_copy(ctx, p1), dc1 = dev_copy(ctx, c1);
    Buf a(M, n * D);
    DBuf b = dev_poisoned(ctx, M, n * D);
    ctx.ref->hc_post(X.cmat(), o.cmat(), p1.cmat(), c1.cmat(), n, a.mat());
    ctx.ops->hc_post(dX.cmat(), dO.cmat(), dp1.cmat(), dc1.cmat(), n, b.mat());
    close(ctx, "hc_post" + t, b.download(), a.v, 1e-6);
    const HcParams hp{n, fn.cmat().rows_slice(0, n), base.v.data(), scale.v.data(), 1e-6f, 1e-6f,
                      0};
    const HcParams dhp{
        n, dfn.cmat().rows_slice(0, n), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 0};
    DBuf yh = dev_poisoned(ctx, M, D);
    ctx.ref->hc_head(X.cmat(), hp, y1.mat());
    ctx.ops->hc_head(dX.cmat(), dhp, yh.mat());
    close(ctx, "hc_head" + t, yh.download(), y1.v, 1e-5);
  }
}

OP_CASE(attention_pool_indexer, kOnAll, Feature::kSparseAttention, Feature::kAttentionSink,
        Feature::kBf16Probs, Feature::kCompressorPool, Feature::kIndexer, Feature::kIndexerBf16) {
  ctx.rng.seed(99);
  for (int64_t M : {1, 5, 300}) {
    const std::string tm = " M" + std::to_string(M);
    const int64_t H = 4, d = 72, R = 150, L = 40;
    const Buf q = random_buf(ctx.rng, M, H * d, -1.0f, 1.0f), kv = random_buf(ctx.rng, R, d);
    std::vector<int32_t> idx(static_cast<size_t>(M * L));
    for (auto& i : idx) i = static_cast<int32_t>(ctx.rng() % (R + 20)) - 20;  // some below 0
    for (auto& i : idx) i = i < 0 ? -1 : i;
    const Buf sink = random_buf(ctx.rng, 1, H);
    const DBuf dq = dev_copy(ctx, q), dkv = dev_copy(ctx, kv);
    const BackendMem dsink = dev_array(ctx, sink.v);
    for (bool bf16 : {false, true}) {
      const std::string t = tm + " bf16 " + std::to_string(bf16);
      Buf a(M, H * d);
      DBuf b = dev_poisoned(ctx, M, H * d);
      ctx.ref->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, sink.v.data(), 0.1f, bf16,
                                a.mat());
      ctx.ops->sparse_attention(dq.cmat(), H, dkv.cmat(), idx.data(), L, dsink.as<float>(), 0.1f,
                                bf16, b.mat());
      const std::vector<float> got = b.download();
      close(ctx, "attention" + t, got, a.v, bf16 ? 1e-3 : 1e-5);
      // The same keys by address, each row's list padded with absent entries in other places
      // (the model's [window | compressed] columns): this backend's bits exactly.
      const int64_t L2 = L + 7;
      std::vector<const float*> rows(static_cast<size_t>(M * L2), nullptr);
      for (int64_t r = 0; r < M; ++r) {
        for (int64_t j = 0; j < L; ++j) {
          const int32_t i = idx[static_cast<size_t>(r * L + j)];
          rows[static_cast<size_t>(r * L2 + j + (j >= L / 2 ? 7 : 0))] =
              i >= 0 ? dkv.cmat().row(i) : nullptr;
        }
      }
      DBuf c = dev_poisoned(ctx, M, H * d);
      ctx.ops->sparse_attention_rows(dq.cmat(), H, rows.data(), L2, d, dsink.as<float>(), 0.1f,
                                     bf16, c.mat());
      close(ctx, "attention by address" + t, c.download(), got, 0.0);
    }
    // Compressor pooling: 8 slots per row of width 96, some missing.
    const Buf vals = random_buf(ctx.rng, 16, 96), gates = random_buf(ctx.rng, 16, 96, -5.0f, 5.0f);
    const DBuf dvals = dev_copy(ctx, vals), dgates = dev_copy(ctx, gates);
    std::vector<PoolSlot> slots, dslots;
    for (int64_t r = 0; r < M; ++r) {
      for (int s = 0; s < 8; ++s) {
        const bool missing = (r % 3 == 0 && s < 4) || (r % 7 == 6);
        const int64_t row = (r * 8 + s) % 16;
        slots.push_back(missing ? PoolSlot{}
                                : PoolSlot{vals.cmat().row(row), gates.cmat().row(row)});
        dslots.push_back(missing ? PoolSlot{}
                                 : PoolSlot{dvals.cmat().row(row), dgates.cmat().row(row)});
      }
    }
    Buf pa(M, 96);
    DBuf pb = dev_poisoned(ctx, M, 96);
    ctx.ref->softmax_pool(slots, 8, pa.mat());
    ctx.ops->softmax_pool(dslots, 8, pb.mat());
    close(ctx, "pool" + tm, pb.download(), pa.v, 1e-6);
    // Indexer scores and top-k (both backends' top-k of the oracle's scores).
    const int64_t Hi = 8, di = 64, Rk = 200;
    const Buf qi = random_buf(ctx.rng, M, Hi * di), wi = random_buf(ctx.rng, M, Hi, 0.0f, 0.5f),
              keys = random_buf(ctx.rng, Rk, di);
    const DBuf dqi = dev_copy(ctx, qi), dwi = dev_copy(ctx, wi), dkeys = dev_copy(ctx, keys);
    std::vector<int32_t> vis(static_cast<size_t>(M));
    for (auto& v : vis) v = static_cast<int32_t>(ctx.rng() % (Rk + 1));
    for (bool bf16 : {false, true}) {
      const std::string t = tm + " bf16 " + std::to_string(bf16);
      Buf sa(M, Rk);
      DBuf sb = dev_poisoned(ctx, M, Rk);
      ctx.ref->indexer_scores(qi.cmat(), Hi, wi.cmat(), keys.cmat(), vis.data(), bf16, sa.mat());
      ctx.ops->indexer_scores(dqi.cmat(), Hi, dwi.cmat(), dkeys.cmat(), vis.data(), bf16, sb.mat());
      close(ctx, "indexer" + t, sb.download(), sa.v, bf16 ? 1e-2 : 1e-5);
      const DBuf dsa = dev_copy(ctx, sa);
      std::vector<int32_t> ta(static_cast<size_t>(M * 50)), tb(ta.size(), -7);
      ctx.ref->topk(sa.cmat(), vis.data(), 50, ta.data());
      ctx.ops->topk(dsa.cmat(), vis.data(), 50, tb.data());
      equal_ints(ctx, "topk" + t, tb, ta);
    }
    // The multi form: rows of three "sequences" (the middle one without keys) reading their
    // own paged key matrices (pages of 64 and of 5 rows, stored in reverse order); only the
    // visible part of each row is specified.
    const Buf keys_b = random_buf(ctx.rng, 37, di);
    const DBuf dkeys_b = dev_copy(ctx, keys_b);
    const ReversedPages pages_a = reverse_pages(keys.v, Rk, di, 64);
    const ReversedPages pages_b = reverse_pages(keys_b.v, keys_b.rows, di, 5);
    const BackendMem store_a = dev_array(ctx, pages_a.storage),
                     store_b = dev_array(ctx, pages_b.storage);
    const std::vector<const float*> table_a = pages_a.table(store_a.as<float>());
    const std::vector<const float*> table_b = pages_b.table(store_b.as<float>());
    const int64_t split = M / 3;
    std::vector<PagedCMat> row_keys;
    std::vector<CMat> row_keys_flat, drow_keys_flat;
    std::vector<int32_t> vis_m(static_cast<size_t>(M));
    for (int64_t t = 0; t < M; ++t) {
      const bool first = t < split, empty = !first && t < 2 * split;
      row_keys.push_back(first   ? pages_a.view(table_a)
                         : empty ? PagedCMat{nullptr, 0, di, 1}
                                 : pages_b.view(table_b));
      row_keys_flat.push_back(first ? keys.cmat() : empty ? CMat{nullptr, 0, di} : keys_b.cmat());
      drow_keys_flat.push_back(first   ? dkeys.cmat()
                               : empty ? CMat{nullptr, 0, di}
                                       : dkeys_b.cmat());
      const int64_t nk = row_keys.back().rows;
      vis_m[static_cast<size_t>(t)] = static_cast<int32_t>(nk == 0 ? 0 : ctx.rng() % (nk + 1));
    }
    for (bool bf16 : {false, true}) {
      DBuf sb = dev_poisoned(ctx, M, Rk);
      ctx.ops->indexer_scores_multi(dqi.cmat(), Hi, dwi.cmat(), row_keys, vis_m.data(), bf16,
                                    sb.mat());
      const std::vector<float> all = sb.download();
      for (int64_t t = 0; t < M; ++t) {
        const CMat k = row_keys_flat[static_cast<size_t>(t)];
        if (k.rows == 0) continue;
        Buf one(1, k.rows);
        DBuf same = dev_poisoned(ctx, 1, k.rows);
        ctx.ref->indexer_scores(qi.cmat().rows_slice(t, 1), Hi, wi.cmat().rows_slice(t, 1), k,
                                vis_m.data() + t, bf16, one.mat());
        ctx.ops->indexer_scores(dqi.cmat().rows_slice(t, 1), Hi, dwi.cmat().rows_slice(t, 1),
                                drow_keys_flat[static_cast<size_t>(t)], vis_m.data() + t, bf16,
                                same.mat());
        const int64_t v = vis_m[static_cast<size_t>(t)];
        const std::vector<float> flat_all = same.download();
        const std::vector<float> got(all.begin() + t * Rk, all.begin() + t * Rk + v);
        const std::vector<float> want(one.v.begin(), one.v.begin() + v);
        const std::vector<float> flat(flat_all.begin(), flat_all.begin() + v);
        const std::string tr =
            "indexer multi row " + std::to_string(t) + tm + " bf16 " + std::to_string(bf16);
        close(ctx, tr, got, want, bf16 ? 1e-2 : 1e-5);
        // Paging is storage only: the same bits as this backend's call on the contiguous keys.
        close(ctx, tr + " paged != flat", got, flat, 0.0);
      }
    }
    // The addresses of selected rows of each row's paged matrix (-1: none), written at a
    // column offset of a wider table: each is the page table's row, nothing outside is written.
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
      const float* sentinel = keys.v.data();
      const BackendMem dout =
          dev_array(ctx, std::vector<const float*>(static_cast<size_t>(M * ld), sentinel));
      ctx.ops->paged_row_addresses(sel.data(), K, row_keys, dout.as<const float*>() + 2, ld);
      const std::vector<const float*> out =
          download_array<const float*>(ctx, dout, static_cast<size_t>(M * ld));
      for (int64_t t = 0; t < M; ++t) {
        const PagedCMat& pk = row_keys[static_cast<size_t>(t)];
        for (int64_t k = 0; k < K; ++k) {
          const int32_t r = sel[static_cast<size_t>(t * K + k)];
          const float* got = out[static_cast<size_t>(t * ld + 2 + k)];
          const std::string tr =
              "paged_row_addresses row " + std::to_string(t) + " sel " + std::to_string(r) + tm;
          if (r < 0) {
            check(ctx, tr + ": null", got == nullptr);
          } else {
            check(ctx, tr + ": not null", got != nullptr);
            check(ctx, tr + ": the page table's row", got == pk.row(r));
          }
        }
        bool outside = true;
        for (int64_t j = 0; j < ld; ++j) {
          if (j < 2 || j >= 2 + K)
            outside = outside && out[static_cast<size_t>(t * ld + j)] == sentinel;
        }
        check(ctx,
              "paged_row_addresses row " + std::to_string(t) + tm + ": wrote outside its columns",
              outside);
      }
    }
  }
}

OP_CASE(routing_and_moe, kOnAll, Feature::kDenseBf16, Feature::kFp8Weights, Feature::kFp4Weights,
        Feature::kActQuantFp8, Feature::kMoeRouting, Feature::kMoeExperts) {
  ctx.rng.seed(99);
  const int64_t D = 96, I = 64, E = 6;
  for (int64_t M : {1, 9, 300}) {
    const std::string tm = " M" + std::to_string(M);
    auto gate = test_weight(ctx, WKind::kBf16, E, D, 1.0f);
    const Buf x = random_buf(ctx.rng, M, D), bias = random_buf(ctx.rng, 1, E, -0.2f, 0.2f);
    const DBuf dx = dev_copy(ctx, x);
    const BackendMem dbias = dev_array(ctx, bias.v);
    std::vector<int32_t> ia(static_cast<size_t>(M * 2)), ib(ia.size(), -7);
    Buf wa(M, 2);
    DBuf wb = dev_poisoned(ctx, M, 2);
    ctx.ref->moe_route_score(x.cmat(), gate->ref, bias.v.data(), 2, 1.5f, {}, ia.data(), wa.mat());
    ctx.ops->moe_route_score(dx.cmat(), gate->dev.ref, dbias.as<float>(), 2, 1.5f, {}, ib.data(),
                             wb.mat());
    equal_ints(ctx, "moe_route_score ids" + tm, ib, ia);
    close(ctx, "moe_route_score weights" + tm, wb.download(), wa.v, 1e-5);
    std::vector<int32_t> table(static_cast<size_t>(40 * 2));
    for (auto& t : table) t = static_cast<int32_t>(ctx.rng() % E);
    std::vector<int32_t> tok(static_cast<size_t>(M));
    for (auto& t : tok) t = static_cast<int32_t>(ctx.rng() % 40);
    const TensorView tv = TensorView::make(DType::kI32, {40, 2}, table.data());
    ctx.ref->moe_route_hash(x.cmat(), tok.data(), tv, gate->ref, 1.5f, ia.data(), wa.mat());
    ctx.ops->moe_route_hash(dx.cmat(), tok.data(), tv, gate->dev.ref, 1.5f, ib.data(), wb.mat());
    equal_ints(ctx, "moe_route_hash ids" + tm, ib, ia);
    close(ctx, "moe_route_hash weights" + tm, wb.download(), wa.v, 1e-5);
    const DBuf dwa = dev_copy(ctx, wa);
    for (WKind kind : {WKind::kFp4, WKind::kFp8E8m0, WKind::kBf16}) {
      std::vector<std::unique_ptr<TestWeight>> own;
      std::vector<ExpertWeights> ex, dex;
      for (int64_t e = 0; e < E; ++e) {
        own.push_back(test_weight(ctx, kind, I, D, 0.3f));
        own.push_back(test_weight(ctx, kind, I, D, 0.3f));
        own.push_back(test_weight(ctx, kind, D, I, 0.3f));
      }
      for (size_t e = 0; e < static_cast<size_t>(E); ++e) {
        ex.push_back({own[3 * e]->ref, own[3 * e + 1]->ref, own[3 * e + 2]->ref});
        dex.push_back({own[3 * e]->dev.ref, own[3 * e + 1]->dev.ref, own[3 * e + 2]->dev.ref});
      }
      for (int variant = 0; variant < 4; ++variant) {
        MoeOpts o;
        o.act_quant = variant & 1;
        o.bf16_rounding = variant & 2;
        o.weight_before_w2 = variant != 3;
        Buf a(M, D);
        DBuf b = dev_poisoned(ctx, M, D);
        ctx.ref->moe_experts(x.cmat(), ia.data(), wa.cmat(), 2, ex, o, a.mat());
        ctx.ops->moe_experts(dx.cmat(), ia.data(), dwa.cmat(), 2, dex, o, b.mat());
        // Rounding options can flip one FP8/BF16 rounding of an intermediate between backends.
        close(ctx,
              std::string("moe_experts ") + wkind_name(kind) + tm + " variant " +
                  std::to_string(variant),
              b.download(), a.v, variant == 0 ? 1e-5 : 2e-2);
      }
    }
  }
}

}  // namespace deepinfer::backend::testing
