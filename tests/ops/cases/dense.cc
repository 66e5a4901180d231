// Op cases, dense side (first written for CUDA, at the shapes its kernels switch on): linear in
// every weight format (GEMV and tiled paths, act quant, strided inputs, row-sliced FP8), RMSNorm,
// BF16 rounding, glue ops, embedding, RoPE, the quantization round trips, Hadamard, mHC, SwiGLU,
// routing, the grouped MoE and sampling.
//
// Tolerances on the normalised error (op_harness.h compare): 0 where both sides apply the same
// rounding rules to the same values (quantization, BF16 rounding, copies); ~1e-5 where the
// backend sums in FP32 what the oracle sums in double; 2e-2 where a BF16 rounding of an
// intermediate may land on the other side of a rounding boundary.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../op_harness.h"
#include "../sample_cases.h"
#include "base/numeric_types.h"

namespace deepinfer::backend::testing {
namespace {

// Act-quantized FP8 linears a backend may run on FP8 tensor cores: CUDA from 16 rows, when K
// is a multiple of 512 and y's rows are 16-byte aligned (cuBLASLt's block-scaled GEMM,
// backend/cuda/cublaslt_fp8.h). The products are exact, but Hopper's tensor cores sum each
// 128-long block in their own accumulator (about 14 significant bits kept, DeepSeek-V3 report
// §3.3.2) before the FP32 sum over blocks: a normalised error of ~1e-4 where FP32 FMAs give
// ~1e-6. A wrong scale or layout is off by O(1), far above this bound.
constexpr double kFp8TensorCoreTol = 5e-4;

bool fp8_tensor_core_shape(WKind kind, bool aq, int64_t M, int64_t K, int64_t pad) {
  return aq && kind == WKind::kFp8E8m0 && M >= 16 && K % 512 == 0 && pad == 0;
}

std::string tag(const char* op, WKind k, int64_t m, int64_t n, int64_t kk) {
  return std::string(op) + " " + wkind_name(k) + " M=" + std::to_string(m) +
         " N=" + std::to_string(n) + " K=" + std::to_string(kk);
}

}  // namespace

OP_CASE(linear_all_formats, kOnAll | kHeavy, Feature::kDenseBf16, Feature::kDenseF16,
        Feature::kDenseF32, Feature::kFp8Weights, Feature::kFp4Weights, Feature::kActQuantFp8) {
  const WKind kinds[] = {WKind::kBf16,   WKind::kF16,     WKind::kF32, WKind::kFp8E8m0,
                         WKind::kFp8F32, WKind::kFp8Bf16, WKind::kFp4};
  struct Shape {
    int64_t n, k;
  };
  // 4096 x 256: wide enough for the grouped tensor-core stage at 5..32 rows (cuda_gemm.cc).
  const Shape shapes[] = {{37, 256}, {130, 520}, {64, 4096}, {5, 96}, {4096, 256}};
  for (WKind kind : kinds) {
    for (const Shape& s : shapes) {
      auto w = test_weight(ctx, kind, s.n, s.k);
      for (int64_t M : {1, 2, 5, 16, 17, 40, 70}) {
        for (bool aq : {false, true}) {
          if (aq && !w->ref.quantized()) continue;
          const Buf x = random_buf(ctx.rng, M, s.k);
          Buf want(M, s.n);
          ctx.ref->linear(x.cmat(), w->ref, want.mat(), {.act_quant = aq});
          for (int64_t pad : {0, 3}) {
            const DBuf dx = dev_copy(ctx, x, pad);
            DBuf dy = dev_poisoned(ctx, M, s.n, pad);
            ctx.ops->linear(dx.cmat(), w->dev.ref, dy.mat(), {.act_quant = aq});
            const std::vector<float> got = dy.download();
            close(
                ctx,
                tag(aq ? "linear+aq" : "linear", kind, M, s.n, s.k) + " pad=" + std::to_string(pad),
                got, want.v,
                fp8_tensor_core_shape(kind, aq, M, s.k, pad) ? kFp8TensorCoreTol : 2e-5);
            // LinearOpts::round_bf16: the same product rounded to BF16 (in the kernels' stores
            // on CUDA), bit for bit.
            if (pad != 0) continue;
            DBuf dr = dev_poisoned(ctx, M, s.n, pad);
            ctx.ops->linear(dx.cmat(), w->dev.ref, dr.mat(), {.act_quant = aq, .round_bf16 = true});
            std::vector<float> rounded = got;
            for (float& v : rounded) v = bf16_to_float(float_to_bf16(v));
            close(ctx, tag(aq ? "linear+aq rounded" : "linear rounded", kind, M, s.n, s.k),
                  dr.download(), rounded, 0.0);
          }
        }
      }
    }
  }
  // Row slice of an FP8 weight (grouped wo_a), on both sides.
  auto w = test_weight(ctx, WKind::kFp8E8m0, 512, 384);
  const WeightRef hs = w->ref.slice_rows(128, 256), ds = w->dev.ref.slice_rows(128, 256);
  for (int64_t M : {1, 40}) {
    const Buf x = random_buf(ctx.rng, M, 384);
    Buf want(M, 256);
    ctx.ref->linear(x.cmat(), hs, want.mat(), {.act_quant = true});
    const DBuf dx = dev_copy(ctx, x);
    DBuf dy = dev_poisoned(ctx, M, 256);
    ctx.ops->linear(dx.cmat(), ds, dy.mat(), {.act_quant = true});
    close(ctx, "linear fp8 slice_rows M=" + std::to_string(M), dy.download(), want.v, 2e-5);
  }
  // V4-Flash wq_a shape at decode sizes.
  auto wq = test_weight(ctx, WKind::kFp8E8m0, 1024, 4096);
  for (int64_t M : {1, 16, 128}) {
    const Buf x = random_buf(ctx.rng, M, 4096);
    Buf want(M, 1024);
    ctx.ref->linear(x.cmat(), wq->ref, want.mat(), {.act_quant = true});
    const DBuf dx = dev_copy(ctx, x);
    DBuf dy = dev_poisoned(ctx, M, 1024);
    ctx.ops->linear(dx.cmat(), wq->dev.ref, dy.mat(), {.act_quant = true});
    close(ctx, "linear fp8 1024x4096 M=" + std::to_string(M), dy.download(), want.v,
          fp8_tensor_core_shape(WKind::kFp8E8m0, true, M, 4096, 0) ? kFp8TensorCoreTol : 2e-5);
  }
}

// LinearOpts::x_bf16 (the caller's input is BF16 numbers): the same product as without the
// hint, for every weight format and the row counts where the paths switch, against the oracle
// and bit for bit against the unhinted call (a zero's sign aside: compare sees no difference).
OP_CASE(linear_x_bf16, kOnAll, Feature::kDenseBf16, Feature::kFp8Weights, Feature::kFp4Weights) {
  for (WKind kind : {WKind::kBf16, WKind::kFp8E8m0, WKind::kFp4}) {
    auto w = test_weight(ctx, kind, 1024, 512);
    for (int64_t M : {1, 5, 17, 40, 70}) {
      Buf x = random_buf(ctx.rng, M, 512);
      for (float& v : x.v) v = bf16_to_float(float_to_bf16(v));
      Buf want(M, 1024);
      ctx.ref->linear(x.cmat(), w->ref, want.mat(), {});
      const DBuf dx = dev_copy(ctx, x);
      DBuf plain = dev_poisoned(ctx, M, 1024), hinted = dev_poisoned(ctx, M, 1024);
      ctx.ops->linear(dx.cmat(), w->dev.ref, plain.mat(), {});
      ctx.ops->linear(dx.cmat(), w->dev.ref, hinted.mat(), {.x_bf16 = true});
      const std::string t = tag("linear x_bf16", kind, M, 1024, 512);
      const std::vector<float> got = hinted.download();
      close(ctx, t, got, want.v, 2e-5);
      close(ctx, t + " == unhinted", got, plain.download(), 0.0);
    }
  }
}

// Ops::linear_grouped (V4's wo_a: group g's outputs read only x's g-th column block): against
// the oracle's linear per group and the backend's own linear per group; at 1-4 rows (CUDA's
// one-launch GEMV) a row alone equals the same row in the batch of 4, bit for bit; the rounded
// form equals the unrounded one rounded. BF16-valued x (the model's x_bf16 input) takes CUDA's
// strided-batched tensor-core path from 17 rows; a padded x (ld not a multiple of 4) and
// act-quantized groups take the per-group loop.
OP_CASE(linear_grouped, kOnAll | kHeavy, Feature::kDenseBf16, Feature::kFp8Weights,
        Feature::kFp4Weights, Feature::kActQuantFp8) {
  struct Shape {
    int64_t groups, n, k;
  };
  // CUDA's GEMV picks its form for the whole weight: 8 x 256 x 1024 one row per warp; 4 x 2048 x
  // 128 (FP8: four rows per warp at one row, two at 2-4) and 4 x 2050 x 128 (FP4, per-row
  // scales: two rows per warp, each group's last warp past the group's end; an FP8 group must
  // start on a 128-row scale block, WeightRef::slice_rows); 3 x 40 x 96: groups inside one FP8
  // scale block.
  for (WKind kind : {WKind::kFp8E8m0, WKind::kFp4, WKind::kBf16}) {
    const int64_t wide = kind == WKind::kFp8E8m0 ? 2048 : 2050;
    for (const Shape& s : {Shape{8, 256, 1024}, Shape{4, wide, 128}, Shape{3, 40, 96}}) {
      if (kind == WKind::kFp4 && s.k % 32 != 0) continue;
      auto w = test_weight(ctx, kind, s.groups * s.n, s.k);
      const int64_t cols = s.groups * s.k, N = s.groups * s.n;
      Buf x_all = random_buf(ctx.rng, 33, cols);
      for (float& v : x_all.v) v = bf16_to_float(float_to_bf16(v));
      std::vector<float> batch4[2];  // the 4-row results, without and with act quant
      for (int64_t M : {4, 1, 2, 5, 17, 33}) {
        Buf x(M, cols);
        std::copy_n(x_all.v.begin(), M * cols, x.v.begin());
        for (bool aq : {false, true}) {
          if (aq && !w->ref.quantized()) continue;
          const LinearOpts opts{.act_quant = aq, .x_bf16 = !aq};
          Buf want(M, N);
          for (int64_t g = 0; g < s.groups; ++g) {
            ctx.ref->linear(x.cmat().cols_slice(g * s.k, s.k), w->ref.slice_rows(g * s.n, s.n),
                            want.mat().cols_slice(g * s.n, s.n), opts);
          }
          for (int64_t pad : {0, 3}) {
            const DBuf dx = dev_copy(ctx, x, pad);
            DBuf dy = dev_poisoned(ctx, M, N, pad), each = dev_poisoned(ctx, M, N, pad);
            ctx.ops->linear_grouped(dx.cmat(), w->dev.ref, s.groups, dy.mat(), opts);
            for (int64_t g = 0; g < s.groups; ++g) {
              ctx.ops->linear(dx.cmat().cols_slice(g * s.k, s.k),
                              w->dev.ref.slice_rows(g * s.n, s.n),
                              each.mat().cols_slice(g * s.n, s.n), opts);
            }
            const std::string t = std::string(aq ? "linear_grouped+aq " : "linear_grouped ") +
                                  wkind_name(kind) + " G=" + std::to_string(s.groups) +
                                  " M=" + std::to_string(M) + " N=" + std::to_string(s.n) +
                                  " K=" + std::to_string(s.k) + " pad=" + std::to_string(pad);
            const std::vector<float> got = dy.download();
            close(ctx, t, got, want.v, 2e-5);
            close(ctx, t + " vs linear per group", got, each.download(), 2e-5);
            if (pad != 0) continue;
            std::vector<float>& b4 = batch4[aq ? 1 : 0];
            if (M == 4) b4 = got;
            if (M < 4) {
              close(ctx, t + " == rows of the batch of 4", got,
                    std::vector<float>(b4.begin(), b4.begin() + M * N), 0.0);
            }
            LinearOpts ro = opts;
            ro.round_bf16 = true;
            DBuf dr = dev_poisoned(ctx, M, N);
            ctx.ops->linear_grouped(dx.cmat(), w->dev.ref, s.groups, dr.mat(), ro);
            std::vector<float> rounded = got;
            for (float& v : rounded) v = bf16_to_float(float_to_bf16(v));
            close(ctx, t + " rounded", dr.download(), rounded, 0.0);
          }
        }
      }
    }
  }
}

// The decode GEMV's shapes at 1-4 rows for FP8 (128 x 128) and FP4 weights: CUDA picks rows
// per warp and warps per row by N and K (kernels/cuda/gemm/gemv_stream.cu), and these shapes
// take each form (four, two and one rows per warp; one row over 2, 4 and 8 warps; a last row
// group past N). Against the oracle, and, where the batch of four takes the same GEMV, a row
// computed alone equals the same row in the batch, bit for bit.
OP_CASE(linear_decode_forms, kOnAll | kHeavy, Feature::kFp8Weights, Feature::kFp4Weights,
        Feature::kActQuantFp8) {
  struct Shape {
    int64_t n, k;
  };
  for (WKind kind : {WKind::kFp8E8m0, WKind::kFp4}) {
    for (const Shape& s : {Shape{8192, 256}, Shape{8190, 256}, Shape{4096, 512},
                           Shape{1024, 1024}, Shape{512, 2048}, Shape{256, 4096}}) {
      auto w = test_weight(ctx, kind, s.n, s.k);
      const Buf x4 = random_buf(ctx.rng, 4, s.k);
      const DBuf dx4 = dev_copy(ctx, x4);
      DBuf y4 = dev_poisoned(ctx, 4, s.n);
      ctx.ops->linear(dx4.cmat(), w->dev.ref, y4.mat(), {.act_quant = true, .round_bf16 = false});
      const std::vector<float> batch = y4.download();
      for (int64_t M : {1, 2, 3, 4}) {
        Buf x(M, s.k);
        std::copy_n(x4.v.begin(), M * s.k, x.v.begin());
        Buf want(M, s.n);
        ctx.ref->linear(x.cmat(), w->ref, want.mat(), {.act_quant = true});
        const DBuf dx = dev_copy(ctx, x);
        DBuf dy = dev_poisoned(ctx, M, s.n);
        ctx.ops->linear(dx.cmat(), w->dev.ref, dy.mat(), {.act_quant = true});
        const std::vector<float> got = dy.download();
        const std::string t = tag("linear decode", kind, M, s.n, s.k);
        close(ctx, t, got, want.v, 2e-5);
        // CUDA runs 2-4 rows of weights from 4096 rows wide on the single-expert mma stage
        // (cuda_gemm.cc linear_mma_eligible), so there the batch of 4 is another kernel's sum.
        if (s.n < 4096) {
          close(ctx, t + " == rows of the batch of 4", got,
                std::vector<float>(batch.begin(), batch.begin() + M * s.n), 0.0);
        }
      }
    }
  }
}

// The FP8 block-scaled GEMM's shapes (fp8_tensor_core_shape): V4's wq_a / wo_b-like K, M from
// its threshold to prefill-sized, inputs whose 1 x 128 blocks and rows span 2^-4 .. 2^4 (so each
// activation block has its own scale, and a transposed or misplaced scale shows), against the
// oracle; the rounded form equals the unrounded one rounded, bit for bit.
OP_CASE(linear_fp8_block_scaled, kOnAll | kHeavy, Feature::kFp8Weights, Feature::kActQuantFp8) {
  struct Shape {
    int64_t n, k;
  };
  for (const Shape& s : {Shape{256, 1024}, Shape{48, 4096}, Shape{384, 512}}) {
    auto w = test_weight(ctx, WKind::kFp8E8m0, s.n, s.k);
    for (int64_t M : {16, 33, 64, 130, 300}) {
      Buf x = random_buf(ctx.rng, M, s.k);
      for (int64_t r = 0; r < M; ++r) {
        for (int64_t c = 0; c < s.k; ++c) {
          x.v[static_cast<size_t>(r * s.k + c)] *=
              std::ldexp(1.0f, static_cast<int>((r * 7 + (c / 128) * 3) % 9) - 4);
        }
      }
      Buf want(M, s.n);
      ctx.ref->linear(x.cmat(), w->ref, want.mat(), {.act_quant = true});
      const DBuf dx = dev_copy(ctx, x);
      DBuf dy = dev_poisoned(ctx, M, s.n);
      ctx.ops->linear(dx.cmat(), w->dev.ref, dy.mat(), {.act_quant = true});
      const std::vector<float> got = dy.download();
      const std::string t = tag("linear fp8 block-scaled", WKind::kFp8E8m0, M, s.n, s.k);
      close(ctx, t, got, want.v, kFp8TensorCoreTol);
      DBuf dr = dev_poisoned(ctx, M, s.n);
      ctx.ops->linear(dx.cmat(), w->dev.ref, dr.mat(), {.act_quant = true, .round_bf16 = true});
      std::vector<float> rounded = got;
      for (float& v : rounded) v = bf16_to_float(float_to_bf16(v));
      close(ctx, t + " rounded", dr.download(), rounded, 0.0);
    }
  }
}

OP_CASE(rms_norm, kOnAll, Feature::kDenseBf16, Feature::kDenseF32) {
  auto wb = test_weight(ctx, WKind::kBf16, 1, 512, 1.0f);
  auto wg = test_weight(ctx, WKind::kF32, 64, 1, 1.0f);
  for (int64_t M : {1, 7, 300}) {
    const Buf x = random_buf(ctx.rng, M, 512, -3.0f, 3.0f);
    struct V {
      const TestWeight* w;
      int64_t group;
    };
    for (V v : {V{nullptr, 0}, V{wb.get(), 0}, V{wg.get(), 64}, V{nullptr, 128}}) {
      Buf want(M, 512);
      ctx.ref->rms_norm(x.cmat(), v.w ? &v.w->ref : nullptr, 1e-6f, v.group, want.mat());
      const DBuf dx = dev_copy(ctx, x, 5);
      DBuf dy = dev_poisoned(ctx, M, 512, 1);
      ctx.ops->rms_norm(dx.cmat(), v.w ? &v.w->dev.ref : nullptr, 1e-6f, v.group, dy.mat());
      const std::string t = "rms_norm M=" + std::to_string(M) +
                            " group=" + std::to_string(v.group) + (v.w ? " weighted" : "");
      close(ctx, t, dy.download(), want.v, 1e-5);
      DBuf inplace = dev_copy(ctx, x);  // y aliases x
      ctx.ops->rms_norm(inplace.cmat(), v.w ? &v.w->dev.ref : nullptr, 1e-6f, v.group,
                        inplace.mat());
      close(ctx, t + " in place", inplace.download(), want.v, 1e-5);
      // rms_norm_rounded: the same values rounded to BF16 (in the store on CUDA), bit for bit.
      std::vector<float> rounded = dy.download();
      for (float& r : rounded) r = bf16_to_float(float_to_bf16(r));
      DBuf dr = dev_poisoned(ctx, M, 512, 1);
      ctx.ops->rms_norm_rounded(dx.cmat(), v.w ? &v.w->dev.ref : nullptr, 1e-6f, v.group, dr.mat());
      close(ctx, t + " rounded", dr.download(), rounded, 0.0);
    }
  }
}

OP_CASE(glue_ops, kOnAll, Feature::kDenseBf16, Feature::kDenseF16, Feature::kDenseF32) {
  const Buf a = random_buf(ctx.rng, 33, 70, -100.0f, 100.0f), b = random_buf(ctx.rng, 33, 70);
  const Buf b1 = random_buf(ctx.rng, 1, 70);
  {  // round_bf16 (exact)
    Buf want = a;
    ctx.ref->round_bf16(want.mat());
    DBuf d = dev_copy(ctx, a, 2);
    ctx.ops->round_bf16(d.mat());
    close(ctx, "round_bf16", d.download(), want.v, 0.0);
  }
  for (const Buf* bb : {&b, &b1}) {  // add, with and without broadcast
    Buf want(33, 70);
    ctx.ref->add(a.cmat(), bb->cmat(), want.mat());
    const DBuf da = dev_copy(ctx, a), db = dev_copy(ctx, *bb, 1);
    DBuf dout = dev_poisoned(ctx, 33, 70, 4);
    ctx.ops->add(da.cmat(), db.cmat(), dout.mat());
    close(ctx, bb->rows == 1 ? "add broadcast" : "add", dout.download(), want.v, 0.0);
  }
  {  // scale
    Buf want = a;
    ctx.ref->scale(want.mat(), 0.37f);
    DBuf d = dev_copy(ctx, a, 3);
    ctx.ops->scale(d.mat(), 0.37f);
    close(ctx, "scale", d.download(), want.v, 0.0);
  }
  {  // copy_rows: host rows, device rows, identity
    const std::vector<int32_t> rows = {5, 0, 32, 5, 17};
    Buf want(5, 70);
    ctx.ref->copy_rows(a.cmat(), rows.data(), want.mat());
    const DBuf da = dev_copy(ctx, a, 1);
    DBuf d1 = dev_poisoned(ctx, 5, 70), d2 = dev_poisoned(ctx, 5, 70, 2);
    ctx.ops->copy_rows(da.cmat(), rows.data(), d1.mat());
    const BackendMem drows = dev_array(ctx, rows);
    ctx.ops->copy_rows(da.cmat(), drows.as<int32_t>(), d2.mat());
    close(ctx, "copy_rows host idx", d1.download(), want.v, 0.0);
    close(ctx, "copy_rows device idx", d2.download(), want.v, 0.0);
    Buf want_id(33, 70);
    ctx.ref->copy_rows(a.cmat(), nullptr, want_id.mat());
    DBuf d3 = dev_poisoned(ctx, 33, 70, 1);
    ctx.ops->copy_rows(da.cmat(), nullptr, d3.mat());
    close(ctx, "copy_rows identity", d3.download(), want_id.v, 0.0);
  }
  {  // scatter_rows: rows of a into scattered rows of two destination matrices, as the ring
     // appends of a step do (the host default is the oracle)
    const std::vector<int64_t> from = {3, 0, 32, 17, 8}, to = {6, 1, 0, 4, 2};
    const DBuf da = dev_copy(ctx, a, 1);
    DBuf d1 = dev_poisoned(ctx, 7, 70, 3), d2 = dev_poisoned(ctx, 7, 70);
    Buf w1(7, 70), w2(7, 70);
    std::vector<const float*> hs, ds;
    std::vector<float*> hd, dd;
    for (size_t i = 0; i < from.size(); ++i) {
      const bool second = i % 2 == 1;
      hs.push_back(a.cmat().row(from[i]));
      ds.push_back(da.cmat().row(from[i]));
      hd.push_back((second ? w2 : w1).mat().row(to[i]));
      dd.push_back((second ? d2 : d1).mat().row(to[i]));
    }
    const std::vector<float> p1 = d1.download(), p2 = d2.download();  // poisoned rows stay
    w1.v = p1;
    w2.v = p2;
    ctx.ref->scatter_rows(hs, hd, 70);
    ctx.ops->scatter_rows(ds, dd, 70);
    close(ctx, "scatter_rows first destination", d1.download(), w1.v, 0.0);
    close(ctx, "scatter_rows second destination", d2.download(), w2.v, 0.0);
  }
  for (WKind k : {WKind::kBf16, WKind::kF32, WKind::kF16}) {  // embed
    auto table = test_weight(ctx, k, 100, 48, 1.0f);
    const std::vector<int32_t> ids = {3, 99, 0, 3, 42, 7};
    Buf want(6, 48);
    ctx.ref->embed(ids.data(), 6, table->ref, want.mat());
    DBuf d = dev_poisoned(ctx, 6, 48);
    ctx.ops->embed(ids.data(), 6, table->dev.ref, d.mat());
    close(ctx, std::string("embed ") + wkind_name(k), d.download(), want.v, 0.0);
  }
  // embed_streams (the mHC streams' input, and the MTP block's rounded embedding at 1 stream):
  // each stream block equals embed's rows, rounded to BF16 when asked, bit for bit; host and
  // device ids.
  for (WKind k : {WKind::kBf16, WKind::kF32}) {
    auto table = test_weight(ctx, k, 100, 48, 3.0f);
    const std::vector<int32_t> ids = {3, 99, 0, 3, 42, 7};
    Buf e(6, 48);
    ctx.ref->embed(ids.data(), 6, table->ref, e.mat());
    const BackendMem dids = dev_array(ctx, ids);
    for (const int64_t streams : {1, 4})
      for (const bool round : {false, true}) {
        Buf want(6, streams * 48);
        for (int64_t r = 0; r < 6; ++r)
          for (int64_t s = 0; s < streams; ++s)
            for (int64_t c = 0; c < 48; ++c) {
              const float v = e.v[static_cast<size_t>(r * 48 + c)];
              want.v[static_cast<size_t>(r * streams * 48 + s * 48 + c)] =
                  round ? bf16_to_float(float_to_bf16(v)) : v;
            }
        const std::string t = std::string("embed_streams ") + wkind_name(k) +
                              " streams=" + std::to_string(streams) + (round ? " rounded" : "");
        DBuf d1 = dev_poisoned(ctx, 6, streams * 48), d2 = dev_poisoned(ctx, 6, streams * 48, 1);
        ctx.ops->embed_streams(ids.data(), 6, table->dev.ref, streams, round, d1.mat());
        ctx.ops->embed_streams(dids.as<int32_t>(), 6, table->dev.ref, streams, round, d2.mat());
        close(ctx, t + " host ids", d1.download(), want.v, 0.0);
        close(ctx, t + " device ids", d2.download(), want.v, 0.0);
      }
  }
  // add_streams (the MTP block's input): X_s + b in every stream, rounded when asked, bit for
  // bit; X a column slice of a wider matrix (a strided row).
  for (const bool round : {false, true}) {
    const int64_t M = 5, D = 70, S = 4;
    const Buf x = random_buf(ctx.rng, M, S * D + 3, -50.0f, 50.0f), bb = random_buf(ctx.rng, M, D);
    Buf want = x;
    for (int64_t r = 0; r < M; ++r)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t c = 0; c < D; ++c) {
          float& v = want.v[static_cast<size_t>(r * (S * D + 3) + s * D + c)];
          v += bb.v[static_cast<size_t>(r * D + c)];
          if (round) v = bf16_to_float(float_to_bf16(v));
        }
    DBuf dx = dev_copy(ctx, x, 2);
    const DBuf db = dev_copy(ctx, bb, 1);
    ctx.ops->add_streams(db.cmat(), S, round, dx.mat().cols_slice(0, S * D));
    close(ctx, std::string("add_streams") + (round ? " rounded" : ""), dx.download(), want.v, 0.0);
  }
  {  // swiglu, with and without clamp, and aliasing out = a
    const Buf u = random_buf(ctx.rng, 9, 130, -14.0f, 14.0f),
              v = random_buf(ctx.rng, 9, 130, -14.0f, 14.0f);
    for (float limit : {10.0f, 0.0f}) {
      Buf want(9, 130);
      ctx.ref->swiglu(u.cmat(), v.cmat(), limit, want.mat());
      DBuf du = dev_copy(ctx, u), dv = dev_copy(ctx, v, 2);
      ctx.ops->swiglu(du.cmat(), dv.cmat(), limit, du.mat());
      close(ctx, "swiglu limit=" + std::to_string(limit), du.download(), want.v, 2e-6);
    }
  }
}

OP_CASE(rope, kOnAll) {
  YarnParams yarn{16.0f, 65536, 32.0f, 1.0f};
  const std::vector<float> freqs = make_rope_freqs(10000.0f, 64, &yarn);
  const int64_t H = 3, hd = 96, M = 11;
  std::vector<int32_t> pos(M);
  for (int64_t i = 0; i < M; ++i)
    pos[static_cast<size_t>(i)] = static_cast<int32_t>(i * 9973 % 120000);
  const Buf x = random_buf(ctx.rng, M, H * hd);
  for (bool inv : {false, true}) {
    Buf want = x;
    ctx.ref->rope(want.mat(), H, hd, pos.data(), freqs, inv);
    DBuf d = dev_copy(ctx, x, 1);
    ctx.ops->rope(d.mat(), H, hd, pos.data(), freqs, inv);
    const std::vector<float> got = d.download();
    close(ctx, inv ? "rope inverse" : "rope", got, want.v, 2e-6);
    // rope_rounded: the same rotation, then every channel rounded to BF16, bit for bit.
    DBuf dr = dev_copy(ctx, x, 1);
    ctx.ops->rope_rounded(dr.mat(), H, hd, pos.data(), freqs, inv);
    std::vector<float> rounded = got;
    for (float& v : rounded) v = bf16_to_float(float_to_bf16(v));
    close(ctx, inv ? "rope_rounded inverse" : "rope_rounded", dr.download(), rounded, 0.0);
  }
}

// kv_rows_finish: a K=V row's norm, RoPE and FP8 round trip in one op; on every backend the bits
// of the three ops it stands for, run one after the other on that backend.
OP_CASE(kv_rows_finish, kOnAll, Feature::kDenseBf16, Feature::kDenseF32, Feature::kFakeQuantFp8) {
  const std::vector<float> freqs = make_rope_freqs(10000.0f, 64, nullptr);
  const auto nf = static_cast<int64_t>(freqs.size());
  for (const int64_t d : {512, 96}) {
    auto w = test_weight(ctx, d == 512 ? WKind::kBf16 : WKind::kF32, 1, d, 1.0f);
    for (const int64_t M : {1, 7, 300}) {
      std::vector<int32_t> pos(static_cast<size_t>(M));
      for (int64_t i = 0; i < M; ++i)
        pos[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7919 % 70000);
      const Buf x = random_buf(ctx.rng, M, d, -3.0f, 3.0f);
      for (const bool rounded : {false, true}) {
        for (const auto& [qcols, qblock] :
             {std::pair<int64_t, int64_t>{0, 64}, {d - 2 * nf, 64}, {d, 32}}) {
          DBuf want = dev_copy(ctx, x, 1);
          if (rounded) {
            ctx.ops->rms_norm_rounded(want.cmat(), &w->dev.ref, 1e-6f, 0, want.mat());
            ctx.ops->rope_rounded(want.mat(), 1, d, pos.data(), freqs, false);
          } else {
            ctx.ops->rms_norm(want.cmat(), &w->dev.ref, 1e-6f, 0, want.mat());
            ctx.ops->rope(want.mat(), 1, d, pos.data(), freqs, false);
          }
          if (qcols > 0) ctx.ops->fake_quant_fp8(want.mat(), qcols, qblock);
          DBuf got = dev_copy(ctx, x, 1);
          ctx.ops->kv_rows_finish(got.mat(), w->dev.ref, 1e-6f, pos.data(), freqs, rounded, qcols,
                                  qblock);
          close(ctx,
                "kv_rows_finish d=" + std::to_string(d) + " M=" + std::to_string(M) +
                    (rounded ? " rounded" : "") + " quant " + std::to_string(qcols) + "/" +
                    std::to_string(qblock),
                got.download(), want.download(), 0.0);
        }
      }
    }
  }
}

// q_heads_finish: the queries' per-head norm and RoPE in one op; on every backend the bits of
// the two ops it stands for (official: rms_norm_bf16 + rope_rounded; else rms_norm + rope).
OP_CASE(q_heads_finish, kOnAll) {
  const std::vector<float> freqs = make_rope_freqs(10000.0f, 64, nullptr);
  for (const auto& [H, hd] : {std::pair<int64_t, int64_t>{4, 512}, {3, 96}}) {
    for (const int64_t M : {1, 7, 130}) {
      std::vector<int32_t> pos(static_cast<size_t>(M));
      for (int64_t i = 0; i < M; ++i)
        pos[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7919 % 70000);
      const Buf x = random_buf(ctx.rng, M, H * hd, -3.0f, 3.0f);
      for (const bool official : {false, true}) {
        DBuf want = dev_copy(ctx, x, 1);
        if (official) {
          ctx.ops->rms_norm_bf16(want.mat(), hd, 1e-6f);
          ctx.ops->rope_rounded(want.mat(), H, hd, pos.data(), freqs, false);
        } else {
          ctx.ops->rms_norm(want.cmat(), nullptr, 1e-6f, hd, want.mat());
          ctx.ops->rope(want.mat(), H, hd, pos.data(), freqs, false);
        }
        DBuf got = dev_copy(ctx, x, 1);
        ctx.ops->q_heads_finish(got.mat(), H, hd, 1e-6f, pos.data(), freqs, official);
        close(ctx,
              "q_heads_finish " + std::to_string(H) + "x" + std::to_string(hd) +
                  " M=" + std::to_string(M) + (official ? " official" : ""),
              got.download(), want.download(), 0.0);
      }
    }
  }
}

OP_CASE(quant_and_hadamard, kOnAll, Feature::kFakeQuantFp8, Feature::kFakeQuantFp4,
        Feature::kActQuantFp8, Feature::kHadamard128) {
  const Buf x = random_buf(ctx.rng, 13, 384, -5.0f, 5.0f);
  Buf xs = x;  // include tiny blocks (amax floor) and a large value
  for (int64_t c = 0; c < 128; ++c) xs.at(2, c) *= 1e-7f;
  xs.at(3, 7) = 3000.0f;
  struct Q {
    const char* name;
    int kind;  // 0 fp8(n, block), 1 act_quant, 2 fp4
    int64_t n, block;
  };
  for (Q q : {Q{"fake_quant_fp8", 0, 384, 128}, Q{"fake_quant_fp8 n=320", 0, 320, 64},
              Q{"act_quant_fp8", 1, 384, 128}, Q{"fake_quant_fp4", 2, 384, 32},
              Q{"fake_quant_fp4 block=48", 2, 384, 48}}) {
    Buf want = xs;
    DBuf d = dev_copy(ctx, xs, 3);
    if (q.kind == 0) {
      ctx.ref->fake_quant_fp8(want.mat(), q.n, q.block);
      ctx.ops->fake_quant_fp8(d.mat(), q.n, q.block);
    } else if (q.kind == 1) {
      ctx.ref->act_quant_fp8(want.mat(), q.block);
      ctx.ops->act_quant_fp8(d.mat(), q.block);
    } else {
      ctx.ref->fake_quant_fp4(want.mat(), q.block);
      ctx.ops->fake_quant_fp4(d.mat(), q.block);
    }
    close(ctx, q.name, d.download(), want.v, 0.0);
  }
  Buf want = x;
  ctx.ref->hadamard128(want.mat());
  DBuf d = dev_copy(ctx, x, 2);
  ctx.ops->hadamard128(d.mat());
  close(ctx, "hadamard128", d.download(), want.v, 2e-6);
}

// The two small model ops with host defaults in ops.cc: a backend must give the same bits (same
// butterflies and scale; same FP32 channel-order sum between BF16 roundings).
OP_CASE(hadamard_any_width_and_bf16_head_norm, kOnAll) {
  for (int64_t n : {2, 16, 32, 64, 256, 512}) {
    const Buf x = random_buf(ctx.rng, 5, 2 * n, -3.0f, 3.0f);
    Buf want = x;
    ctx.ref->hadamard(want.mat(), n);
    DBuf d = dev_copy(ctx, x, 1);
    ctx.ops->hadamard(d.mat(), n);
    close(ctx, ("hadamard n=" + std::to_string(n)).c_str(), d.download(), want.v, 0.0);
  }
  for (int64_t group : {32, 128, 512}) {
    const Buf x = random_buf(ctx.rng, 3, 4 * group, -4.0f, 4.0f);
    Buf want = x;
    ctx.ref->rms_norm_bf16(want.mat(), group, 1e-6f);
    DBuf d = dev_copy(ctx, x, 3);
    ctx.ops->rms_norm_bf16(d.mat(), group, 1e-6f);
    close(ctx, ("rms_norm_bf16 group=" + std::to_string(group)).c_str(), d.download(), want.v, 0.0);
  }
}

// n = 4 (V4's) takes the warp Sinkhorn, n = 3 the one-thread one (hc.cu); D = 100: the last of
// CUDA's 256-value chunks of the logits' dot products is short.
OP_CASE(hyper_connections, kOnAll, Feature::kHyperConnections) {
  for (int n : {4, 3})
    for (int64_t D : {100, 256, 4096}) {
      const Buf fn = random_buf(ctx.rng, (2 + n) * n, n * D, -0.05f, 0.05f);
      const Buf base = random_buf(ctx.rng, 1, (2 + n) * n),
                scale = random_buf(ctx.rng, 1, 3, 0.5f, 1.5f);
      const DBuf dfn = dev_copy(ctx, fn);
      const BackendMem dbase = dev_array(ctx, base.v), dscale = dev_array(ctx, scale.v);
      HcParams hp{n, fn.cmat(), base.v.data(), scale.v.data()};
      HcParams dp{n, dfn.cmat(), dbase.as<float>(), dscale.as<float>()};
      auto wnorm = test_weight(ctx, WKind::kBf16, 1, D, 1.0f);  // hc_pre_norm's norm weight
      HcParams dp_host_small = dp;  // base/scale as host arrays: staged by the op
      dp_host_small.base = base.v.data();
      dp_host_small.scale = scale.v.data();
      for (int64_t M : {1, 6}) {
        const Buf x = random_buf(ctx.rng, M, n * D, -2.0f, 2.0f);
        Buf y(M, D), post(M, n), comb(M, n * n);
        ctx.ref->hc_pre(x.cmat(), hp, {}, y.mat(), {}, post.mat(), comb.mat());
        const DBuf dx = dev_copy(ctx, x, 4);
        for (const HcParams* p : {&dp, &dp_host_small}) {
          DBuf dy = dev_poisoned(ctx, M, D), dpost = dev_poisoned(ctx, M, n),
               dcomb = dev_poisoned(ctx, M, n * n, 1);
          ctx.ops->hc_pre(dx.cmat(), *p, {}, dy.mat(), {}, dpost.mat(), dcomb.mat());
          const std::string t = "hc_pre n=" + std::to_string(n) + " D=" + std::to_string(D) +
                                " M=" + std::to_string(M) + (p == &dp ? "" : " host params");
          close(ctx, t + " y", dy.download(), y.v, 1e-5);
          close(ctx, t + " post", dpost.download(), post.v, 1e-5);
          close(ctx, t + " comb", dcomb.download(), comb.v, 1e-5);
          // hc_pre_rounded: y rounded to BF16 (in the store on CUDA), bit for bit.
          std::vector<float> yr = dy.download();
          for (float& r : yr) r = bf16_to_float(float_to_bf16(r));
          DBuf dyr = dev_poisoned(ctx, M, D);
          ctx.ops->hc_pre_rounded(dx.cmat(), *p, {}, dyr.mat(), {}, dpost.mat(), dcomb.mat());
          close(ctx, t + " y rounded", dyr.download(), yr, 0.0);
          // hc_pre_norm: hc_pre(_rounded), then rms_norm(_rounded) of y, the two ops' bits on
          // this backend (one launch on CUDA); with this site's pre out and, as V4.1 does, y
          // collapsed with another pre.
          const DBuf collapse = dev_copy(ctx, random_buf(ctx.rng, M, n, 0.1f, 1.0f));
          for (const bool rounded : {false, true}) {
            for (const bool v41 : {false, true}) {
              const CMat cp = v41 ? collapse.cmat() : CMat();
              DBuf wy = dev_poisoned(ctx, M, D), wu = dev_poisoned(ctx, M, D),
                   wpre = dev_poisoned(ctx, M, n), fy = dev_poisoned(ctx, M, D),
                   fu = dev_poisoned(ctx, M, D), fpre = dev_poisoned(ctx, M, n),
                   fpost = dev_poisoned(ctx, M, n), fcomb = dev_poisoned(ctx, M, n * n);
              if (rounded) {
                ctx.ops->hc_pre_rounded(dx.cmat(), *p, cp, wy.mat(), wpre.mat(), dpost.mat(),
                                        dcomb.mat());
                ctx.ops->rms_norm_rounded(wy.cmat(), &wnorm->dev.ref, 1e-6f, 0, wu.mat());
              } else {
                ctx.ops->hc_pre(dx.cmat(), *p, cp, wy.mat(), wpre.mat(), dpost.mat(), dcomb.mat());
                ctx.ops->rms_norm(wy.cmat(), &wnorm->dev.ref, 1e-6f, 0, wu.mat());
              }
              ctx.ops->hc_pre_norm(dx.cmat(), *p, cp, wnorm->dev.ref, 1e-6f, rounded, fy.mat(),
                                   fpre.mat(), fpost.mat(), fcomb.mat(), fu.mat());
              const std::string tn =
                  t + " hc_pre_norm" + (rounded ? " rounded" : "") + (v41 ? " collapse" : "");
              close(ctx, tn + " u", fu.download(), wu.download(), 0.0);
              close(ctx, tn + " y", fy.download(), wy.download(), 0.0);
              close(ctx, tn + " pre", fpre.download(), wpre.download(), 0.0);
              close(ctx, tn + " post", fpost.download(), dpost.download(), 0.0);
              close(ctx, tn + " comb", fcomb.download(), dcomb.download(), 0.0);
            }
          }
        }
        // hc_post, out aliasing streams.
        const Buf o = random_buf(ctx.rng, M, D);
        Buf want(M, n * D);
        ctx.ref->hc_post(x.cmat(), o.cmat(), post.cmat(), comb.cmat(), n, want.mat());
        DBuf ds = dev_copy(ctx, x);
        const DBuf dO = dev_copy(ctx, o), dpost = dev_copy(ctx, post), dcomb = dev_copy(ctx, comb);
        ctx.ops->hc_post(ds.cmat(), dO.cmat(), dpost.cmat(), dcomb.cmat(), n, ds.mat());
        std::vector<float> post_out = ds.download();
        close(ctx, "hc_post in place D=" + std::to_string(D) + " M=" + std::to_string(M), post_out,
              want.v, 1e-5);
        // hc_post_rounded: the same values rounded to BF16, bit for bit (in place too).
        for (float& r : post_out) r = bf16_to_float(float_to_bf16(r));
        DBuf dsr = dev_copy(ctx, x);
        ctx.ops->hc_post_rounded(dsr.cmat(), dO.cmat(), dpost.cmat(), dcomb.cmat(), n, dsr.mat());
        close(ctx, "hc_post_rounded in place D=" + std::to_string(D) + " M=" + std::to_string(M),
              dsr.download(), post_out, 0.0);
        // hc_head: the first n rows of fn, base, scale.
        HcParams hh{n, fn.cmat().rows_slice(0, n), base.v.data(), scale.v.data()};
        HcParams dh{n, dfn.cmat().rows_slice(0, n), dbase.as<float>(), dscale.as<float>()};
        Buf yh(M, D);
        ctx.ref->hc_head(x.cmat(), hh, yh.mat());
        DBuf dyh = dev_poisoned(ctx, M, D);
        ctx.ops->hc_head(dx.cmat(), dh, dyh.mat());
        close(ctx, "hc_head D=" + std::to_string(D) + " M=" + std::to_string(M), dyh.download(),
              yh.v, 1e-5);
        // hc_head_rounded: the same values rounded to BF16 (in the store on CUDA), bit for bit.
        std::vector<float> yhr = dyh.download();
        for (float& r : yhr) r = bf16_to_float(float_to_bf16(r));
        DBuf dyhr = dev_poisoned(ctx, M, D);
        ctx.ops->hc_head_rounded(dx.cmat(), dh, dyhr.mat());
        close(ctx, "hc_head_rounded D=" + std::to_string(D) + " M=" + std::to_string(M),
              dyhr.download(), yhr, 0.0);
      }
    }
}

OP_CASE(moe_routing, kOnAll, Feature::kDenseF32, Feature::kMoeRouting) {
  const int64_t E = 64, D = 256;
  auto gate = test_weight(ctx, WKind::kF32, E, D, 0.2f);
  const Buf bias = random_buf(ctx.rng, 1, E, -0.1f, 0.1f);
  const BackendMem dbias = dev_array(ctx, bias.v);
  for (int64_t M : {1, 9, 40}) {
    const Buf x = random_buf(ctx.rng, M, D);
    const DBuf dx = dev_copy(ctx, x, 1);
    for (bool with_bias : {false, true}) {
      const int k = 6;
      std::vector<int32_t> ids(static_cast<size_t>(M * k));
      Buf w(M, k);
      ctx.ref->moe_route_score(x.cmat(), gate->ref, with_bias ? bias.v.data() : nullptr, k, 1.5f,
                               {}, ids.data(), w.mat());
      std::vector<int32_t> got(ids.size(), -7);
      DBuf dw = dev_poisoned(ctx, M, k);
      ctx.ops->moe_route_score(dx.cmat(), gate->dev.ref, with_bias ? dbias.as<float>() : nullptr, k,
                               1.5f, {}, got.data(), dw.mat());
      const std::string t = "moe_route_score M=" + std::to_string(M) + (with_bias ? " bias" : "");
      equal_ints(ctx, t + " ids", got, ids);
      close(ctx, t + " weights", dw.download(), w.v, 1e-5);
      // Device ids output.
      BackendMem did = dev_array(ctx, std::vector<int32_t>(ids.size(), -7));
      ctx.ops->moe_route_score(dx.cmat(), gate->dev.ref, with_bias ? bias.v.data() : nullptr, k,
                               1.5f, {}, did.as<int32_t>(), dw.mat());
      equal_ints(ctx, t + " device ids", download_ints(ctx, did, ids.size()), ids);
    }
    // Hash routing, I32 and I64 tables.
    const int64_t V = 50;
    const int k = 4;
    std::vector<int32_t> t32(static_cast<size_t>(V * k));
    std::vector<int64_t> t64(t32.size());
    for (size_t i = 0; i < t32.size(); ++i) t64[i] = t32[i] = static_cast<int32_t>(ctx.rng() % E);
    std::vector<int32_t> tok(static_cast<size_t>(M));
    for (auto& t : tok) t = static_cast<int32_t>(ctx.rng() % V);
    for (bool i64 : {false, true}) {
      const TensorView tv = i64 ? TensorView::make(DType::kI64, {V, k}, t64.data())
                                : TensorView::make(DType::kI32, {V, k}, t32.data());
      std::vector<int32_t> ids(static_cast<size_t>(M * k)), got(ids.size(), -7);
      Buf w(M, k);
      ctx.ref->moe_route_hash(x.cmat(), tok.data(), tv, gate->ref, 1.5f, ids.data(), w.mat());
      DBuf dw = dev_poisoned(ctx, M, k);
      ctx.ops->moe_route_hash(dx.cmat(), tok.data(), tv, gate->dev.ref, 1.5f, got.data(), dw.mat());
      const std::string t =
          std::string("moe_route_hash ") + (i64 ? "i64" : "i32") + " M=" + std::to_string(M);
      equal_ints(ctx, t + " ids", got, ids);
      close(ctx, t + " weights", dw.download(), w.v, 1e-5);
    }
  }
}

// CUDA: row `row` of a batch computed alone (one tile of pairs per expert) gives the same bits as
// inside the batch (more pairs per expert: other forms of the grouped stages), on the default
// backend and on its batch-invariant mode. The per-expert fallback switches GEMV kernels with the
// number of rows an expert gets, so it does not promise this (docs/cuda_backend.md).
static void moe_row_alone_matches_batch(CaseContext& ctx, const std::string& t, const Buf& x,
                                 const Buf& g, const std::vector<int32_t>& ids, const Buf& prev,
                                 int top_k, std::span<const ExpertWeights> dx, const MoeOpts& o,
                                 int64_t pad, int64_t row, double tol,
                                 const std::vector<float>& want) {
  const int64_t D = x.cols;
  const DBuf dxm = dev_copy(ctx, x, pad), dg = dev_copy(ctx, g);
  for (Ops* be : {ctx.ops, ctx.invariant_ops}) {
    if (be == nullptr) continue;
    const std::string mode = be == ctx.ops ? "" : " (batch-invariant mode)";
    // Uploads are queued on ctx.ops's stream: finish them before another backend reads.
    DBuf dall = dev_copy(ctx, prev, 1);
    ctx.ops->synchronize();
    be->moe_experts(dxm.cmat(), ids.data(), dg.cmat(), top_k, dx, o, dall.mat());
    const std::vector<float> all = dall.download();
    close(ctx, t + mode + " batch", all, want, tol);
    Buf x1(1, D), g1(1, top_k), prev1(1, D);
    for (int64_t c = 0; c < D; ++c) x1.at(0, c) = x.v[static_cast<size_t>(row * D + c)];
    for (int64_t c = 0; c < D; ++c) prev1.at(0, c) = prev.v[static_cast<size_t>(row * D + c)];
    for (int j = 0; j < top_k; ++j) g1.at(0, j) = g.v[static_cast<size_t>(row * top_k + j)];
    const std::vector<int32_t> ids1(ids.begin() + row * top_k, ids.begin() + (row + 1) * top_k);
    const DBuf dx1 = dev_copy(ctx, x1, pad), dg1 = dev_copy(ctx, g1);
    DBuf dout1 = dev_copy(ctx, prev1, 1);
    ctx.ops->synchronize();
    be->moe_experts(dx1.cmat(), ids1.data(), dg1.cmat(), top_k, dx, o, dout1.mat());
    const std::vector<float> one = dout1.download();
    const std::vector<float> in_batch(all.begin() + row * D, all.begin() + (row + 1) * D);
    close(ctx, t + mode + " row " + std::to_string(row) + " alone == in batch", one, in_batch,
          0.0);
  }
}

OP_CASE(moe_experts, kOnAll | kHeavy, Feature::kDenseBf16, Feature::kFp8Weights,
        Feature::kFp4Weights, Feature::kActQuantFp8, Feature::kMoeExperts) {
  const int64_t D = 256, I = 128;
  const int E = 8, top_k = 3;
  for (WKind kind : {WKind::kFp4, WKind::kFp8E8m0, WKind::kBf16}) {
    std::vector<std::unique_ptr<TestWeight>> own;
    std::vector<ExpertWeights> hx, dx;
    for (int e = 0; e < E; ++e) {
      own.push_back(test_weight(ctx, kind, I, D, 0.1f, 128, 128));
      own.push_back(test_weight(ctx, kind, I, D, 0.1f, 128, 128));
      own.push_back(test_weight(ctx, kind, D, I, 0.1f, 128, 128));
      const size_t b = own.size() - 3;
      hx.push_back({own[b]->ref, own[b + 1]->ref, own[b + 2]->ref});
      dx.push_back({own[b]->dev.ref, own[b + 1]->dev.ref, own[b + 2]->dev.ref});
    }
    // pad 2: x.ld % 4 != 0, the per-expert fallback; pad 4: the grouped kernels (the
    // tensor-core stages for act-quantized FP4/FP8). M = 40 puts more pairs on an expert than
    // one pass of the grouped kernels takes (8); M = 100 gives >= 32 pairs per expert and
    // M = 400 >= 128: per-expert GEMMs, on the tensor cores where exact (act quant), from 32
    // pairs for the SIMT stages' formats and from 128 for the tensor-core stages' ones.
    for (int64_t pad : {2, 4})
      for (int64_t M : {1, 5, 20, 40, 100, 400}) {
        const Buf x = random_buf(ctx.rng, M, D);
        const Buf g = random_buf(ctx.rng, M, top_k, 0.1f, 0.6f);
        std::vector<int32_t> ids;
        for (int64_t i = 0; i < M * top_k; ++i) {
          // Slot 0 skipped (-1); token 1 lists one expert twice (slots 3 and 4).
          ids.push_back(i == 0 ? -1 : (i == 4 ? ids[3] : static_cast<int32_t>(ctx.rng() % E)));
        }
        const DBuf dxm = dev_copy(ctx, x, pad), dg = dev_copy(ctx, g);
        const Buf prev = random_buf(ctx.rng, M, D);
        for (int variant = 0; variant < 4; ++variant) {
          MoeOpts o;
          o.act_quant = kind != WKind::kBf16 && variant != 1;
          o.bf16_rounding = variant >= 2;
          o.weight_before_w2 = variant != 3;
          o.accumulate = variant == 1;
          Buf want = prev;
          ctx.ref->moe_experts(x.cmat(), ids.data(), g.cmat(), top_k, hx, o, want.mat());
          DBuf dout = dev_copy(ctx, prev, 1);
          ctx.ops->moe_experts(dxm.cmat(), ids.data(), dg.cmat(), top_k, dx, o, dout.mat());
          const std::string t = std::string("moe_experts ") + wkind_name(kind) +
                                " pad=" + std::to_string(pad) + " M=" + std::to_string(M) +
                                " variant=" + std::to_string(variant);
          const std::vector<float> got = dout.download();
          close(ctx, t, got, want.v, o.bf16_rounding ? 2e-2 : 2e-5);
          // MoeOpts::round_out: the same output (accumulated or not) rounded to BF16 in the
          // op's store, bit for bit.
          {
            MoeOpts r = o;
            r.round_out = true;
            std::vector<float> rounded = got;
            for (float& v : rounded) v = bf16_to_float(float_to_bf16(v));
            DBuf dr = dev_copy(ctx, prev, 1);
            ctx.ops->moe_experts(dxm.cmat(), ids.data(), dg.cmat(), top_k, dx, r, dr.mat());
            close(ctx, t + " round_out", dr.download(), rounded, 0.0);
          }
          // CUDA (pad 4): row 7 alone == in the batch at M = 40 and M = 100 (experts hold 2 to
          // 5 tiles of 8 pairs).
          if (ctx.on == kOnCuda && (M == 40 || M == 100) && pad == 4) {
            moe_row_alone_matches_batch(ctx, t, x, g, ids, prev, top_k, dx, o, pad, 7,
                                        o.bf16_rounding ? 2e-2 : 2e-5, want.v);
          }
        }
      }
  }
}

// The grouped stages at more K passes than one chain per warp (D 1024: 8 passes of 128 in
// gate-up, I 512: 4 in down) and more pairs per expert than one chunk of the wide form (~75 of
// 64): CUDA takes the wide form for this batch (>= 32 pairs per expert, FP4) and one tile for a
// row alone, which must agree bit for bit; both against the oracle.
OP_CASE(moe_experts_many_pairs, kOnAll | kHeavy, Feature::kFp4Weights, Feature::kActQuantFp8,
        Feature::kMoeExperts) {
  const int64_t D = 1024, I = 512, M = 200;
  const int E = 8, top_k = 3;
  // mixed: every 16-row tile's row 3 gets E8M0 scales of 2^3 (e 130), the others keep ~2^-4, so
  // the warps holding row 3 take the two-multiplication decode for all their rows (two_form).
  for (bool mixed : {false, true}) {
    std::vector<std::unique_ptr<TestWeight>> own;
    std::vector<ExpertWeights> hx, dx;
    for (int e = 0; e < 3 * E; ++e) {
      const bool down = e % 3 == 2;
      own.push_back(test_weight(ctx, WKind::kFp4, down ? D : I, down ? I : D, 0.1f, 128, 128));
      TestWeight& w = *own.back();
      if (mixed) {
        const int64_t sk = w.ref.scale.shape[1];
        for (int64_t r = 3; r < w.ref.scale.shape[0]; r += 16) {
          std::fill_n(w.scale_bytes.begin() + r * sk, sk, uint8_t{130});
        }
        ctx.ops->upload(w.dev.scale.data(), w.scale_bytes.data(), w.scale_bytes.size());
      }
      if (down) {
        const size_t b = own.size() - 3;
        hx.push_back({own[b]->ref, own[b + 1]->ref, own[b + 2]->ref});
        dx.push_back({own[b]->dev.ref, own[b + 1]->dev.ref, own[b + 2]->dev.ref});
      }
    }
    const Buf x = random_buf(ctx.rng, M, D);
    const Buf g = random_buf(ctx.rng, M, top_k, 0.1f, 0.6f);
    std::vector<int32_t> ids;
    for (int64_t m = 0; m < M; ++m) {
      const int32_t base = static_cast<int32_t>(ctx.rng() % E);  // distinct experts per token
      for (int j = 0; j < top_k; ++j) ids.push_back((base + j) % E);
    }
    const Buf prev = random_buf(ctx.rng, M, D);
    for (bool bf16 : {false, true}) {
      MoeOpts o;
      o.act_quant = true;
      o.bf16_rounding = bf16;
      Buf want = prev;
      ctx.ref->moe_experts(x.cmat(), ids.data(), g.cmat(), top_k, hx, o, want.mat());
      const DBuf dxm = dev_copy(ctx, x, 4), dg = dev_copy(ctx, g);
      DBuf dout = dev_copy(ctx, prev, 1);
      ctx.ops->moe_experts(dxm.cmat(), ids.data(), dg.cmat(), top_k, dx, o, dout.mat());
      const std::string t = std::string("moe_experts many pairs") + (mixed ? " mixed scales" : "") +
                            " bf16_rounding=" + (bf16 ? "1" : "0");
      const double tol = bf16 ? 2e-2 : 2e-5;
      close(ctx, t, dout.download(), want.v, tol);
      if (ctx.on == kOnCuda) {
        for (int64_t row : {7, 150}) {
          moe_row_alone_matches_batch(ctx, t, x, g, ids, prev, top_k, dx, o, 4, row, tol, want.v);
        }
      }
    }
  }
}

// Ops::sample on the backend draws the host default's tokens (itself the host Sampler's: ops_test
// OpsSample), for every filter and both vocabulary sizes, rows resident on the device. The
// 129,280-id rows are drawn all at once and again 20 and 1 at a time: on CUDA the blocks per row
// follow the call's row count (sample.cu: 2, 4 and 8 blocks on an H100's 132 SMs; 1 for the
// 1,000-id rows), and the token must not depend on them. 140,000 ids (more than 2,048 mass
// blocks): the running totals stay in global memory (sample.cu's gather_sums).
OP_CASE(sample, kOnAll) {
  for (int64_t vocab : {1000, 129280, 140000}) {
    const int64_t rows = vocab == 1000 ? 47 : vocab == 129280 ? 40 : 11;
    const std::vector<float> logits = testing::sample_rows(ctx.rng, rows, vocab);
    const std::vector<testing::SampleCase> cases = testing::sample_cases(rows);
    const std::vector<SampleSpec> specs = testing::sample_specs(cases);
    std::vector<int32_t> want(static_cast<size_t>(rows));
    ctx.ref->sample(CMat{logits.data(), rows, vocab}, specs, want.data());
    const BackendMem dl = dev_array(ctx, logits);
    const CMat all{dl.as<float>(), rows, vocab};
    for (int64_t chunk : {rows, int64_t{20}, int64_t{1}}) {
      if (vocab != 129280 && chunk != rows) continue;
      std::vector<int32_t> got(static_cast<size_t>(rows), -7);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        ctx.ops->sample(all.rows_slice(r0, n),
                        std::span(specs).subspan(static_cast<size_t>(r0), static_cast<size_t>(n)),
                        got.data() + r0);
      }
      equal_ints(
          ctx, "sample vocab=" + std::to_string(vocab) + " rows per call " + std::to_string(chunk),
          got, want);
    }
  }
}

// Ops::argmax_rows (MTP drafting on the backend): the greedy tokens sample() draws (the oracle's
// default is the host argmax), ids that clamp the codes of the all -inf and the NaN rows to 0,
// and the probability of each maximum within float rounding of another summation order.
OP_CASE(argmax_rows, kOnAll) {
  for (int64_t vocab : {1000, 129280}) {
    const int64_t rows = vocab > 100000 ? 12 : 47;
    const std::vector<float> logits = testing::sample_rows(ctx.rng, rows, vocab);
    const auto R = static_cast<size_t>(rows);
    std::vector<int32_t> want_tok(R), want_ids(R), greedy(R);
    std::vector<float> want_p(R);
    const CMat host{logits.data(), rows, vocab};
    ctx.ref->argmax_rows(host, want_tok.data(), want_ids.data(), want_p.data());
    ctx.ref->sample(host, std::vector<SampleSpec>(R), greedy.data());
    const std::string v = " vocab=" + std::to_string(vocab);
    equal_ints(ctx, "argmax_rows tokens == greedy sample" + v, want_tok, greedy);
    const BackendMem dl = dev_array(ctx, logits);
    const BackendMem tok = dev_array(ctx, std::vector<int32_t>(R, -7));
    const BackendMem ids = dev_array(ctx, std::vector<int32_t>(R, -7));
    const BackendMem prob = dev_array(ctx, std::vector<float>(R, -1.0f));
    ctx.ops->argmax_rows(CMat{dl.as<float>(), rows, vocab}, static_cast<int32_t*>(tok.data()),
                         static_cast<int32_t*>(ids.data()), static_cast<float*>(prob.data()));
    equal_ints(ctx, "argmax_rows tokens" + v, download_ints(ctx, tok, R), want_tok);
    equal_ints(ctx, "argmax_rows ids" + v, download_ints(ctx, ids, R), want_ids);
    close(ctx, "argmax_rows probs" + v, download_array<float>(ctx, prob, R), want_p, 1e-5);
    check(ctx, "argmax_rows clamps the code rows" + v,
          want_tok[R - 1] == kSampleNonFinite && want_tok[R - 2] == kSampleNoToken &&
              want_ids[R - 1] == 0 && want_ids[R - 2] == 0);
  }
}

// The shared expert's call (MoeOpts::single_expert: one expert, top_k 1, every id 0): CUDA does
// not read the ids back, on the grouped stages (few rows; up to 64 on the layout table made at
// creation, without the layout launch, 65 with it) and on the per-expert GEMMs (>= 128 rows of an
// act-quantized FP4/FP8 expert); the reference reads them, so both must agree.
OP_CASE(moe_experts_single_expert, kOnAll, Feature::kFp8Weights, Feature::kFp4Weights,
        Feature::kActQuantFp8, Feature::kMoeExperts) {
  const int64_t D = 256, I = 128;
  for (WKind kind : {WKind::kFp4, WKind::kFp8E8m0}) {
    auto w1 = test_weight(ctx, kind, I, D, 0.1f, 128, 128);
    auto w3 = test_weight(ctx, kind, I, D, 0.1f, 128, 128);
    auto w2 = test_weight(ctx, kind, D, I, 0.1f, 128, 128);
    const std::vector<ExpertWeights> hx = {{w1->ref, w3->ref, w2->ref}};
    const std::vector<ExpertWeights> dx = {{w1->dev.ref, w3->dev.ref, w2->dev.ref}};
    for (int64_t M : {1, 7, 64, 65, 200}) {
      const Buf x = random_buf(ctx.rng, M, D), prev = random_buf(ctx.rng, M, D);
      const Buf g = random_buf(ctx.rng, M, 1, 1.0f, 1.0f);
      const std::vector<int32_t> ids(static_cast<size_t>(M), 0);
      MoeOpts o;
      o.act_quant = true;
      o.bf16_rounding = true;
      o.accumulate = true;
      o.single_expert = true;
      Buf want = prev;
      ctx.ref->moe_experts(x.cmat(), ids.data(), g.cmat(), 1, hx, o, want.mat());
      const DBuf dxm = dev_copy(ctx, x, 4), dg = dev_copy(ctx, g);
      DBuf dout = dev_copy(ctx, prev, 1);
      ctx.ops->moe_experts(dxm.cmat(), ids.data(), dg.cmat(), 1, dx, o, dout.mat());
      close(
          ctx,
          std::string("moe_experts single_expert ") + wkind_name(kind) + " M=" + std::to_string(M),
          dout.download(), want.v, 2e-2);
    }
  }
}

}  // namespace deepinfer::backend::testing
