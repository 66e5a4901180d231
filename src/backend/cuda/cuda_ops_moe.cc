// CudaOps::moe_experts: the grouped MoE.
//
// Main path (moe/grouped.cu): the token -> expert layout is built on the device and all experts
// run in four launches (layout, gate_up, down, combine); nothing waits for the host, so the
// step stays graph-capturable. A token's expert outputs are summed in ascending expert id, the
// reference's order, so the result is deterministic and batch-invariant.
//
// Fallback (moe_experts_by_expert, for shapes the grouped kernels do not take: K not a multiple
// of 8, unaligned weights, mixed act-quant): grouped on the host (ids copied back, one
// synchronisation), then per expert gather, w1/w3, SwiGLU, gate, w2 and scatter-add in
// ascending expert id.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_internal.h"
#include "base/check.h"

namespace deepinfer::backend::cuda {

namespace kc = kernels::cuda;

namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// What the grouped kernels need: K of every matrix a multiple of 32 (32-value loads), rows
// 16-byte aligned, block scales no finer than 32 columns, w1 and w3 alike, and few enough experts
// for the layout block's shared memory.
bool grouped_supported(CMat x, std::span<const ExpertWeights> experts, const MoeOpts& opts) {
  if (x.cols % 32 != 0 || x.ld % 4 != 0 || !aligned16(x.data)) return false;
  if (experts.size() > static_cast<size_t>(kc::kMoeLayoutMaxExperts)) return false;
  for (const ExpertWeights& e : experts) {
    for (const WeightRef* w : {&e.w1, &e.w3, &e.w2}) {
      if (w->k % 32 != 0 || !aligned16(w->weight.data)) return false;
      if (w->quantized() && w->block_k % 32 != 0) return false;
    }
    if (e.w1.format != e.w3.format || e.w1.n != e.w3.n || e.w1.k != x.cols || e.w2.k != e.w1.n)
      return false;
    if (opts.act_quant && e.w1.quantized() != experts[0].w1.quantized()) return false;
  }
  return true;
}

// The tensor-core stages (moe/grouped_mma.cu) are exact in BF16 only for act-quantized inputs
// times FP4 / FP8 weights with power-of-two (E8M0) scales (mma_stage_weight).
bool grouped_mma_supported(std::span<const ExpertWeights> experts, const MoeOpts& opts) {
  if (!opts.act_quant || experts.empty()) return false;
  for (const ExpertWeights& e : experts) {
    for (const WeightRef* w : {&e.w1, &e.w3, &e.w2}) {
      if (!mma_stage_weight(*w)) return false;
    }
    // The stages are compiled per format: one for w1 and w3 of every expert, one for w2.
    if (e.w1.format != experts[0].w1.format || e.w3.format != experts[0].w1.format ||
        e.w2.format != experts[0].w2.format) {
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {
// Field by field: the descriptors' padding bytes are indeterminate, so memcmp would see
// "changes" that are not there (and rebuild the table under kernels still reading it).
bool same_desc(const kc::WeightDesc& a, const kc::WeightDesc& b) {
  return a.fmt == b.fmt && a.w == b.w && a.scale == b.scale && a.sfmt == b.sfmt && a.n == b.n &&
         a.k == b.k && a.block_n == b.block_n && a.block_k == b.block_k && a.scale_ld == b.scale_ld;
}
}  // namespace

const kc::GroupedExpert* CudaOps::expert_table(std::span<const ExpertWeights> experts) {
  std::vector<kc::GroupedExpert> t(experts.size());
  for (size_t i = 0; i < experts.size(); ++i)
    t[i] = {wd(experts[i].w1), wd(experts[i].w3), wd(experts[i].w2)};
  return cached_table(experts.data(), std::move(t));
}

const kc::GroupedExpert* CudaOps::cached_table(const void* key, std::vector<kc::GroupedExpert> t) {
  // Keyed by the list's address, checked against the descriptors themselves: a later model may
  // reuse the address of a freed list.
  ExpertTable& slot = expert_tables_[key];
  bool same = slot.host.size() == t.size();
  for (size_t i = 0; same && i < t.size(); ++i) {
    same = same_desc(slot.host[i].w1, t[i].w1) && same_desc(slot.host[i].w3, t[i].w3) &&
           same_desc(slot.host[i].w2, t[i].w2);
  }
  if (!same && !refuse_in_capture("a new expert table (its upload)")) {
    const size_t bytes = t.size() * sizeof(kc::GroupedExpert);
    auto buf = DeviceBuffer::allocate(bytes);
    if (!buf.ok())
      throw OutOfMemory("GPU memory exhausted (expert table): " + buf.status().message());
    DI_CUDA_CHECK(cudaMemcpy(buf->data(), t.data(), bytes, cudaMemcpyHostToDevice));
    slot.device = std::move(*buf);  // frees the old table: cudaFree waits for its readers
    slot.host = std::move(t);
  }
  return slot.device.as<const kc::GroupedExpert>();
}

void CudaOps::moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                          std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) {
  DI_CHECK(out.rows == x.rows && weights.cols == top_k);
  // Many pairs per expert (the shared expert of a big step, long prefills) with
  // tensor-core-exact weights: per-expert cuBLAS GEMMs. The grouped tensor-core stages re-read
  // an expert's weights once per 8 pairs, so they win up to ~128 pairs per expert (a 4096-token
  // prefill gives the routed experts ~96 each); the SIMT stages only up to ~32.
  // The same stages for every M (batch invariance): the choice depends on the weights only.
  const bool mma = grouped_mma_supported(experts, opts);
  const int64_t gemm_pairs = mma ? 128 : 32;
  const bool per_expert_gemm =
      !experts.empty() && x.rows * top_k >= gemm_pairs * static_cast<int64_t>(experts.size()) &&
      opts.act_quant && tensor_core_eligible(x.rows, experts[0].w1, true);
  if (per_expert_gemm || !grouped_supported(x, experts, opts)) {
    moe_experts_by_expert(x, ids, weights, top_k, experts, opts, out);
    return;
  }
  arena().reset();
  const int64_t M = x.rows, D = out.cols, P = M * top_k;
  if (P == 0) return;
  const int E = static_cast<int>(experts.size());
  const int64_t I = experts[0].w1.n;
  for (const ExpertWeights& e : experts) DI_CHECK(e.w1.n == I && e.w2.n == D);
  const kc::GroupedExpert* table = expert_table(experts);
  const int32_t* dids = on_device(ids, P);
  kc::MoeLayout l;
  if (opts.single_expert && E == 1 && top_k == 1 && P <= kLinearMmaLayoutRows) {
    // The shared expert of a decode-sized step: every row is a pair of expert 0, in row order,
    // which is the layout the table made at creation holds for P rows (linear_mma's): the bits
    // of moe_layout over ids all 0, without its launch.
    int32_t* layouts = linear_mma_layouts_.as<int32_t>();
    int32_t* l4 = layouts + 4 * (P - 1);
    l.counts = l4;
    l.offsets = l4 + 1;
    l.active = l4 + 2;
    l.n_active = l4 + 3;
    l.pair_row = layouts + 4 * kLinearMmaLayoutRows;
    l.row_pair = l.pair_row;
  } else {
    l.counts = arena().alloc_n<int32_t>(E);
    l.offsets = arena().alloc_n<int32_t>(E);
    l.active = arena().alloc_n<int32_t>(E);
    l.n_active = arena().alloc_n<int32_t>(1);
    l.pair_row = arena().alloc_n<int32_t>(P);
    l.row_pair = arena().alloc_n<int32_t>(P);
    kc::launch_moe_layout(dids, P, E, l, stream_);
  }

  kc::MoeEpilogue ep;
  ep.swiglu_limit = opts.swiglu_limit;
  ep.bf16_rounding = opts.bf16_rounding;
  ep.weight_before_w2 = opts.weight_before_w2;
  const int max_active = static_cast<int>(std::min<int64_t>(E, P));
  Mat h(arena().alloc_n<float>(P * I), P, I);
  Mat y(arena().alloc_n<float>(P * D), P, D);
  if (mma) {
    // Tiles of 8 pairs per weight decode (same bits every way): from 16 pairs per expert on
    // average the wide form (64 weight rows per block, inputs staged in shared memory; FP4
    // weights, else four tiles). H200, top-6 of 256 experts: wide 3.83 ms against four tiles
    // 4.50 at 24 pairs per expert, 9.01 against 20.39 at 96; one tile wins at 6 (1.55 against
    // 2.76; cuda_moe_wide_perf_h200_2026-12-03_stop32.txt.xz).
    // The wide form stages FP4 codes with their 1x32 scale blocks (else four tiles).
    const bool k32 = experts[0].w1.block_k == 32 && experts[0].w3.block_k == 32 &&
                     experts[0].w2.block_k == 32;
    const int pair_tiles =
        moe_pair_tiles_ > 0 ? moe_pair_tiles_ : (P >= 16 * E ? (k32 ? 8 : 4) : 1);
    // The tensor-core stages read BF16 copies of their (act-quantized, so exact) inputs:
    // act-quantized on the way (grouped_mma_supported: act_quant).
    uint16_t* xb = arena().alloc_n<uint16_t>(M * x.cols);
    kc::launch_bf16_paired(md(x), opts.act_block, xb, x.cols, stream_);
    kc::launch_moe_gate_up_mma(xb, x.cols, table, experts[0].w1.format == WeightFormat::kFp4, I, l,
                               max_active, weights.data, weights.ld, top_k, ep, h.data, h.ld,
                               pair_tiles, stream_);
    uint16_t* hb = arena().alloc_n<uint16_t>(P * I);
    kc::launch_bf16_paired(md(h), opts.act_block, hb, I, stream_);
    kc::launch_moe_down_mma(hb, I, table, experts[0].w2.format == WeightFormat::kFp4, D, l,
                            max_active, weights.data, weights.ld, top_k, ep, y.data, y.ld,
                            pair_tiles, stream_);
  } else {
    CMat xin = x;
    if (opts.act_quant && experts[0].w1.quantized()) {
      Mat xq(arena().alloc_n<float>(M * x.cols), M, x.cols);
      kc::launch_act_quant_fp8_copy(md(x), md(xq), opts.act_block, stream_);
      xin = xq;
    }
    kc::launch_moe_gate_up(md(xin), table, I, l, max_active, weights.data, weights.ld, top_k, ep,
                           h.data, h.ld, stream_);
    if (opts.act_quant && experts[0].w2.quantized()) {
      kc::launch_fake_quant_fp8(md(h), h.cols, opts.act_block, stream_);
    }
    kc::launch_moe_down(h.data, h.ld, table, D, l, max_active, weights.data, weights.ld, top_k, ep,
                        y.data, y.ld, stream_);
  }
  kc::launch_moe_combine(y.data, y.ld, dids, l, top_k, opts.accumulate, md(out), opts.round_out,
                         stream_);
}

void CudaOps::moe_experts_by_expert(CMat x, const int32_t* ids, CMat weights, int top_k,
                                    std::span<const ExpertWeights> experts, const MoeOpts& opts,
                                    Mat out) {
  arena().reset();
  const int64_t M = x.rows, D = out.cols;
  std::vector<int32_t> hid(static_cast<size_t>(M * top_k));
  // The shared expert: every id is 0 (the zero-filled hid), nothing to read back.
  if (opts.single_expert) {
    DI_CHECK(experts.size() == 1 && top_k == 1);
  } else if (!hid.empty() && is_device_pointer(ids) &&
             refuse_in_capture("expert ids read back to group the rows")) {
    // a refused capture: its kernels never run, so the ids' values do not matter
  } else if (!hid.empty() && is_device_pointer(ids)) {
    DI_CUDA_CHECK(
        cudaMemcpyAsync(hid.data(), ids, hid.size() * sizeof(int32_t), cudaMemcpyDefault, stream_));
    synchronize();
  } else if (!hid.empty()) {
    std::copy(ids, ids + hid.size(), hid.begin());
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

  Mat ysum(arena().alloc_n<float>(M * D), M, D);
  DI_CUDA_CHECK(cudaMemsetAsync(ysum.data, 0, static_cast<size_t>(M * D) * sizeof(float), stream_));
  const int32_t* dtok = nullptr;
  const int32_t* dslot = nullptr;
  // The shared expert's rows are 0..M-1 with slot 0: the kernels' null (identity) row lists.
  if (!tok.empty() && !opts.single_expert) {
    int32_t* t = arena().alloc_n<int32_t>(static_cast<int64_t>(tok.size()));
    int32_t* s = arena().alloc_n<int32_t>(static_cast<int64_t>(slot.size()));
    DI_CUDA_CHECK(cudaMemcpyAsync(t, tok.data(), tok.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream_));
    DI_CUDA_CHECK(cudaMemcpyAsync(s, slot.data(), slot.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream_));
    dtok = t;
    dslot = s;
  }
  float* xg_buf = arena().alloc_n<float>(max_rows * x.cols);
  float* xq_buf = arena().alloc_n<float>(max_rows * x.cols);
  float* a_buf = arena().alloc_n<float>(max_rows * max_i);
  float* b_buf = arena().alloc_n<float>(max_rows * max_i);
  float* y_buf = arena().alloc_n<float>(max_rows * D);
  // BF16 scratch of the tensor-core path, reused by every expert (stream order keeps it safe).
  int64_t max_w = 0;
  for (const Group& g : groups) {
    const ExpertWeights& ew = experts[static_cast<size_t>(g.expert)];
    max_w = std::max({max_w, ew.w1.n * ew.w1.k, ew.w3.n * ew.w3.k, ew.w2.n * ew.w2.k});
  }
  const bool tc =
      !groups.empty() && opts.act_quant &&
      tensor_core_eligible(max_rows, experts[static_cast<size_t>(groups[0].expert)].w1, true);
  uint16_t* wb = tc ? arena().alloc_n<uint16_t>(max_w) : nullptr;
  uint16_t* xb = tc ? arena().alloc_n<uint16_t>(max_rows * std::max(x.cols, max_i)) : nullptr;

  for (const Group& g : groups) {
    const ExpertWeights& ew = experts[static_cast<size_t>(g.expert)];
    const int64_t n = g.count, I = ew.w1.n;
    const int32_t* gt = dtok ? dtok + g.begin : nullptr;
    const int32_t* gs = dslot ? dslot + g.begin : nullptr;
    Mat xg(xg_buf, n, x.cols), xq(xq_buf, n, x.cols);
    Mat a(a_buf, n, I), b(b_buf, n, I), y(y_buf, n, D);
    kc::launch_copy_rows(md(x), gt, md(xg), stream_);
    const bool q1 = opts.act_quant && ew.w1.quantized();
    const bool q3 = opts.act_quant && ew.w3.quantized();
    if (q1 || q3) kc::launch_act_quant_fp8_copy(md(CMat(xg)), md(xq), opts.act_block, stream_);
    matmul(q1 ? xq : xg, ew.w1, a, q1 ? opts.act_block : 0, q1, wb, xb, false);
    matmul(q3 ? xq : xg, ew.w3, b, q3 ? opts.act_block : 0, q3, wb, xb, false);
    if (opts.bf16_rounding) {
      kc::launch_round_bf16(md(a), stream_);
      kc::launch_round_bf16(md(b), stream_);
    }
    kc::launch_swiglu(md(a), md(b), opts.swiglu_limit, md(a), stream_);
    if (opts.weight_before_w2) {
      kc::launch_scale_rows(md(a), weights.data, weights.ld, gt, gs, stream_);
    }
    if (opts.bf16_rounding) kc::launch_round_bf16(md(a), stream_);
    const bool q2 = opts.act_quant && ew.w2.quantized();
    if (q2) kc::launch_fake_quant_fp8(md(a), a.cols, opts.act_block, stream_);
    matmul(a, ew.w2, y, q2 ? opts.act_block : 0, q2, wb, xb, false);
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
  if (opts.round_out) kc::launch_round_bf16(md(out), stream_);
}

}  // namespace deepinfer::backend::cuda
