// Perf mode of the op harness: times each op at V4-Flash-like shapes on every CPU backend and
// prints GFLOP/s or GB/s next to this machine's ceilings (memcpy bandwidth, L1-resident FMA
// rate of the opt kernel). Numbers, never pass/fail. Disabled by default; run with
//   ops_test --gtest_also_run_disabled_tests --gtest_filter='OpsPerf.*'
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "backend/cpu/opt/kernels.h"
#include "ops_test_util.h"

namespace deepinfer::backend::testing {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all threads): on a shared machine wall time includes time the
// threads spent descheduled, CPU time does not; the report prints both.
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Timing {
  double wall = 1e30;  // best wall time of one call
  double cpu = 0;      // CPU time of that same call
};

// Best-of timing of fn, at least `min_s` in total.
template <typename F>
Timing time_it(F&& fn, double min_s = 0.3) {
  fn();  // warm-up
  Timing best;
  double total = 0;
  int reps = 0;
  while (total < min_s || reps < 2) {
    const double t0 = now_s(), c0 = cpu_s();
    fn();
    const double dt = now_s() - t0, dc = cpu_s() - c0;
    if (dt < best.wall) best = {dt, dc};
    total += dt;
    ++reps;
    if (reps >= 50) break;
  }
  return best;
}

void report(const char* op, const char* backend, const std::string& shape, Timing t, double flops,
            double bytes) {
  std::printf("%-17s %-5s %-30s %9.3f ms %9.3f cpu-ms %7.2f GFLOP/s %7.2f GB/s\n", op, backend,
              shape.c_str(), t.wall * 1e3, t.cpu * 1e3, flops / t.wall * 1e-9,
              bytes / t.wall * 1e-9);
}

struct Ceilings {
  double copy_gbs;  // memcpy, bytes read + written
  double read_gbs;  // streaming FP32 read (sum of squares), one thread
  double gflops;    // dot4 on L1-resident data, one thread
};

Ceilings measure_ceilings() {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  const double t = time_it([&] { std::memcpy(b.data(), a.data(), n); }).wall;
  std::vector<float> big(n / 4, 0.5f);
  float sink = 0.0f;
  const double tr =
      time_it([&] { sink += cpu::opt::sumsq(big.data(), static_cast<int64_t>(big.size())); }).wall;
  std::vector<float> x(1024, 1.0f), w(4 * 1024, 0.5f);
  float out[4];
  const int reps = 20000;
  const double tf = time_it([&] {
                      for (int r = 0; r < reps; ++r) {
                        cpu::opt::dot4(x.data(), w.data(), 1024, 1024, out);
                        x[0] = out[0] * 1e-30f;  // keep the calls live
                      }
                    }).wall;
  std::printf("(checksum %g)\n", static_cast<double>(sink) * 0.0);
  return {2.0 * static_cast<double>(n) / t * 1e-9, static_cast<double>(n) / tr * 1e-9,
          8.0 * 1024 * reps / tf * 1e-9};
}

TEST(OpsPerf, DISABLED_V4FlashShapes) {
  const Ceilings c = measure_ceilings();
  std::printf(
      "ceilings: memcpy %.2f GB/s (read+write), stream read %.2f GB/s (1 thread), "
      "dot4 L1-resident %.2f GFLOP/s (1 thread)\n",
      c.copy_gbs, c.read_gbs, c.gflops);
  std::mt19937 rng(7);
  for (const BackendCase& bc : backends()) {
    if (bc.name == "opt3") continue;  // ref, opt at 1 and 2 threads
    auto ops = bc.make();
    const bool ref = bc.name == "ref";
    const char* bn = bc.name.c_str();
    // Dense FP8 linear (wq_a [1024, 4096]) with act quant; FP8 wo_b-like [4096, 8192] at M=1.
    {
      OwnedWeight w = random_weight(rng, WKind::kFp8E8m0, 1024, 4096);
      for (int64_t M : {1, 64}) {
        if (ref && M > 1) continue;
        Buf x = random_buf(rng, M, 4096), y(M, 1024);
        const Timing s =
            time_it([&] { ops->linear(x.cmat(), w.ref, y.mat(), {.act_quant = true}); });
        report("linear fp8", bn, ("1024x4096 M=" + std::to_string(M)), s, 2.0 * M * 1024 * 4096,
               1024.0 * 4096);
      }
    }
    if (!ref) {
      OwnedWeight w = random_weight(rng, WKind::kFp8E8m0, 4096, 8192);
      Buf x = random_buf(rng, 1, 8192), y(1, 4096);
      const Timing s = time_it([&] { ops->linear(x.cmat(), w.ref, y.mat(), {.act_quant = true}); });
      report("linear fp8", bn, "4096x8192 M=1", s, 2.0 * 4096 * 8192, 4096.0 * 8192);
      OwnedWeight hw = random_weight(rng, WKind::kBf16, 8192, 4096);
      Buf hy(1, 8192);
      Buf hx = random_buf(rng, 1, 4096);
      const Timing s2 = time_it([&] { ops->linear(hx.cmat(), hw.ref, hy.mat()); });
      report("linear bf16", bn, "8192x4096 M=1", s2, 2.0 * 8192 * 4096, 2.0 * 8192 * 4096);
    }
    // Routed experts, FP4, D=4096, I=2048: decode token with 6 experts.
    {
      const int64_t D = 4096, I = 2048, E = 6;
      std::vector<OwnedWeight> own;
      std::vector<ExpertWeights> ex;
      for (int64_t e = 0; e < E; ++e) {
        own.push_back(random_weight(rng, WKind::kFp4, I, D));
        own.push_back(random_weight(rng, WKind::kFp4, I, D));
        own.push_back(random_weight(rng, WKind::kFp4, D, I));
      }
      for (int64_t e = 0; e < E; ++e)
        ex.push_back({own[static_cast<size_t>(3 * e)].ref, own[static_cast<size_t>(3 * e + 1)].ref,
                      own[static_cast<size_t>(3 * e + 2)].ref});
      for (int64_t M : {1, 32}) {
        if (ref) break;
        Buf x = random_buf(rng, M, D), g = random_buf(rng, M, E, 0.1f, 0.3f), out(M, D);
        std::vector<int32_t> ids(static_cast<size_t>(M * E));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < E; ++j)
            ids[static_cast<size_t>(m * E + j)] = static_cast<int32_t>(j);
        MoeOpts o;
        o.act_quant = true;
        o.bf16_rounding = true;
        const Timing s = time_it([&] {
          ops->moe_experts(x.cmat(), ids.data(), g.cmat(), static_cast<int>(E), ex, o, out.mat());
        });
        const double bytes = static_cast<double>(E) * 3 * (I * D / 2 + I * D / 32);
        report("moe_experts fp4", bn, ("6 experts D4096 I2048 M=" + std::to_string(M)), s,
               2.0 * 3 * M * E * I * D, bytes);
      }
    }
    // Sparse attention: 64 heads x 512, 128 window + 512 compressed keys.
    {
      const int64_t H = 64, d = 512, R = 4096, L = 640;
      Buf kv = random_buf(rng, R, d), sink = random_buf(rng, 1, H);
      for (int64_t M : {1, 16}) {
        if (ref && M > 1) continue;
        Buf q = random_buf(rng, M, H * d), o(M, H * d);
        std::vector<int32_t> idx(static_cast<size_t>(M * L));
        for (auto& i : idx) i = static_cast<int32_t>(rng() % R);
        const Timing s = time_it([&] {
          ops->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, sink.v.data(), 0.044f, true,
                                o.mat());
        });
        report("sparse_attention", bn, ("H64 d512 L640 M=" + std::to_string(M)), s,
               4.0 * M * H * L * d, 4.0 * M * L * d);
      }
    }
    // Indexer: 64 heads x 128 over 4096 compressed rows (16k tokens of context).
    {
      const int64_t Hi = 64, di = 128, R = 4096;
      Buf q = random_buf(rng, 1, Hi * di), w = random_buf(rng, 1, Hi),
          keys = random_buf(rng, R, di), s(1, R);
      const int32_t vis[1] = {static_cast<int32_t>(R)};
      const Timing t = time_it(
          [&] { ops->indexer_scores(q.cmat(), Hi, w.cmat(), keys.cmat(), vis, true, s.mat()); });
      report("indexer_scores", bn, "H64 d128 R4096 M=1", t, 2.0 * Hi * di * R, 4.0 * R * di);
      std::vector<int32_t> out(512);
      const Timing t2 = time_it([&] { ops->topk(s.cmat(), vis, 512, out.data()); });
      report("topk", bn, "R4096 k512 M=1", t2, 0, 4.0 * R);
    }
    // mHC pre/post at D=4096, n=4.
    {
      const int n = 4;
      const int64_t D = 4096, M = ref ? 1 : 64;
      Buf fn = random_buf(rng, 24, n * D, -0.01f, 0.01f), base = random_buf(rng, 1, 24),
          scale = random_buf(rng, 1, 3);
      HcParams p{n, fn.cmat(), base.v.data(), scale.v.data(), 1e-6f, 1e-6f, 20};
      Buf X = random_buf(rng, M, n * D), y(M, D), post(M, n), comb(M, n * n),
          o = random_buf(rng, M, D), out(M, n * D);
      const Timing s = time_it([&] { ops->hc_pre(X.cmat(), p, {}, y.mat(), {}, post.mat(), comb.mat()); });
      report("hc_pre", bn, ("n4 D4096 M=" + std::to_string(M)), s, 2.0 * M * 24 * n * D,
             4.0 * M * n * D + 4.0 * 24 * n * D);
      const Timing s2 = time_it(
          [&] { ops->hc_post(X.cmat(), o.cmat(), post.cmat(), comb.cmat(), n, out.mat()); });
      report("hc_post", bn, ("n4 D4096 M=" + std::to_string(M)), s2, 2.0 * M * n * (n + 1) * D,
             4.0 * M * (2 * n + 1) * D);
    }
    // Row ops at M=64 x 4096.
    {
      const int64_t M = 64, D = 4096;
      Buf x = random_buf(rng, M, D), y(M, D);
      OwnedWeight nw = random_weight(rng, WKind::kBf16, 1, D, 1.0f);
      report("rms_norm", bn, "64x4096",
             time_it([&] { ops->rms_norm(x.cmat(), &nw.ref, 1e-6f, 0, y.mat()); }), 3.0 * M * D,
             8.0 * M * D);
      report("act_quant_fp8", bn, "64x4096 block128", time_it([&] {
               y = x;
               ops->act_quant_fp8(y.mat(), 128);
             }),
             0, 8.0 * M * D);
      report("hadamard128", bn, "64x4096", time_it([&] { ops->hadamard128(x.mat()); }), 7.0 * M * D,
             8.0 * M * D);
    }
  }
}

// The 0.3B bench model's GEMM shapes (bench/model_cpu), opt backend at 1 and 2 threads, every
// weight format: GMAC/s against this machine's FMA peak and numpy/torch sgemm on the same shapes
// (bench/model_cpu/gemm_vs_torch.py prints those). Wall and process CPU time, best of the runs.
TEST(OpsPerf, DISABLED_PrefillGemm) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{512, 2048, 512},
                          {512, 512, 768},
                          {96, 512, 768},
                          {96, 768, 512},
                          {512, 16384, 768},
                          {1, 2048, 512},
                          {1, 16384, 768},
                          // the tiny model's (hidden 64): K = 64, 32, 160
                          {512, 64, 64},
                          {512, 320, 32},
                          {512, 64, 160}};
  std::mt19937 rng(3);
  for (const char* name : {"opt1", "opt2"}) {
    auto ops = cpu::make_opt_ops(name[3] - '0');
    for (WKind kind : {WKind::kF32, WKind::kBf16, WKind::kFp8E8m0, WKind::kFp4}) {
      for (const Shape& s : shapes) {
        OwnedWeight w = random_weight(rng, kind, s.n, s.k);
        Buf x = random_buf(rng, s.m, s.k), y(s.m, s.n);
        const Timing t = time_it([&] { ops->linear(x.cmat(), w.ref, y.mat(), {}); }, 0.2);
        const double macs = static_cast<double>(s.m * s.n * s.k);
        std::printf(
            "gemm %-5s %-4s M=%-4lld N=%-5lld K=%-4lld %8.3f ms %8.3f cpu-ms %6.2f GMAC/s\n",
            wkind_name(kind), name, static_cast<long long>(s.m), static_cast<long long>(s.n),
            static_cast<long long>(s.k), t.wall * 1e3, t.cpu * 1e3, macs / t.wall * 1e-9);
      }
    }
  }
}

// Expert-sized GEMMs with cold weights (a 0.3B prefill streams 1.4 GB of them): 64 different
// [512, 768] FP32 matrices in turn, M = 96, so every call reads its weights from DRAM.
TEST(OpsPerf, DISABLED_ColdWeightGemm) {
  std::mt19937 rng(4);
  std::vector<OwnedWeight> ws;
  for (int i = 0; i < 64; ++i) ws.push_back(random_weight(rng, WKind::kF32, 512, 768));
  Buf x = random_buf(rng, 96, 768), y(96, 512);
  for (const char* name : {"opt1", "opt2"}) {
    auto ops = cpu::make_opt_ops(name[3] - '0');
    size_t i = 0;
    const Timing t = time_it([&] { ops->linear(x.cmat(), ws[i++ % ws.size()].ref, y.mat(), {}); });
    std::printf("cold gemm f32 %s M=96 N=512 K=768 %8.3f ms %6.2f GMAC/s\n", name, t.wall * 1e3,
                96.0 * 512 * 768 / t.wall * 1e-9);
  }
}

}  // namespace
}  // namespace deepinfer::backend::testing
