// Compressor (see compressor.h). Row w of ratio m pools tokens [w·m, (w+1)·m) (non-overlapping,
// HCA) or, for m = 4, the first-half channels of window w−1 and the second-half channels of
// window w (8 slots; window −1 is empty), channel-wise softmax over the gate logits.
#include "model/deepseek_v4/compressor.h"

#include "base/check.h"

namespace deepinfer::model::deepseek_v4 {

using backend::CMat;
using backend::Mat;

void compressor_project(backend::Ops& ops, const CompressorWeights& w, CMat u,
                        const int32_t* positions, Mat kv, Mat gate, CompressorScratch& scratch) {
  // FP32 compute on the (BF16-exact) block input in both semantics (spec §2.0).
  ops.linear(u, w.wkv, kv);
  ops.linear(u, w.wgate, gate);
  // gate += ape[pos mod m]: gather the ape rows, then one add.
  const int64_t width = w.width(), M = gate.rows;
  if (M == 0) return;
  int32_t* which = fit_n(scratch.ape_index, M);
  for (int64_t r = 0; r < M; ++r) which[r] = positions[r] % w.ratio;
  Mat ape(fit(scratch.ape_rows, M * width), M, width);
  ops.copy_rows(CMat(w.ape, w.ratio, width), which, ape);
  ops.add(gate, ape, gate);
}

int64_t compressor_advance(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                           CompressedRowKind kind, std::span<const float> freqs, CMat kv, CMat gate,
                           int64_t start, CompressorState& state, CompressorScratch& scratch) {
  DI_CHECK(state.kv.size() == start && state.rows.size() == start / w.ratio);
  const int64_t m = w.ratio, d_c = w.d_c;
  const int64_t end = start + kv.rows;
  const int64_t first = start / m, last = end / m;  // rows [first, last) close in this step
  const int64_t n_new = last - first;
  if (n_new > 0) {
    // Slot pointers into the cached rows (positions < start) or the step's rows.
    auto kv_row = [&](int64_t pos) {
      return pos < start ? state.kv.row(pos) : kv.row(pos - start);
    };
    auto gate_row = [&](int64_t pos) {
      return pos < start ? state.gate.row(pos) : gate.row(pos - start);
    };
    const int64_t spr = w.overlap ? 2 * m : m;
    backend::PoolSlot* slots = fit_n(scratch.slots, n_new * spr);
    for (int64_t r = 0; r < n_new; ++r) {
      const int64_t row = first + r;
      backend::PoolSlot* s = slots + r * spr;
      if (w.overlap) {
        for (int64_t i = 0; i < m; ++i) {
          const int64_t prev = (row - 1) * m + i;
          s[i] = row > 0 ? backend::PoolSlot{kv_row(prev), gate_row(prev)} : backend::PoolSlot{};
          const int64_t cur = row * m + i;
          s[m + i] = {kv_row(cur) + d_c, gate_row(cur) + d_c};
        }
      } else {
        for (int64_t i = 0; i < m; ++i) s[i] = {kv_row(row * m + i), gate_row(row * m + i)};
      }
    }
    Mat out(fit(scratch.rows, n_new * d_c), n_new, d_c);
    ops.softmax_pool({slots, static_cast<size_t>(n_new * spr)}, spr, out);
    num.act(ops, out);
    ops.rms_norm(out, &w.norm, num.eps, 0, out);
    num.act(ops, out);
    int32_t* pos = fit_n(scratch.positions, n_new);
    for (int64_t r = 0; r < n_new; ++r) pos[r] = static_cast<int32_t>((first + r) * m);
    ops.rope(out, 1, d_c, pos, freqs, false);
    num.act(ops, out);
    if (num.official) {
      if (kind == CompressedRowKind::kAttention) {
        ops.fake_quant_fp8(out, d_c - 2 * static_cast<int64_t>(freqs.size()), kKvFp8Block);
      } else {
        ops.hadamard(out, d_c);
        ops.round_bf16(out);
        ops.fake_quant_fp4(out, kIndexerFp4Block);
      }
    }
    state.rows.append(out);
  }
  state.kv.append(kv);
  state.gate.append(gate);
  return n_new;
}

}  // namespace deepinfer::model::deepseek_v4
