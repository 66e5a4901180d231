// CudaOps::moe_experts: the grouped MoE composed from kernels, grouped by expert on the host.
//
// The token -> expert layout is computed on the host from the ids (copied back when they are
// device memory), the way the plan/run split will compute it before a step. Experts run in
// ascending id; each gathers its tokens, runs w1/w3 (GEMV for <= 16 tokens), SwiGLU, the gate
// weight, w2, and adds its rows into an FP32 accumulator. A token's contributions therefore
// arrive in ascending expert id, the reference's order, and the result does not depend on the
// batch. A token listing one expert twice gets a second pass, so one scatter never sees a row
// twice. The fused grouped kernel (one launch for all experts) is the planned replacement.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_internal.h"
#include "base/check.h"

namespace deepinfer::backend::cuda {

namespace kc = kernels::cuda;

void CudaOps::moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                          std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) {
  DI_CHECK(out.rows == x.rows && weights.cols == top_k);
  arena_.reset();
  const int64_t M = x.rows, D = out.cols;
  std::vector<int32_t> hid(static_cast<size_t>(M * top_k));
  if (!hid.empty()) {
    DI_CUDA_CHECK(
        cudaMemcpyAsync(hid.data(), ids, hid.size() * sizeof(int32_t), cudaMemcpyDefault, stream_));
    synchronize();
  }
  // Groups: (expert, occurrence) ascending; each holds (token, slot j) pairs in token order.
  struct Group {
    int32_t expert;
    int64_t begin, count;
  };
  std::vector<std::pair<int64_t, int64_t>> keyed;  // (expert * (top_k+1) + occurrence, index)
  for (int64_t m = 0; m < M; ++m) {
    for (int j = 0; j < top_k; ++j) {
      const int32_t e = hid[static_cast<size_t>(m * top_k + j)];
      if (e < 0) continue;
      DI_CHECK(static_cast<size_t>(e) < experts.size());
      int occ = 0;
      for (int i = 0; i < j; ++i) occ += hid[static_cast<size_t>(m * top_k + i)] == e ? 1 : 0;
      keyed.push_back({static_cast<int64_t>(e) * (top_k + 1) + occ, m * top_k + j});
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int32_t> tok(keyed.size()), slot(keyed.size());
  std::vector<Group> groups;
  int64_t max_rows = 0, max_i = 0;
  for (size_t i = 0; i < keyed.size(); ++i) {
    tok[i] = static_cast<int32_t>(keyed[i].second / top_k);
    slot[i] = static_cast<int32_t>(keyed[i].second % top_k);
    if (i == 0 || keyed[i].first != keyed[i - 1].first) {
      groups.push_back(
          {static_cast<int32_t>(keyed[i].first / (top_k + 1)), static_cast<int64_t>(i), 0});
    }
    groups.back().count++;
  }
  for (const Group& g : groups) {
    const ExpertWeights& ew = experts[static_cast<size_t>(g.expert)];
    DI_CHECK(ew.w1.k == x.cols && ew.w3.k == x.cols && ew.w1.n == ew.w3.n && ew.w2.n == D &&
             ew.w2.k == ew.w1.n);
    max_rows = std::max(max_rows, g.count);
    max_i = std::max(max_i, ew.w1.n);
  }

  Mat ysum(arena_.alloc_n<float>(M * D), M, D);
  DI_CUDA_CHECK(cudaMemsetAsync(ysum.data, 0, static_cast<size_t>(M * D) * sizeof(float), stream_));
  const int32_t* dtok = nullptr;
  const int32_t* dslot = nullptr;
  if (!tok.empty()) {
    int32_t* t = arena_.alloc_n<int32_t>(static_cast<int64_t>(tok.size()));
    int32_t* s = arena_.alloc_n<int32_t>(static_cast<int64_t>(slot.size()));
    DI_CUDA_CHECK(cudaMemcpyAsync(t, tok.data(), tok.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream_));
    DI_CUDA_CHECK(cudaMemcpyAsync(s, slot.data(), slot.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream_));
    dtok = t;
    dslot = s;
  }
  float* xg_buf = arena_.alloc_n<float>(max_rows * x.cols);
  float* xq_buf = arena_.alloc_n<float>(max_rows * x.cols);
  float* a_buf = arena_.alloc_n<float>(max_rows * max_i);
  float* b_buf = arena_.alloc_n<float>(max_rows * max_i);
  float* y_buf = arena_.alloc_n<float>(max_rows * D);

  for (const Group& g : groups) {
    const ExpertWeights& ew = experts[static_cast<size_t>(g.expert)];
    const int64_t n = g.count, I = ew.w1.n;
    const int32_t* gt = dtok + g.begin;
    const int32_t* gs = dslot + g.begin;
    Mat xg(xg_buf, n, x.cols), xq(xq_buf, n, x.cols);
    Mat a(a_buf, n, I), b(b_buf, n, I), y(y_buf, n, D);
    kc::launch_copy_rows(md(x), gt, md(xg), stream_);
    const bool q1 = opts.act_quant && ew.w1.quantized();
    const bool q3 = opts.act_quant && ew.w3.quantized();
    if (q1 || q3) {
      kc::launch_copy_rows(md(CMat(xg)), nullptr, md(xq), stream_);
      kc::launch_fake_quant_fp8(md(xq), xq.cols, opts.act_block, stream_);
    }
    kc::launch_linear(md(CMat(q1 ? xq : xg)), wd(ew.w1), md(a), stream_);
    kc::launch_linear(md(CMat(q3 ? xq : xg)), wd(ew.w3), md(b), stream_);
    if (opts.bf16_rounding) {
      kc::launch_round_bf16(md(a), stream_);
      kc::launch_round_bf16(md(b), stream_);
    }
    kc::launch_swiglu(md(a), md(b), opts.swiglu_limit, md(a), stream_);
    if (opts.weight_before_w2) {
      kc::launch_scale_rows(md(a), weights.data, weights.ld, gt, gs, stream_);
    }
    if (opts.bf16_rounding) kc::launch_round_bf16(md(a), stream_);
    if (opts.act_quant && ew.w2.quantized()) {
      kc::launch_fake_quant_fp8(md(a), a.cols, opts.act_block, stream_);
    }
    kc::launch_linear(md(CMat(a)), wd(ew.w2), md(y), stream_);
    if (opts.bf16_rounding) kc::launch_round_bf16(md(y), stream_);
    if (!opts.weight_before_w2) {
      kc::launch_scale_rows(md(y), weights.data, weights.ld, gt, gs, stream_);
      if (opts.bf16_rounding) kc::launch_round_bf16(md(y), stream_);
    }
    kc::launch_scatter_add_rows(md(CMat(y)), gt, md(ysum), stream_);
  }
  if (opts.accumulate) {
    kc::launch_add(md(CMat(out)), md(CMat(ysum)), md(out), stream_);
  } else {
    kc::launch_copy_rows(md(CMat(ysum)), nullptr, md(out), stream_);
  }
}

}  // namespace deepinfer::backend::cuda
