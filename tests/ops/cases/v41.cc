// Op cases for the ops DeepSeek-V4.1 adds (ops.h: kHcSinglePass, kFakeQuantNvfp4,
// kCandidateBlocks, kEngramGate, kRouterOptions; CUDA kernels in src/kernels/cuda hc/, quant/,
// indexer/candidates.cu, moe/route.cu, host side in backend/cuda/cuda_ops_v41.cc). The
// contract's host defaults must never see device pointers, so a backend that does not claim a
// feature has its case reported as skipped. Tolerances as in dense.cc: 0 for the quantizers and
// the integer selections, ~1e-5 for FP32 sums.
#include <string>
#include <vector>

#include "../op_harness.h"

namespace deepinfer::backend::testing {

OP_CASE(v41_hc_single_pass, kOnAll, Feature::kHyperConnections, Feature::kHcSinglePass) {
  const int n = 4;
  for (int64_t D : {64, 4096}) {
    const Buf fn = random_buf(ctx.rng, (2 + n) * n, n * D, -0.05f, 0.05f);
    const Buf base = random_buf(ctx.rng, 1, (2 + n) * n), scale = random_buf(ctx.rng, 1, 3);
    for (int64_t M : {1, 7, 130}) {
      const Buf X = random_buf(ctx.rng, M, n * D), prev = random_buf(ctx.rng, M, n, 0.0f, 1.0f);
      const HcParams hp{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
      Buf y(M, D), pre(M, n), post(M, n), comb(M, n * n);
      ctx.ref->hc_pre(X.cmat(), hp, prev.cmat(), y.mat(), pre.mat(), post.mat(), comb.mat());
      const DBuf dX = dev_copy(ctx, X), dprev = dev_copy(ctx, prev), dfn = dev_copy(ctx, fn);
      const BackendMem dbase = dev_array(ctx, base.v), dscale = dev_array(ctx, scale.v);
      const HcParams dp{n, dfn.cmat(), dbase.as<float>(), dscale.as<float>(), 1e-6f, 1e-6f, 20};
      DBuf dy = dev_poisoned(ctx, M, D), dpre = dev_poisoned(ctx, M, n),
           dpost = dev_poisoned(ctx, M, n), dcomb = dev_poisoned(ctx, M, n * n);
      ctx.ops->hc_pre(dX.cmat(), dp, dprev.cmat(), dy.mat(), dpre.mat(), dpost.mat(), dcomb.mat());
      const std::string t = " D=" + std::to_string(D) + " M=" + std::to_string(M);
      close(ctx, "hc_pre single-pass y" + t, dy.download(), y.v, 1e-5);
      close(ctx, "hc_pre single-pass pre" + t, dpre.download(), pre.v, 1e-5);
      close(ctx, "hc_pre single-pass post" + t, dpost.download(), post.v, 1e-5);
      close(ctx, "hc_pre single-pass comb" + t, dcomb.download(), comb.v, 1e-5);
      Buf c(M, D);
      ctx.ref->hc_collapse(X.cmat(), prev.cmat(), n, c.mat());
      DBuf dc = dev_poisoned(ctx, M, D);
      ctx.ops->hc_collapse(dX.cmat(), dprev.cmat(), n, dc.mat());
      close(ctx, "hc_collapse" + t, dc.download(), c.v, 1e-6);
    }
  }
}

OP_CASE(v41_fake_quant_nvfp4, kOnAll, Feature::kFakeQuantNvfp4) {
  for (int64_t cols : {16, 512, 520}) {
    for (int64_t M : {1, 33}) {
      Buf x = random_buf(ctx.rng, M, cols, -3.0f, 3.0f);
      const DBuf dx = dev_copy(ctx, x);
      ctx.ref->fake_quant_nvfp4(x.mat(), 16);
      ctx.ops->fake_quant_nvfp4(dx.mat(), 16);
      close(ctx, "fake_quant_nvfp4 M=" + std::to_string(M) + " cols=" + std::to_string(cols),
            dx.download(), x.v, 0.0);
    }
  }
}

OP_CASE(v41_candidate_blocks, kOnAll, Feature::kCandidateBlocks) {
  for (int64_t R : {40, 2048}) {
    const int64_t M = 9, bs = 16, nb = 8;
    const Buf s = random_buf(ctx.rng, M, R);
    std::vector<int32_t> vis(static_cast<size_t>(M));
    for (int64_t t = 0; t < M; ++t)
      vis[static_cast<size_t>(t)] = static_cast<int32_t>(R * t / (M - 1));
    std::vector<int32_t> want(static_cast<size_t>(M * nb));
    ctx.ref->candidate_blocks(s.cmat(), vis.data(), bs, nb, want.data());
    const DBuf ds = dev_copy(ctx, s);
    const BackendMem dvis = dev_array(ctx, vis);
    BackendMem dout = dev_array(ctx, std::vector<int32_t>(want.size(), 77));
    ctx.ops->candidate_blocks(ds.cmat(), dvis.as<int32_t>(), bs, nb, dout.as<int32_t>());
    equal_ints(ctx, "candidate_blocks R=" + std::to_string(R),
               download_ints(ctx, dout, want.size()), want);
    Buf r = s;
    ctx.ref->restrict_to_blocks(r.mat(), vis.data(), want.data(), nb, bs);
    const DBuf dr = dev_copy(ctx, s);
    ctx.ops->restrict_to_blocks(dr.mat(), dvis.as<int32_t>(), dout.as<int32_t>(), nb, bs);
    close(ctx, "restrict_to_blocks R=" + std::to_string(R), dr.download(), r.v, 0.0);
  }
}

OP_CASE(v41_engram_gate, kOnAll, Feature::kEngramGate) {
  const int n = 4;
  for (int64_t D : {32, 4096}) {
    for (int64_t M : {1, 65}) {
      Buf X = random_buf(ctx.rng, M, n * D, -2.0f, 2.0f);
      const Buf kv = random_buf(ctx.rng, M, (n + 1) * D), w = random_buf(ctx.rng, n, D, 0.5f, 1.5f);
      const DBuf dX = dev_copy(ctx, X), dkv = dev_copy(ctx, kv), dw = dev_copy(ctx, w);
      ctx.ref->engram_gate(X.mat(), kv.cmat(), w.cmat(), n, 1e-6f);
      ctx.ops->engram_gate(dX.mat(), dkv.cmat(), dw.cmat(), n, 1e-6f);
      close(ctx, "engram_gate D=" + std::to_string(D) + " M=" + std::to_string(M), dX.download(),
            X.v, 1e-5);
    }
  }
}

OP_CASE(v41_router_options, kOnAll, Feature::kDenseF32, Feature::kMoeRouting,
        Feature::kRouterOptions) {
  const int64_t E = 256, D = 512;
  auto gate = test_weight(ctx, WKind::kF32, E, D, 0.1f);
  const Buf bias = random_buf(ctx.rng, 1, E, -0.1f, 0.1f);
  const BackendMem dbias = dev_array(ctx, bias.v);
  for (const RouteOpts& o : {RouteOpts{0.7f, true, 1e-20f}, RouteOpts{1.0f, false, 0.0f}}) {
    for (int k : {1, 6}) {
      const int64_t M = 37;
      const Buf x = random_buf(ctx.rng, M, D);
      std::vector<int32_t> ids(static_cast<size_t>(M * k));
      Buf w(M, k);
      ctx.ref->moe_route_score(x.cmat(), gate->ref, bias.v.data(), k, 2.5f, o, ids.data(), w.mat());
      const DBuf dx = dev_copy(ctx, x);
      BackendMem dids = dev_array(ctx, std::vector<int32_t>(ids.size(), -7));
      DBuf dw = dev_poisoned(ctx, M, k);
      ctx.ops->moe_route_score(dx.cmat(), gate->dev.ref, dbias.as<float>(), k, 2.5f, o,
                               dids.as<int32_t>(), dw.mat());
      const std::string t = " temp=" + std::to_string(o.temperature) + " k=" + std::to_string(k);
      equal_ints(ctx, "route ids" + t, download_ints(ctx, dids, ids.size()), ids);
      close(ctx, "route weights" + t, dw.download(), w.v, 1e-5);
    }
  }
}

}  // namespace deepinfer::backend::testing
