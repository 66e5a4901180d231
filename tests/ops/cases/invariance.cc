// Op cases that check a property of one backend rather than its agreement with the oracle:
// the same bits for the same inputs whatever the batch around them (DEEPINFER_BATCH_INVARIANT),
// per kernel family. Each is tagged with the backends that promise it.
#include <bit>
#include <string>
#include <utility>

#include "../op_harness.h"

namespace deepinfer::backend::testing {

// A token's outputs must be the same bits alone or in a batch. K = 64, 256, 258, 512: one chunk
// (short, with and without a vector tail); 1100: two full chunks and a tail. M = 9: 4-row
// blocks, a 1-row tail, and (BF16/FP16) the scratch-decode path where M = 1 widens in the loads.
OP_CASE(opt_batch_invariance, kOnCpu, Feature::kDenseBf16, Feature::kDenseF16, Feature::kDenseF32,
        Feature::kFp8Weights, Feature::kFp4Weights, Feature::kActQuantFp8) {
  ctx.rng.seed(11);
  for (WKind kind : {WKind::kFp8E8m0, WKind::kFp4, WKind::kBf16, WKind::kF16, WKind::kF32}) {
    for (int64_t K : {64, 256, 258, 512, 1100}) {
      const int64_t M = 9;
      auto w = test_weight(ctx, kind, 70, K);
      const Buf x = random_buf(ctx.rng, M, K);
      const DBuf dx = dev_copy(ctx, x);
      DBuf dall = dev_poisoned(ctx, M, 70);
      ctx.ops->linear(dx.cmat(), w->dev.ref, dall.mat(), {.act_quant = true});
      const std::vector<float> all = dall.download();
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t rows : {1, 2, 3}) {
          if (m + rows > M) continue;
          DBuf dpart = dev_poisoned(ctx, rows, 70);
          ctx.ops->linear(dx.cmat().rows_slice(m, rows), w->dev.ref, dpart.mat(),
                          {.act_quant = true});
          const std::vector<float> part = dpart.download();
          for (int64_t n = 0; n < 70; ++n) {
            const bool same = std::bit_cast<uint32_t>(part[static_cast<size_t>(n)]) ==
                              std::bit_cast<uint32_t>(all[static_cast<size_t>(m * 70 + n)]);
            if (!check(ctx,
                       std::string(wkind_name(kind)) + " K " + std::to_string(K) + " row " +
                           std::to_string(m) + "+" + std::to_string(rows) + " col " +
                           std::to_string(n) + ": same bits alone and in the batch",
                       same)) {
              return;  // one report per case, as an assertion would
            }
          }
        }
      }
    }
  }
}

// CUDA. Same inputs, same bits: repeated launches, and a row computed alone vs inside a batch, for
// the kernels that promise it (each GEMV path for M within its range, RMSNorm, sparse attention).
// The GEMV kernels switch at M = 4 and 16, so invariance is checked within each range only
// (docs/cuda_backend.md lists the cross-range case as missing).
OP_CASE(determinism_and_batch_invariance, kOnCuda, Feature::kFp8Weights, Feature::kFp4Weights,
        Feature::kActQuantFp8, Feature::kSparseAttention, Feature::kBf16Probs) {
  auto w = test_weight(ctx, WKind::kFp8E8m0, 300, 1024);
  auto w4 = test_weight(ctx, WKind::kFp4, 300, 1024);
  for (const TestWeight* wt : {w.get(), w4.get()}) {
    struct R {
      int64_t small, big;
    };
    for (R r : {R{1, 4}, R{5, 16}, R{17, 64}}) {
      const Buf x = random_buf(ctx.rng, r.big, 1024);
      const DBuf dx = dev_copy(ctx, x);
      DBuf y1 = dev_poisoned(ctx, r.big, 300), y2 = dev_poisoned(ctx, r.big, 300);
      ctx.ops->linear(dx.cmat(), wt->dev.ref, y1.mat(), {.act_quant = true});
      ctx.ops->linear(dx.cmat(), wt->dev.ref, y2.mat(), {.act_quant = true});
      const std::vector<float> a = y1.download();
      const std::string t =
          std::string("linear ") + (wt == w.get() ? "fp8" : "fp4") + " M=" + std::to_string(r.big);
      close(ctx, t + " repeat", y2.download(), a, 0.0);
      DBuf ys = dev_poisoned(ctx, r.small, 300);
      ctx.ops->linear(dx.cmat().rows_slice(0, r.small), wt->dev.ref, ys.mat(), {.act_quant = true});
      const std::vector<float> head(a.begin(), a.begin() + r.small * 300);
      close(ctx, t + " first " + std::to_string(r.small) + " rows alone", ys.download(), head, 0.0);
    }
  }
  {
    const Buf x = random_buf(ctx.rng, 9, 4096);
    const DBuf dx = dev_copy(ctx, x);
    DBuf y = dev_poisoned(ctx, 9, 4096), y1 = dev_poisoned(ctx, 1, 4096);
    ctx.ops->rms_norm(dx.cmat(), nullptr, 1e-6f, 0, y.mat());
    ctx.ops->rms_norm(dx.cmat().rows_slice(4, 1), nullptr, 1e-6f, 0, y1.mat());
    const std::vector<float> all = y.download();
    close(ctx, "rms_norm row alone", y1.download(),
          std::vector<float>(all.begin() + 4 * 4096, all.begin() + 5 * 4096), 0.0);
  }
  {
    const int64_t H = 16, d = 512, R = 700, L = 200, M = 3;
    const Buf kv = random_buf(ctx.rng, R, d), q = random_buf(ctx.rng, M, H * d, -0.2f, 0.2f);
    std::vector<int32_t> idx(static_cast<size_t>(M * L));
    for (auto& i : idx) i = static_cast<int32_t>(ctx.rng() % R);
    const DBuf dkv = dev_copy(ctx, kv), dq = dev_copy(ctx, q);
    DBuf o = dev_poisoned(ctx, M, H * d), o1 = dev_poisoned(ctx, 1, H * d);
    ctx.ops->sparse_attention(dq.cmat(), H, dkv.cmat(), idx.data(), L, nullptr, 0.05f, true,
                              o.mat());
    ctx.ops->sparse_attention(dq.cmat().rows_slice(2, 1), H, dkv.cmat(), idx.data() + 2 * L, L,
                              nullptr, 0.05f, true, o1.mat());
    const std::vector<float> all = o.download();
    close(ctx, "sparse_attention token alone", o1.download(),
          std::vector<float>(all.begin() + 2 * H * d, all.end()), 0.0);
  }
}

// mHC's logits (CUDA: hc.cu's dot products as partial sums over fixed chunks of the n·D stream
// values, blocks of 1-32 tokens by the token count): a token's hc_pre and hc_head outputs are
// the same bits alone and in a batch. 40 tokens (D = 4096: blocks of 3 and a tail) on the
// backend, 300 (blocks of 19) in its batch-invariant mode, where hc_pre's logits are never the
// cuBLAS GEMM that the default mode takes from 128 rows; D = 4096 (V4-Flash: 64 chunks) and
// D = 100 (a short last chunk); n = 5 gives 36 dot products (a warp's second group).
OP_CASE(hc_batch_invariance, kOnAll, Feature::kHyperConnections) {
  ctx.rng.seed(17);
  for (const auto& [n, D] :
       {std::pair{4, int64_t{4096}}, std::pair{4, int64_t{100}}, std::pair{5, int64_t{256}}}) {
    const DBuf fn = dev_copy(ctx, random_buf(ctx.rng, (2 + n) * n, n * D, -0.05f, 0.05f));
    const BackendMem base = dev_array(ctx, random_buf(ctx.rng, 1, (2 + n) * n).v);
    const BackendMem scale = dev_array(ctx, random_buf(ctx.rng, 1, 3, 0.5f, 1.5f).v);
    const HcParams pre{n, fn.cmat(), base.as<float>(), scale.as<float>()};
    const HcParams head{n, fn.cmat().rows_slice(0, n), base.as<float>(), scale.as<float>()};
    for (const auto& [be, M] :
         {std::pair{ctx.ops, int64_t{40}},
          std::pair{ctx.invariant_ops ? ctx.invariant_ops : ctx.ops, int64_t{300}}}) {
      const DBuf x = dev_copy(ctx, random_buf(ctx.rng, M, n * D, -2.0f, 2.0f));
      DBuf y = dev_poisoned(ctx, M, D), post = dev_poisoned(ctx, M, n),
           comb = dev_poisoned(ctx, M, n * n), yh = dev_poisoned(ctx, M, D);
      ctx.ops->synchronize();  // uploads are queued on ctx.ops's stream
      be->hc_pre(x.cmat(), pre, {}, y.mat(), {}, post.mat(), comb.mat());
      be->hc_head(x.cmat(), head, yh.mat());
      const std::vector<float> all[4] = {y.download(), post.download(), comb.download(),
                                         yh.download()};
      for (const int64_t row : {int64_t{0}, int64_t{13}, M - 1}) {
        DBuf y1 = dev_poisoned(ctx, 1, D), post1 = dev_poisoned(ctx, 1, n),
             comb1 = dev_poisoned(ctx, 1, n * n), yh1 = dev_poisoned(ctx, 1, D);
        ctx.ops->synchronize();
        be->hc_pre(x.cmat().rows_slice(row, 1), pre, {}, y1.mat(), {}, post1.mat(), comb1.mat());
        be->hc_head(x.cmat().rows_slice(row, 1), head, yh1.mat());
        const std::vector<float> one[4] = {y1.download(), post1.download(), comb1.download(),
                                           yh1.download()};
        const char* what[4] = {"hc_pre y", "hc_pre post", "hc_pre comb", "hc_head y"};
        for (int i = 0; i < 4; ++i) {
          const int64_t w = static_cast<int64_t>(one[i].size());
          close(ctx,
                std::string(what[i]) + " n=" + std::to_string(n) + " D=" + std::to_string(D) +
                    " M=" + std::to_string(M) + " row " + std::to_string(row) +
                    " alone == in batch",
                one[i],
                std::vector<float>(all[i].begin() + row * w, all[i].begin() + (row + 1) * w), 0.0);
        }
      }
    }
  }
}

}  // namespace deepinfer::backend::testing
