// Perf mode of the CUDA op harness (ops_cuda_test --perf): each op at V4-Flash shapes (decode
// M = 1, 16, 128; prefill 4096 for linear), timed with CUDA events over repeated launches, next
// to this card's ceilings: the device-to-device copy bandwidth measured on the spot (bytes read
// + written; ~4.27 TB/s on an H200) and the dense BF16 matmul rate (~780 TFLOP/s measured with
// PyTorch on an H200; not measured here). Bytes are the op's compulsory traffic (weights +
// scales once, activations in and out); FLOPs count 2 per multiply-add. Numbers, never pass/fail.
//
// Integer inputs are passed as device arrays (what the plan/run split will do), so the times
// are kernel times without host staging.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"
#include "op_harness.h"
#include "sample/sample_spec.h"

namespace deepinfer::backend::testing {
namespace {

constexpr double kMatmulTflops = 780.0;  // H200 dense BF16, measured with PyTorch (KINDS.md)

struct Perf {
  cuda::CudaOps* gpu;
  double copy_gbs = 0;
  std::string filter;
  CaseContext ctx;  // ctx.ops = gpu: where the op harness's helpers place buffers
};

template <typename F>
double time_ms(cuda::CudaOps& gpu, F&& fn, int reps = 20) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  DI_CUDA_CHECK(cudaEventCreate(&a));
  DI_CUDA_CHECK(cudaEventCreate(&b));
  DI_CUDA_CHECK(cudaEventRecord(a, gpu.stream()));
  for (int i = 0; i < reps; ++i) fn();
  DI_CUDA_CHECK(cudaEventRecord(b, gpu.stream()));
  DI_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  DI_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(ms) / reps;
}

void report(const Perf& p, const char* op, const std::string& shape, double ms, double flops,
            double bytes) {
  const double gbs = bytes / (ms * 1e-3) * 1e-9, tf = flops / (ms * 1e-3) * 1e-12;
  std::printf("%-22s %-34s %9.4f ms %8.1f GB/s (%5.1f%% of copy) %8.2f TFLOP/s (%5.2f%% of %.0f)\n",
              op, shape.c_str(), ms, gbs, 100.0 * gbs / p.copy_gbs, tf, 100.0 * tf / kMatmulTflops,
              kMatmulTflops);
  std::fflush(stdout);
}

// --filter: comma-separated substrings of op names; an op runs when any matches.
bool wanted(const Perf& p, const char* op) {
  if (p.filter.empty()) return true;
  std::stringstream ss(p.filter);
  for (std::string part; std::getline(ss, part, ',');) {
    if (!part.empty() && std::string(op).find(part) != std::string::npos) return true;
  }
  return false;
}

// Device-resident weight with cheap pseudo-random bytes (no host RNG per element: these
// weights are hundreds of MB). FP8 bytes avoid the NaN codes; scales are 2^-7.
struct PerfWeight {
  std::vector<uint8_t> host, hscale;
  cuda::DeviceWeight dev;
  double bytes = 0;
};
std::unique_ptr<PerfWeight> perf_weight(WKind kind, int64_t n, int64_t k) {
  auto w = std::make_unique<PerfWeight>();
  uint64_t s = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(n * 131 + k);
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  WeightRef ref;
  if (kind == WKind::kBf16) {
    w->host.resize(static_cast<size_t>(n * k * 2));
    for (size_t i = 0; i < w->host.size(); i += 2) {
      const uint64_t r = next();
      w->host[i] = static_cast<uint8_t>(r);
      w->host[i + 1] = static_cast<uint8_t>(0x3c | ((r >> 8) & 0x80));  // |w| ~ 2^-7..2^-6
    }
    ref = WeightRef::dense(TensorView::make(DType::kBF16, {n, k}, w->host.data())).value();
  } else if (kind == WKind::kFp8E8m0) {
    w->host.resize(static_cast<size_t>(n * k));
    for (size_t i = 0; i < w->host.size(); i += 8) {
      const uint64_t r = next() & 0xb7b7b7b7b7b7b7b7ull;  // exponent <= 6: never the NaN code
      for (size_t j = 0; j < 8 && i + j < w->host.size(); ++j)
        w->host[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
    const int64_t sn = (n + 127) / 128, sk = (k + 127) / 128;
    w->hscale.assign(static_cast<size_t>(sn * sk), 120);
    ref = WeightRef::fp8(TensorView::make(DType::kF8E4M3, {n, k}, w->host.data()),
                         TensorView::make(DType::kF8E8M0, {sn, sk}, w->hscale.data()))
              .value();
  } else {
    w->host.resize(static_cast<size_t>(n * k / 2));
    for (size_t i = 0; i < w->host.size(); i += 8) {
      const uint64_t r = next();
      for (size_t j = 0; j < 8 && i + j < w->host.size(); ++j)
        w->host[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
    w->hscale.assign(static_cast<size_t>(n * (k / 32)), 122);
    ref = WeightRef::fp4(TensorView::make(DType::kI8, {n, k / 2}, w->host.data()),
                         TensorView::make(DType::kF8E8M0, {n, k / 32}, w->hscale.data()))
              .value();
  }
  w->dev = cuda::upload_weight(ref).value();
  w->bytes = static_cast<double>(w->host.size() + w->hscale.size());
  std::vector<uint8_t>().swap(w->host);  // the device copy is all perf needs
  return w;
}

DBuf dev_random(Perf& p, std::mt19937& rng, int64_t r, int64_t c, float lo = -1.0f,
                float hi = 1.0f) {
  return dev_copy(p.ctx, random_buf(rng, r, c, lo, hi));
}

void perf_linear(Perf& p, std::mt19937& rng) {
  struct L {
    const char* name;
    WKind kind;
    int64_t n, k;
  };
  for (L l : {L{"linear fp8 wq_a", WKind::kFp8E8m0, 1024, 4096},
              L{"linear fp8 wq_b", WKind::kFp8E8m0, 32768, 1024},
              L{"linear fp8 wo_b", WKind::kFp8E8m0, 4096, 8192},
              L{"linear bf16 head", WKind::kBf16, 129280, 4096},
              L{"linear fp4 expert w1", WKind::kFp4, 2048, 4096}}) {
    if (!wanted(p, l.name)) continue;
    auto w = perf_weight(l.kind, l.n, l.k);
    if (l.kind == WKind::kFp8E8m0) {
      std::printf("%s: cuBLASLt block-scaled FP8 at M=128: %s\n", l.name,
                  p.gpu->fp8_gemm_probe(128, l.n, l.k).c_str());
    }
    for (int64_t M : {1, 4, 8, 16, 32, 64, 128, 256, 1024, 4096}) {
      if (M == 4096 && l.n > 40000) continue;
      const DBuf x = dev_random(p, rng, M, l.k);
      DBuf y = dev_poisoned(p.ctx, M, l.n);
      const bool aq = l.kind != WKind::kBf16;
      const std::string shape =
          std::to_string(l.n) + "x" + std::to_string(l.k) + " M=" + std::to_string(M);
      const double flops = 2.0 * M * l.n * l.k, bytes = w->bytes + 4.0 * M * (l.k + l.n);
      // Rounded to BF16 in the store, as the model calls its quantized linears
      // (Numerics::gemm_rounded).
      const auto run = [&] {
        p.gpu->linear(x.cmat(), w->dev.ref, y.mat(), {.act_quant = aq, .round_bf16 = aq});
      };
      report(p, l.name, shape, time_ms(*p.gpu, run, M == 4096 ? 3 : 20), flops, bytes);
      // 1-4 rows on FP8/FP4 weights: the decode GEMV alone (warps owning rows), the
      // thread-group GEMV it replaced, and the single-expert mma stage, same run.
      if (aq && M <= 4) {
        p.gpu->set_linear_mma_min_rows(int64_t{1} << 40);
        report(p, l.name, shape + " decode GEMV", time_ms(*p.gpu, run, 20), flops, bytes);
        p.gpu->set_stream_gemv(false);
        report(p, l.name, shape + " thread-group GEMV", time_ms(*p.gpu, run, 20), flops, bytes);
        p.gpu->set_stream_gemv(true);
        p.gpu->set_linear_mma_min_rows(1);
        report(p, l.name, shape + " on the mma stage", time_ms(*p.gpu, run, 20), flops, bytes);
        p.gpu->set_linear_mma_min_rows(2);
      }
      // The same call without the grouped tensor-core stage (rows GEMV to 16 rows, cuBLAS on a
      // dequantized copy above), same run: where the stage is taken (cuda_gemm.cc) it is the
      // peer, elsewhere the two lines time the same path.
      if (aq && M >= 5 && M <= 64) {
        p.gpu->set_linear_mma_max_rows(0);
        report(p, l.name, shape + " without the mma stage", time_ms(*p.gpu, run, 20), flops, bytes);
        p.gpu->set_linear_mma_max_rows(64);
      }
      // And without the block-scaled FP8 GEMM (cuBLAS on a dequantised BF16 copy instead), the
      // path it replaced, same run. The FP8 rate peer (torch._scaled_mm with the same block
      // scales) is bench/model_cuda/scaled_mm_peer.py, run in the same device call.
      // Below its threshold, the FP8 GEMM's time where it would take these rows (the threshold's
      // evidence).
      if (l.kind == WKind::kFp8E8m0 && M == 8) {
        p.gpu->set_fp8_gemm_min_rows(1);
        report(p, l.name, shape + " on the FP8 GEMM", time_ms(*p.gpu, run, 20), flops, bytes);
        p.gpu->set_fp8_gemm_min_rows(16);
      }
      if (l.kind == WKind::kFp8E8m0 && M >= 16) {
        p.gpu->set_fp8_gemm_min_rows(int64_t{1} << 40);
        report(p, l.name, shape + " without the FP8 GEMM", time_ms(*p.gpu, run, M == 4096 ? 3 : 20),
               flops, bytes);
        p.gpu->set_fp8_gemm_min_rows(16);
      }
    }
  }
}

// Ops::sample over V4's 129,280-id rows resident on the device (tokens back to the host), for
// the filter mixes a server sees: greedy, temperature alone, temperature + top-k 50 (the
// decode bench's), temperature + top-p 0.9. Ceiling: one read of the logits. Peer: the same
// rows on one block each ("1 block/row", CudaOps::set_sample_cluster(1)), the kernel's form
// before rows took a cluster of blocks; the same tokens (checked here too).
void perf_sample(Perf& p, std::mt19937& rng) {
  if (!wanted(p, "sample")) return;
  const int64_t V = 129280;
  for (int64_t rows : {1, 4, 16, 64, 256}) {
    const DBuf logits = dev_random(p, rng, rows, V, -4.0f, 4.0f);
    struct Mix {
      const char* name;
      float temperature;
      int top_k;
      float top_p;
    };
    for (const Mix& m :
         {Mix{"greedy", 0.0f, 0, 1.0f}, Mix{"t0.8", 0.8f, 0, 1.0f},
          Mix{"t0.8 top-k 50", 0.8f, 50, 1.0f}, Mix{"t0.8 top-p 0.9", 0.8f, 0, 0.9f}}) {
      std::vector<SampleSpec> specs;
      for (int64_t r = 0; r < rows; ++r) {
        sample::SamplingParams sp;
        sp.temperature = m.temperature;
        sp.top_k = m.top_k;
        sp.top_p = m.top_p;
        specs.push_back(sample::make_sample_spec(sp, {7, 1, static_cast<uint32_t>(r)}));
      }
      std::vector<int32_t> tokens(static_cast<size_t>(rows)), single(tokens.size());
      const double ms = time_ms(
          *p.gpu, [&] { p.gpu->sample(logits.cmat(), specs, tokens.data()); }, 10);
      p.gpu->set_sample_cluster(1);
      const double ms1 = time_ms(
          *p.gpu, [&] { p.gpu->sample(logits.cmat(), specs, single.data()); }, 10);
      p.gpu->set_sample_cluster(0);
      const std::string shape = std::string(m.name) + " V129280 rows=" + std::to_string(rows);
      report(p, "sample", shape, ms, 0, 4.0 * rows * V);
      report(p, "sample", shape + " 1 block/row", ms1, 0, 4.0 * rows * V);
      std::printf("  sample %s: 1 block/row / cluster = %.2f, tokens %s\n", shape.c_str(), ms1 / ms,
                  tokens == single ? "equal" : "DIFFER");
    }
  }
}

void perf_moe(Perf& p, std::mt19937& rng) {
  if (!wanted(p, "moe_experts")) return;
  // V4-Flash's routed experts: 256 of D 4096 x I 2048, top-6 (at batch 128 nearly all are used,
  // ~3 pairs each, as in a decode step).
  const int64_t D = 4096, I = 2048, E = 256;
  const int top_k = 6;
  std::vector<std::unique_ptr<PerfWeight>> own;
  std::vector<ExpertWeights> ex;
  for (int64_t e = 0; e < E; ++e) {
    own.push_back(perf_weight(WKind::kFp4, I, D));
    own.push_back(perf_weight(WKind::kFp4, I, D));
    own.push_back(perf_weight(WKind::kFp4, D, I));
    ex.push_back({own[own.size() - 3]->dev.ref, own[own.size() - 2]->dev.ref, own.back()->dev.ref});
  }
  const double expert_bytes = own[0]->bytes + own[1]->bytes + own[2]->bytes;
  for (int64_t M : {1, 4, 16, 128, 256, 1024, 4096}) {
    std::vector<int32_t> ids(static_cast<size_t>(M * top_k));
    std::vector<bool> used(E, false);
    for (int64_t m = 0; m < M; ++m) {
      for (int j = 0; j < top_k; ++j) {  // top_k distinct experts per token
        int32_t e = 0;
        bool taken = true;
        while (taken) {
          e = static_cast<int32_t>(rng() % E);
          taken = false;
          for (int i = 0; i < j; ++i) taken |= ids[static_cast<size_t>(m * top_k + i)] == e;
        }
        ids[static_cast<size_t>(m * top_k + j)] = e;
        used[static_cast<size_t>(e)] = true;
      }
    }
    int n_used = 0;
    for (bool u : used) n_used += u ? 1 : 0;
    const DBuf x = dev_random(p, rng, M, D), g = dev_random(p, rng, M, top_k, 0.1f, 0.3f);
    DBuf out = dev_poisoned(p.ctx, M, D);
    const BackendMem did = dev_array(p.ctx, ids);
    MoeOpts o;
    o.act_quant = true;
    o.bf16_rounding = true;
    const auto run = [&] {
      p.gpu->moe_experts(x.cmat(), did.as<int32_t>(), g.cmat(), top_k, ex, o, out.mat());
    };
    const std::string shape = "top6 of 256, D4096 I2048 M=" + std::to_string(M) + " (" +
                              std::to_string(n_used) + " experts)";
    const double flops = 2.0 * 3 * M * top_k * I * D, bytes = n_used * expert_bytes + 8.0 * M * D;
    const int reps = M >= 1024 ? 5 : 20;
    report(p, "moe_experts fp4", shape, time_ms(*p.gpu, run, reps), flops, bytes);
    // The grouped stages' other forms, same run (the choice's evidence; the bits are the same):
    // one tile of 8 pairs per weight decode, four, and the wide form (8 tiles, 64 rows a block).
    if (M >= 128) {
      const int chosen = M * top_k >= 16 * E ? 8 : 1;
      for (const auto& [tiles, name] : {std::pair{1, " one tile"}, std::pair{4, " four tiles"},
                                        std::pair{8, " wide"}}) {
        if (tiles == chosen) continue;
        p.gpu->set_moe_pair_tiles(tiles);
        report(p, "moe_experts fp4", shape + name, time_ms(*p.gpu, run, reps), flops, bytes);
      }
      p.gpu->set_moe_pair_tiles(0);
    }
  }
  // V4-Flash's shared expert (FP8, D 4096 x I 2048, MoeOpts::single_expert) at decode sizes.
  auto w1 = perf_weight(WKind::kFp8E8m0, I, D), w3 = perf_weight(WKind::kFp8E8m0, I, D),
       w2 = perf_weight(WKind::kFp8E8m0, D, I);
  const ExpertWeights shared{w1->dev.ref, w3->dev.ref, w2->dev.ref};
  const double shared_bytes = w1->bytes + w3->bytes + w2->bytes;
  for (int64_t M : {1, 4, 16}) {
    const DBuf x = dev_random(p, rng, M, D), g = dev_random(p, rng, M, 1, 1.0f, 1.0f);
    DBuf out = dev_poisoned(p.ctx, M, D);
    const BackendMem did = dev_array(p.ctx, std::vector<int32_t>(static_cast<size_t>(M), 0));
    MoeOpts o;
    o.act_quant = true;
    o.bf16_rounding = true;
    o.single_expert = true;
    const auto run = [&] {
      p.gpu->moe_experts(x.cmat(), did.as<int32_t>(), g.cmat(), 1, {&shared, 1}, o, out.mat());
    };
    const std::string shape = "shared D4096 I2048 M=" + std::to_string(M);
    const double flops = 2.0 * 3 * M * I * D, bytes = shared_bytes + 8.0 * M * D;
    report(p, "moe_experts fp8", shape, time_ms(*p.gpu, run, 20), flops, bytes);
  }
}

// Sparse attention at V4's decode shape (64 heads, d 512, 640 keys per query row): M = 2 x the
// batch of FlashMLA's peer runs (bench/model_cuda/flashmla_peer.py: 2 queries per sequence, a
// batch of 2 / 64 / 128 / 256), 1 and 16, and 4096 (a prefill chunk: the tensor-core kernel
// against the group one).
void perf_sparse_attention(Perf& p, std::mt19937& rng, int64_t M) {
  if (!wanted(p, "sparse_attention")) return;
  const int64_t H = 64, d = 512, R = 8192, L = 640;
  const DBuf kv = dev_random(p, rng, R, d), q = dev_random(p, rng, M, H * d, -0.1f, 0.1f);
  const DBuf sink = dev_random(p, rng, 1, H);
  std::vector<int32_t> idx(static_cast<size_t>(M * L));
  for (auto& i : idx) i = static_cast<int32_t>(rng() % R);
  const BackendMem didx = dev_array(p.ctx, idx);
  DBuf o = dev_poisoned(p.ctx, M, H * d);
  // The same call on a batch-invariant backend: the single-pass SIMT kernel (no key split,
  // no tensor cores), the same-run peer of the split path that small M takes and of the
  // tensor-core kernel that M = 128 and 4096 take.
  static auto single = cuda::CudaOps::create(0, /*batch_invariant=*/true);
  for (cuda::CudaOps* ops : {p.gpu, single.ok() ? single->get() : nullptr}) {
    if (ops == nullptr) continue;
    const double ms = time_ms(*ops, [&] {
      ops->sparse_attention(q.cmat(), H, kv.cmat(), didx.as<int32_t>(), L, sink.mem.as<float>(),
                            0.044f, true, o.mat());
    });
    report(p, ops == p.gpu ? "sparse_attention" : "sparse_attention single-pass",
           "H64 d512 L640 M=" + std::to_string(M), ms, 4.0 * M * H * L * d,
           4.0 * (2.0 * M * H * d + static_cast<double>(M) * L * d));
  }
  // The same call on the GPU backend with its sparse-attention routing changed, under `label`.
  const auto timed_with = [&](bool staged, bool staged_split, bool split, const char* label) {
    p.gpu->set_sparse_staged(staged);
    p.gpu->set_sparse_staged_split(staged_split);
    p.gpu->set_sparse_split(split);
    const double ms = time_ms(*p.gpu, [&] {
      p.gpu->sparse_attention(q.cmat(), H, kv.cmat(), didx.as<int32_t>(), L, sink.mem.as<float>(),
                              0.044f, true, o.mat());
    });
    p.gpu->set_sparse_staged(true);  // the defaults
    p.gpu->set_sparse_staged_split(false);
    p.gpu->set_sparse_split(true);
    report(p, label, "H64 d512 L640 M=" + std::to_string(M), ms, 4.0 * M * H * L * d,
           4.0 * (2.0 * M * H * d + static_cast<double>(M) * L * d));
  };
  // The 16-head tensor-core kernel the staged one replaced at 32+ heads (stop 46), never split:
  // its same-run peer. Few rows take the SIMT split by default: beside it the staged kernel's
  // split form (stop 47, off until its first GPU run) and the staged kernel unsplit (one block
  // per row), whose crossovers say which few-row form should run where.
  timed_with(false, false, false, "sparse_attention 16-head blocks");
  if (M < 128) {
    timed_with(true, true, true, "sparse_attention staged split");
    timed_with(true, false, false, "sparse_attention no split");
  }
  // The same keys by address (what the model runs: cache rows read in place).
  std::vector<const float*> rows(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) rows[i] = kv.cmat().row(idx[i]);
  const BackendMem drows = dev_array(p.ctx, rows);
  const double ms = time_ms(*p.gpu, [&] {
    p.gpu->sparse_attention_rows(q.cmat(), H, drows.as<const float* const>(), L, d,
                                 sink.mem.as<float>(), 0.044f, true, o.mat());
  });
  report(p, "sparse_attention by address", "H64 d512 L640 M=" + std::to_string(M), ms,
         4.0 * M * H * L * d, 4.0 * (2.0 * M * H * d + static_cast<double>(M) * L * d));
}

void perf_attention_side(Perf& p, std::mt19937& rng) {
  for (int64_t M : {1, 4, 8, 16, 32, 64, 128, 256, 512, 4096}) perf_sparse_attention(p, rng, M);
  for (int64_t M : {1, 16, 128, 4096}) {
    if (wanted(p, "indexer_scores")) {
      const int64_t H = 64, di = 128, R = 4096;
      const DBuf q = dev_random(p, rng, M, H * di), w = dev_random(p, rng, M, H),
                 k = dev_random(p, rng, R, di);
      const BackendMem vis =
          dev_array(p.ctx, std::vector<int32_t>(static_cast<size_t>(M), static_cast<int32_t>(R)));
      DBuf s = dev_poisoned(p.ctx, M, R);
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->indexer_scores(q.cmat(), H, w.cmat(), k.cmat(), vis.as<int32_t>(), true, s.mat());
      });
      report(p, "indexer_scores", "H64 di128 R4096 M=" + std::to_string(M), ms,
             2.0 * M * H * R * di, 4.0 * (R * di + M * H * di + M * R));
      if (wanted(p, "topk")) {
        BackendMem out = dev_array(p.ctx, std::vector<int32_t>(static_cast<size_t>(M * 512), 0));
        const double ms2 = time_ms(
            *p.gpu, [&] { p.gpu->topk(s.cmat(), vis.as<int32_t>(), 512, out.as<int32_t>()); }, 5);
        report(p, "topk", "R4096 k512 M=" + std::to_string(M), ms2, 0, 4.0 * M * (R + 512));
      }
    }
    if (wanted(p, "indexer_scores_multi") && M == 4096) {
      // A 4096-token prefill chunk: every row reads the sequence's 1024 index keys (ratio 4, pages
      // of 256 rows) up to its causal count: the tensor-core kernel (runs of rows sharing keys,
      // BF16 rounding points) against the SIMT one, same run; half the score matrix is visible.
      const int64_t H = 64, di = 128, R = 1024, P = 256;
      const DBuf q = dev_random(p, rng, M, H * di), w = dev_random(p, rng, M, H),
                 k = dev_random(p, rng, R, di);
      std::vector<const float*> pages;
      for (int64_t r = 0; r < R; r += P) pages.push_back(k.cmat().row(r));
      const std::vector<PagedCMat> row_keys(static_cast<size_t>(M), {pages.data(), R, di, P});
      std::vector<int32_t> vis(static_cast<size_t>(M));
      for (int64_t t = 0; t < M; ++t) vis[static_cast<size_t>(t)] = static_cast<int32_t>((t + 1) / 4);
      DBuf s = dev_poisoned(p.ctx, M, R);
      for (bool mma : {true, false}) {
        p.gpu->set_indexer_mma(mma);
        const double ms = time_ms(*p.gpu, [&] {
          p.gpu->indexer_scores_multi(q.cmat(), H, w.cmat(), row_keys, vis.data(), true, s.mat());
        });
        report(p, mma ? "indexer_scores_multi" : "indexer_scores_multi SIMT",
               "H64 di128 R1024 causal prefill M=" + std::to_string(M), ms, 1.0 * M * H * R * di,
               4.0 * (R * di + M * H * di + M * R / 2));
      }
      p.gpu->set_indexer_mma(true);
    }
    if (wanted(p, "indexer_scores_multi") && M > 1 && M <= 128) {
      // A decode step of M sequences, each with its own 1024 index keys (4096 tokens of context)
      // in the cache's pages of 256 rows: every row reads its own keys, so the bytes are M times
      // the shared-key case's.
      const int64_t H = 64, di = 128, R = 1024, P = 256;
      const DBuf q = dev_random(p, rng, M, H * di), w = dev_random(p, rng, M, H),
                 k = dev_random(p, rng, M * R, di);
      std::vector<const float*> pages;
      for (int64_t r = 0; r < M * R; r += P) pages.push_back(k.cmat().row(r));
      std::vector<PagedCMat> row_keys;
      for (int64_t t = 0; t < M; ++t) row_keys.push_back({pages.data() + t * (R / P), R, di, P});
      const std::vector<int32_t> vis(static_cast<size_t>(M), static_cast<int32_t>(R));
      DBuf s = dev_poisoned(p.ctx, M, R);
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->indexer_scores_multi(q.cmat(), H, w.cmat(), row_keys, vis.data(), true, s.mat());
      });
      report(p, "indexer_scores_multi", "H64 di128 R1024 per row M=" + std::to_string(M), ms,
             2.0 * M * H * R * di, 4.0 * (M * R * di + M * H * di + M * R));
    }
  }
}

// topk at the V4 indexer's shapes: M query rows (1: decode .. 4096: a prefill chunk) over R
// visible index keys (4,096 .. 65,536) with k = index_topk (512 / 1024 / 2048 across the V4
// family), on BF16-rounded scores (the official semantics' indexer output: the cut has ties).
// The radix select (what CudaOps::topk takes at these shapes) and the rank count it replaced,
// on the same scores in the same run; the rank count is O(R²) per row, so it is timed only up
// to M·R² = 2^40 (about 20 ms a call on an H200). "topk rank/radix" is the time ratio; a
// "MISMATCH" line would mean the two kernels disagree (the op cases are the real check).
void perf_topk(Perf& p) {
  if (!wanted(p, "topk")) return;
  const int64_t max_rows = 4096, max_cols = 65536;
  std::vector<float> host(static_cast<size_t>(max_rows * max_cols));
  uint64_t state = 0x2545f4914f6cdd1dull;
  for (float& v : host) {  // uniform in [-1, 3), then rounded to BF16 (nearest even)
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    float f = -1.0f + 4.0f * static_cast<float>(state >> 40) * (1.0f / 16777216.0f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&f, &u, 4);
    v = f;
  }
  const BackendMem scores = dev_array(p.ctx, host);
  std::vector<float>().swap(host);
  namespace kc = kernels::cuda;
  for (int64_t k : {512, 1024, 2048}) {
    BackendMem out_radix(*p.gpu, static_cast<size_t>(max_rows * k) * 4);
    BackendMem out_rank(*p.gpu, static_cast<size_t>(max_rows * k) * 4);
    for (int64_t R : {4096, 16384, 65536}) {
      for (int64_t M : {1, 16, 128, 1024, 4096}) {
        const kc::MatDesc sc{scores.as<float>(), M, R, max_cols};
        const BackendMem vis =
            dev_array(p.ctx, std::vector<int32_t>(static_cast<size_t>(M), static_cast<int32_t>(R)));
        char shape_text[64];  // snprintf: GCC 12's -Wrestrict misfires on "R" + to_string(R)
        std::snprintf(shape_text, sizeof shape_text, "R%lld k%lld M=%lld",
                      static_cast<long long>(R), static_cast<long long>(k),
                      static_cast<long long>(M));
        const std::string shape = shape_text;
        const double bytes = 4.0 * M * (R + k);
        const double radix_ms = time_ms(*p.gpu, [&] {
          kc::launch_topk_radix(sc, vis.as<int32_t>(), k, out_radix.as<int32_t>(), p.gpu->stream());
        });
        report(p, "topk radix", shape, radix_ms, 0, bytes);
        if (static_cast<double>(M) * static_cast<double>(R) * static_cast<double>(R) >
            1099511627776.0) {
          continue;
        }
        const double rank_ms = time_ms(
            *p.gpu,
            [&] {
              kc::launch_topk_rank_count(sc, vis.as<int32_t>(), k, out_rank.as<int32_t>(),
                                         p.gpu->stream());
            },
            M * R * R > (int64_t{1} << 36) ? 2 : 10);
        report(p, "topk rank count", shape, rank_ms, 0, bytes);
        std::printf("%-22s %-34s %9.2fx\n", "topk rank/radix", shape.c_str(), rank_ms / radix_ms);
        const size_t n = static_cast<size_t>(M * k);
        if (download_ints(p.ctx, out_radix, n) != download_ints(p.ctx, out_rank, n))
          std::printf("%-22s %-34s MISMATCH between the two kernels\n", "topk", shape.c_str());
        std::fflush(stdout);
      }
    }
  }
}

void perf_rowwise(Perf& p, std::mt19937& rng) {
  const int64_t D = 4096, n = 4;
  const Buf fnh = random_buf(rng, (2 + n) * n, n * D, -0.01f, 0.01f);
  const DBuf fn = dev_copy(p.ctx, fnh);
  const BackendMem base =
      dev_array(p.ctx, std::vector<float>(static_cast<size_t>((2 + n) * n), 0.1f));
  const BackendMem scale = dev_array(p.ctx, std::vector<float>{1.0f, 1.0f, 1.0f});
  const std::vector<float> freqs = make_rope_freqs(10000.0f, 64);
  const BackendMem dfreqs = dev_array(p.ctx, freqs);
  for (int64_t M : {1, 16, 64, 128, 4096}) {
    const std::string ms_ = " M=" + std::to_string(M);
    const DBuf x = dev_random(p, rng, M, D), streams = dev_random(p, rng, M, n * D);
    DBuf y = dev_poisoned(p.ctx, M, D), post = dev_poisoned(p.ctx, M, n),
         comb = dev_poisoned(p.ctx, M, n * n);
    if (wanted(p, "rms_norm")) {
      const double ms =
          time_ms(*p.gpu, [&] { p.gpu->rms_norm(x.cmat(), nullptr, 1e-6f, 0, y.mat()); });
      report(p, "rms_norm", "D4096" + ms_, ms, 3.0 * M * D, 8.0 * M * D);
    }
    if (wanted(p, "act_quant")) {
      DBuf xq = dev_random(p, rng, M, D);
      const double ms = time_ms(*p.gpu, [&] { p.gpu->act_quant_fp8(xq.mat(), 128); });
      report(p, "act_quant_fp8", "D4096" + ms_, ms, 0, 8.0 * M * D);
    }
    if (wanted(p, "hc_pre")) {
      HcParams hp{static_cast<int>(n), fn.cmat(), base.as<float>(), scale.as<float>()};
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->hc_pre(streams.cmat(), hp, {}, y.mat(), {}, post.mat(), comb.mat());
      });
      report(p, "hc_pre", "n4 D4096" + ms_, ms, 2.0 * M * 24 * n * D,
             4.0 * (M * n * D + M * D + 24.0 * n * D));
      if (M >= 16) {  // the logits' dots by hc_dots_kernel (partial sums) vs the GEMM, same run
        const bool gemm = M >= 128;  // CudaOps' threshold
        p.gpu->set_hc_gemm_min_rows(gemm ? int64_t{1} << 40 : 1);
        const double ms_other = time_ms(*p.gpu, [&] {
          p.gpu->hc_pre(streams.cmat(), hp, {}, y.mat(), {}, post.mat(), comb.mat());
        });
        p.gpu->set_hc_gemm_min_rows(128);
        report(p, "hc_pre", "n4 D4096" + ms_ + (gemm ? " dots by the kernel" : " dots by the GEMM"),
               ms_other, 2.0 * M * 24 * n * D, 4.0 * (M * n * D + M * D + 24.0 * n * D));
      }
      if (M > 1 && M <= 128) {  // the dots kernel's tokens per block, same run (same bits)
        p.gpu->set_hc_gemm_min_rows(int64_t{1} << 40);
        for (int per : {1, 4, 8, 16}) {
          p.gpu->set_hc_dot_tokens(per);
          const double ms_per = time_ms(*p.gpu, [&] {
            p.gpu->hc_pre(streams.cmat(), hp, {}, y.mat(), {}, post.mat(), comb.mat());
          });
          report(p, "hc_pre", "n4 D4096" + ms_ + " dots " + std::to_string(per) + " tok/block",
                 ms_per, 2.0 * M * 24 * n * D, 4.0 * (M * n * D + M * D + 24.0 * n * D));
        }
        p.gpu->set_hc_dot_tokens(0);
        p.gpu->set_hc_gemm_min_rows(128);
      }
    }
    if (wanted(p, "hc_post")) {
      DBuf s2 = dev_random(p, rng, M, n * D);
      const DBuf pp = dev_random(p, rng, M, n), cc = dev_random(p, rng, M, n * n);
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->hc_post(s2.cmat(), x.cmat(), pp.cmat(), cc.cmat(), static_cast<int>(n), s2.mat());
      });
      report(p, "hc_post", "n4 D4096" + ms_, ms, 2.0 * M * n * (n + 1) * D,
             4.0 * (2.0 * M * n * D + M * D));
    }
    if (wanted(p, "rope") && M <= 128) {
      DBuf qh = dev_random(p, rng, M, 64 * 512);
      std::vector<int32_t> pos(static_cast<size_t>(M));
      for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(1000 + i);
      const BackendMem dpos = dev_array(p.ctx, pos);
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->rope(qh.mat(), 64, 512, dpos.as<int32_t>(), {dfreqs.as<float>(), freqs.size()},
                    false);
      });
      report(p, "rope", "64 heads x 512, rope 64" + ms_, ms, 6.0 * M * 64 * 32,
             2.0 * 4.0 * M * 64 * 64);
    }
    if (wanted(p, "rope")) {  // rotation and the BF16 point over every channel (the queries)
      DBuf qh = dev_random(p, rng, M, 64 * 512);
      std::vector<int32_t> pos(static_cast<size_t>(M));
      for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(1000 + i);
      const BackendMem dpos = dev_array(p.ctx, pos);
      const double ms = time_ms(*p.gpu, [&] {
        p.gpu->rope_rounded(qh.mat(), 64, 512, dpos.as<int32_t>(),
                            {dfreqs.as<float>(), freqs.size()}, false);
      });
      report(p, "rope_rounded", "64 heads x 512, rope 64" + ms_, ms, 6.0 * M * 64 * 32,
             2.0 * 4.0 * M * 64 * 512);
    }
  }
}

}  // namespace

int run_perf(cuda::CudaOps& gpu, const std::string& filter) {
  Perf p{&gpu, 0, filter, {}};
  p.ctx.ops = &gpu;
  {  // ceiling: device-to-device copy of 2 GiB, bytes read + written
    const size_t n = size_t{2} << 30;
    auto a = cuda::DeviceBuffer::allocate(n), b = cuda::DeviceBuffer::allocate(n);
    if (!a.ok() || !b.ok()) {
      std::printf("cannot allocate the copy buffers\n");
      return 1;
    }
    DI_CUDA_CHECK(cudaMemsetAsync(a.value().data(), 1, n, gpu.stream()));
    const double ms = time_ms(
        gpu,
        [&] {
          DI_CUDA_CHECK(cudaMemcpyAsync(b.value().data(), a.value().data(), n,
                                        cudaMemcpyDeviceToDevice, gpu.stream()));
        },
        10);
    p.copy_gbs = 2.0 * static_cast<double>(n) / (ms * 1e-3) * 1e-9;
    std::printf(
        "ceiling: device-to-device copy %.1f GB/s (read + write; H200 reference ~4270), "
        "matmul %.0f TFLOP/s (BF16, PyTorch-measured H200 figure)\n",
        p.copy_gbs, kMatmulTflops);
  }
  std::mt19937 rng(7);
  perf_sample(p, rng);
  perf_linear(p, rng);
  perf_moe(p, rng);
  perf_attention_side(p, rng);
  perf_topk(p);
  perf_rowwise(p, rng);
  return 0;
}

}  // namespace deepinfer::backend::testing
