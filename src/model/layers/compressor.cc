// Compressor (see compressor.h). Row w of ratio m pools tokens [w·m, (w+1)·m) (non-overlapping,
// HCA) or, for m = 4, the first-half channels of window w−1 and the second-half channels of
// window w (8 slots; window −1 is empty), channel-wise softmax over the gate logits.
#include "model/layers/compressor.h"

#include "base/check.h"
#include "model/recorded_steps.h"

namespace deepinfer::model {

using backend::CMat;
using backend::Mat;

void compressor_project(backend::Ops& ops, const CompressorWeights& w, CMat u,
                        const backend::LinearOpts& opts, const int32_t* ape_rows, Mat kv, Mat gate,
                        backend::Buffer& ape) {
  // FP32 compute on the block input in both semantics (spec §2.0).
  ops.linear(u, w.wkv, kv, opts);
  if (!w.wgate) return;  // ratio 1 (V4.1): every token is its own row, no gate
  ops.linear(u, *w.wgate, gate, opts);
  // gate += ape[pos mod m] (V4): gather the ape rows, then one add.
  const int64_t width = w.width(), M = gate.rows;
  if (M == 0 || w.ape == nullptr) return;
  Mat a(fit(ape, M * width), M, width);
  ops.copy_rows(CMat(w.ape, w.ratio, width), ape_rows, a);
  ops.add(gate, a, gate);
}

Mat compressor_pool(backend::Ops& ops, const Numerics& num, const CompressorWeights& w, CMat kv,
                    CMat gate, std::span<const CompressorJob> jobs, CompressorScratch& scratch) {
  const int64_t m = w.ratio, d_c = w.d_c;
  const int64_t spr = w.overlap ? 2 * m : m;
  const bool state = m > 1;  // ratio 1 (V4.1): every token is its own row, nothing pending
  // Rows [first, last) of a job close in this step.
  auto closing = [m](const CompressorJob& j) {
    return std::pair<int64_t, int64_t>{j.start / m, (j.start + j.count) / m};
  };
  int64_t n_new = 0;
  for (const CompressorJob& j : jobs) {
    DI_CHECK(j.state->rows.size() == j.start / m && (!state || j.state->kv.size() == j.start));
    n_new += closing(j).second - closing(j).first;
  }
  int32_t* pos = fit_n(scratch.positions, n_new);
  // Room for the rows padded to their bucket (compress_full's eager index-key linear reads
  // them: RecordedSteps::padded_count).
  const int64_t room = RecordedSteps::padded_count(n_new, ops.record_max_rows());
  Mat out(fit(scratch.rows, room * d_c), n_new, d_c);
  if (!state) {  // the latents are the kv rows of the step, in job order
    int64_t r_all = 0;
    std::vector<int32_t>& rows = scratch.row_ids;
    rows.clear();
    for (const CompressorJob& j : jobs) {
      for (int64_t i = 0; i < j.count; ++i, ++r_all) {
        rows.push_back(static_cast<int32_t>(j.begin + i));
        pos[r_all] = static_cast<int32_t>(j.start + i);
      }
    }
    if (n_new > 0) ops.copy_rows(kv, rows.data(), out);
  } else {
    // Pool slots of every emitted row (pointers into the cached rows, positions < start, or the
    // step's rows), then one op chain over all of them.
    backend::PoolSlot* slots = fit_n(scratch.slots, n_new * spr);
    int64_t r_all = 0;
    for (const CompressorJob& j : jobs) {
      const CompressorState& st = *j.state;
      auto kv_row = [&](int64_t p) {
        return p < j.start ? st.kv.row(p) : kv.row(j.begin + p - j.start);
      };
      auto gate_row = [&](int64_t p) {
        return p < j.start ? st.gate.row(p) : gate.row(j.begin + p - j.start);
      };
      const auto [first, last] = closing(j);
      for (int64_t row = first; row < last; ++row, ++r_all) {
        backend::PoolSlot* s = slots + r_all * spr;
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
        pos[r_all] = static_cast<int32_t>(row * m);
      }
    }
    if (n_new > 0) ops.softmax_pool({slots, static_cast<size_t>(n_new * spr)}, spr, out);
  }
  if (n_new > 0) {
    num.act(ops, out);
    num.rms_norm_act(ops, out, &w.norm, 0, out);
  }
  if (state) {
    // The states take the step's rows only now (the pool above read their older rows by
    // pointer).
    auto& ssrc = scratch.state_src;
    auto& sdst = scratch.state_dst;
    ssrc.clear();
    sdst.clear();
    for (const CompressorJob& j : jobs) {
      CompressorState& st = *j.state;
      const int64_t dropped = st.kv.claim(j.count, sdst);
      st.gate.claim(j.count, sdst);
      for (int64_t i = dropped; i < j.count; ++i) ssrc.push_back(kv.row(j.begin + i));
      for (int64_t i = dropped; i < j.count; ++i) ssrc.push_back(gate.row(j.begin + i));
    }
    ops.scatter_rows(ssrc, sdst, kv.cols);
  }
  return out;
}

void append_closed_rows(backend::Ops& ops, int ratio, std::span<const CompressorJob> jobs,
                        CMat rows, const std::function<PagedRows&(const CompressorJob&)>& list_of,
                        CompressorScratch& scratch) {
  auto& src = scratch.src;
  auto& dst = scratch.dst;
  src.clear();
  dst.clear();
  int64_t r_all = 0;
  for (const CompressorJob& j : jobs) {
    const int64_t first = j.start / ratio, last = (j.start + j.count) / ratio;
    if (last > first) {
      list_of(j).claim(last - first, dst);
      for (int64_t r = 0; r < last - first; ++r, ++r_all) src.push_back(rows.row(r_all));
    }
  }
  DI_CHECK(r_all == rows.rows);
  ops.scatter_rows(src, dst, rows.cols);
}

int64_t compressor_advance(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                           CompressedRowKind kind, std::span<const float> freqs, CMat kv, CMat gate,
                           std::span<const CompressorJob> jobs, CompressorScratch& scratch) {
  const int64_t d_c = w.d_c;
  const Mat out = compressor_pool(ops, num, w, kv, gate, jobs, scratch);
  const int64_t n_new = out.rows;
  if (n_new > 0) {
    num.rope_act(ops, out, 1, d_c, scratch.positions.data(), freqs, false);
    if (num.official) {
      if (kind == CompressedRowKind::kAttention) {
        ops.fake_quant_fp8(out, d_c - 2 * static_cast<int64_t>(freqs.size()), kKvFp8Block);
      } else {
        ops.hadamard(out, d_c);
        ops.round_bf16(out);
        ops.fake_quant_fp4(out, kIndexerFp4Block);
      }
    }
  }
  append_closed_rows(
      ops, w.ratio, jobs, out, [](const CompressorJob& j) -> PagedRows& { return j.state->rows; },
      scratch);
  return n_new;
}

}  // namespace deepinfer::model
