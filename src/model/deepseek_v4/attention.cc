// Attention of one layer (see attention.h). Rounding points follow spec §2.0/§2.3 in official
// semantics (Numerics::act) and are no-ops in HF semantics.
#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"

namespace deepinfer::model::deepseek_v4 {

using backend::CMat;
using backend::Mat;

namespace {

constexpr int64_t kIndexerQueryBlock = 256;
constexpr int64_t kIndexerScoreFloats = int64_t{1} << 24;  // 64 MiB of scores per block at most

// Query path, shared K=V latent (spec §2.3) for all rows. qr is kept for the indexer.
void project_qkv(const LayerEnv& env, const AttentionWeights& w, std::span<const float> freqs,
                 CMat u, const int32_t* pos, Mat qr, Mat q, Mat kv) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const int64_t H = env.config.num_heads, d = env.config.head_dim;
  ops.linear(u, w.wq_a, qr, num.gemm());
  num.act(ops, qr);
  ops.rms_norm(qr, &w.q_norm, num.eps, 0, qr);
  num.act(ops, qr);
  ops.linear(qr, w.wq_b, q, num.gemm());
  num.act(ops, q);
  head_rms_norm(ops, num, q, d);
  ops.rope(q, H, d, pos, freqs, false);
  num.act(ops, q);

  ops.linear(u, w.wkv, kv, num.gemm());
  num.act(ops, kv);
  ops.rms_norm(kv, &w.kv_norm, num.eps, 0, kv);
  num.act(ops, kv);
  ops.rope(kv, 1, d, pos, freqs, false);
  num.act(ops, kv);
  if (num.official) ops.fake_quant_fp8(kv, d - 2 * static_cast<int64_t>(freqs.size()), kKvFp8Block);
}

// Indexer query and head weights (spec §2.5 steps 1-2) for all rows.
void project_indexer(const LayerEnv& env, const IndexerWeights& w, std::span<const float> freqs,
                     CMat u, CMat qr, const int32_t* pos, Mat iq, Mat iw) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const int64_t Hi = env.config.index_n_heads, di = env.config.index_head_dim;
  ops.linear(qr, w.wq_b, iq, num.gemm());
  num.act(ops, iq);
  ops.rope(iq, Hi, di, pos, freqs, false);
  num.act(ops, iq);
  if (num.official) {
    ops.hadamard(iq, di);
    ops.round_bf16(iq);
    ops.fake_quant_fp4(iq, kIndexerFp4Block);
  }
  ops.linear(u, w.weights_proj, iw);
  num.act(ops, iw);
  ops.scale(iw, 1.0f / std::sqrt(static_cast<float>(di) * static_cast<float>(Hi)));
  num.act(ops, iw);
}

}  // namespace

void attention_forward(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       bool mtp, size_t cache_index, CMat u, const StepInputs& in, Mat out,
                       AttentionScratch& s) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = u.rows, H = cfg.num_heads, d = cfg.head_dim, W = cfg.sliding_window;
  const int64_t ql = cfg.q_lora_rank;
  const int32_t* pos = in.positions.data();
  const std::span<const float> freqs = env.rope.for_kind(spec.attention);
  const std::span<const float> cfreqs = env.rope.compress;
  const bool has_comp = w.compressor.has_value();
  const bool has_idx = w.indexer.has_value();

  Mat qr(fit(s.qr, M * ql), M, ql);
  Mat q(fit(s.q, M * H * d), M, H * d);
  Mat kv(fit(s.kv, M * d), M, d);
  project_qkv(env, w, freqs, u, pos, qr, q, kv);

  Mat ckv, cg, ikv, ig, iq, iw;
  if (has_comp) {
    const int64_t cw = w.compressor->width();
    ckv = Mat(fit(s.comp_kv, M * cw), M, cw);
    cg = Mat(fit(s.comp_gate, M * cw), M, cw);
    compressor_project(ops, *w.compressor, u, pos, ckv, cg, s.comp);
  }
  const int64_t Hi = cfg.index_n_heads, di = cfg.index_head_dim;
  if (has_idx) {
    const CompressorWeights& icw = w.indexer->compressor;
    ikv = Mat(fit(s.idx_kv, M * icw.width()), M, icw.width());
    ig = Mat(fit(s.idx_gate, M * icw.width()), M, icw.width());
    compressor_project(ops, icw, u, pos, ikv, ig, s.comp);
    iq = Mat(fit(s.iq, M * Hi * di), M, Hi * di);
    iw = Mat(fit(s.iw, M * Hi), M, Hi);
    project_indexer(env, *w.indexer, cfreqs, u, qr, pos, iq, iw);
  }

  // Every sequence's compressors take this step's rows first: the selection below scores all
  // sequences' index keys at once.
  auto layer_cache = [&](const SequenceSpan& sq) -> LayerCache& {
    return mtp ? sq.cache->mtp_layer(cache_index) : sq.cache->layer(cache_index);
  };
  std::vector<CompressorJob>& comp_jobs = s.comp_jobs;
  std::vector<CompressorJob>& idx_jobs = s.idx_jobs;
  comp_jobs.clear();
  idx_jobs.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    LayerCache& lc = layer_cache(sq);
    const int64_t L = pos[sq.begin];
    DI_CHECK(lc.window.size() == L);
    comp_jobs.push_back({&lc.comp, sq.begin, sq.count, L});
    idx_jobs.push_back({&lc.idx, sq.begin, sq.count, L});
  }
  if (has_comp) {
    compressor_advance(ops, num, *w.compressor, CompressedRowKind::kAttention, cfreqs, ckv, cg,
                       comp_jobs, s.comp);
  }
  if (has_idx) {
    compressor_advance(ops, num, w.indexer->compressor, CompressedRowKind::kIndexKey, cfreqs, ikv,
                       ig, idx_jobs, s.comp);
  }
  // Indexer selection (CSA): top-k of the visible index keys per query, over every sequence of
  // the step in one indexer_scores_multi + topk per block of rows, so a device backend
  // synchronises once per layer (for the host-built key lists below), not once per sequence.
  // sel [M, K] (row stride K = the largest per-sequence k); a row's entries past its visible
  // count are -1, so each sequence reads exactly its own top-min(index_topk, rows) set.
  int64_t K = 0;
  const int32_t* sel = nullptr;
  if (has_idx) {
    int64_t max_rows = 0;
    for (const SequenceSpan& sq : in.sequences) {
      if (sq.count > 0) max_rows = std::max(max_rows, layer_cache(sq).idx.rows.size());
    }
    K = std::min<int64_t>(cfg.index_topk, max_rows);
    if (K > 0) {
      int32_t* vis = fit_n(s.visible, M);
      std::fill(vis, vis + M, 0);
      s.row_keys.assign(static_cast<size_t>(M), backend::CMat{nullptr, 0, di});
      for (const SequenceSpan& sq : in.sequences) {
        if (sq.count == 0) continue;
        const backend::CMat keys = layer_cache(sq).idx.rows.view();
        if (keys.rows == 0) continue;
        for (int64_t i = 0; i < sq.count; ++i) {
          vis[sq.begin + i] = static_cast<int32_t>((pos[sq.begin] + i + 1) / spec.compress_ratio);
          s.row_keys[static_cast<size_t>(sq.begin + i)] = keys;
        }
      }
      int32_t* out_sel = fit_n(s.sel, M * K);
      // Query blocks bound the score matrix ([block, max_rows] floats) for long prompts.
      const int64_t block =
          std::clamp<int64_t>(kIndexerScoreFloats / max_rows, 1, kIndexerQueryBlock);
      for (int64_t i0 = 0; i0 < M; i0 += block) {
        const int64_t nb = std::min(block, M - i0);
        Mat scores(fit(s.scores, nb * max_rows), nb, max_rows);
        ops.indexer_scores_multi(iq.rows_slice(i0, nb), Hi, iw.rows_slice(i0, nb),
                                 std::span<const backend::CMat>(s.row_keys)
                                     .subspan(static_cast<size_t>(i0), static_cast<size_t>(nb)),
                                 vis + i0, num.official, scores);
        ops.topk(scores, vis + i0, K, out_sel + i0 * K);
      }
      sel = out_sel;
    }
  }

  // Key-set width per row (window + compressed) and an upper bound of gathered rows.
  int64_t width = 0, key_rows = 0;
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t L = pos[sq.begin], T = L + sq.count;
    int64_t wcomp = 0, rows_comp = 0;
    if (has_comp) {
      const int64_t n_rows = T / spec.compress_ratio;
      wcomp = has_idx ? std::min<int64_t>(cfg.index_topk, n_rows) : n_rows;
      rows_comp = has_idx ? std::min(n_rows, sq.count * wcomp) : n_rows;
    }
    width = std::max(width, std::min(W, T) + wcomp);
    key_rows += std::min(L, W - 1) + sq.count + rows_comp;
  }
  int32_t* idx = fit_n(s.idx, M * width);
  std::fill(idx, idx + M * width, -1);
  // Every query's keys are gathered into one matrix by one gather_rows call over the rows of
  // every sequence (cached window slots, this step's rows, compressed rows), so one
  // sparse_attention call serves all sequences.
  std::vector<const float*>& key_src = s.key_src;
  key_src.clear();
  int64_t n_keys = 0;
  auto push_key = [&](const float* row) {
    key_src.push_back(row);
    return static_cast<int32_t>(n_keys++);
  };
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    LayerCache& lc = layer_cache(sq);
    const int64_t b = sq.begin, c = sq.count, L = pos[b];
    const bool selected = has_idx && sel != nullptr && lc.idx.rows.size() > 0;

    // Window keys: cached rows [L - nw_old, L), then this step's rows.
    const int64_t nw_old = std::min(L, W - 1);
    const int64_t win_base = n_keys;
    for (int64_t p = L - nw_old; p < L; ++p) push_key(lc.window.row(p));
    for (int64_t i = 0; i < c; ++i) push_key(kv.row(b + i));
    const int64_t origin = L - nw_old;  // position of key row win_base

    // Compressed keys.
    int64_t comp_base = n_keys;
    int32_t* remap = nullptr;
    if (has_comp && !has_idx) {
      for (int64_t r = 0; r < lc.comp.rows.size(); ++r) push_key(lc.comp.rows.row(r));
    } else if (selected) {
      remap = fit_n(s.remap, lc.comp.rows.size());
      std::fill(remap, remap + lc.comp.rows.size(), -1);
      for (int64_t j = b * K; j < (b + c) * K; ++j) {
        const int32_t r = sel[j];
        if (r >= 0 && remap[r] < 0) remap[r] = push_key(lc.comp.rows.row(r));
      }
    }

    for (int64_t i = 0; i < c; ++i) {
      const int64_t p = L + i;
      int32_t* row = idx + (b + i) * width;
      int64_t j = 0;
      for (int64_t k = std::max<int64_t>(0, p - W + 1); k <= p; ++k) {
        row[j++] = static_cast<int32_t>(win_base + (k - origin));
      }
      if (has_comp && !has_idx) {
        const int64_t vis = (p + 1) / spec.compress_ratio;
        for (int64_t r = 0; r < vis; ++r) row[j++] = static_cast<int32_t>(comp_base + r);
      } else if (remap != nullptr) {
        for (int64_t k = 0; k < K; ++k) {
          const int32_t r = sel[(b + i) * K + k];
          if (r >= 0) row[j++] = remap[r];
        }
      }
      DI_CHECK(j <= width);
    }
  }
  DI_CHECK(n_keys <= key_rows);
  Mat keys(fit(s.keys, key_rows * d), key_rows, d);
  ops.gather_rows(key_src, keys.rows_slice(0, n_keys));
  // Only now may the window rings take this step's rows (one scatter for every sequence): the
  // gather above reads slots a long chunk would overwrite.
  s.win_src.clear();
  s.win_dst.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t dropped = layer_cache(sq).window.claim(sq.count, s.win_dst);
    for (int64_t i = dropped; i < sq.count; ++i) s.win_src.push_back(kv.row(sq.begin + i));
  }
  ops.scatter_rows(s.win_src, s.win_dst, d);

  Mat o(fit(s.o, M * H * d), M, H * d);
  ops.sparse_attention(q, H, CMat(keys).rows_slice(0, n_keys), idx, width, w.sink,
                       1.0f / std::sqrt(static_cast<float>(d)), num.official, o);
  num.act(ops, o);
  ops.rope(o, H, d, pos, freqs, true);
  num.act(ops, o);

  // Grouped output projection: group g = heads [g·H/G, (g+1)·H/G) -> rows [g·r, (g+1)·r) of wo_a.
  // The reference runs wo_a as a BF16 einsum on the dequantized weight: no activation quant.
  const int64_t G = cfg.o_groups, R = cfg.o_lora_rank, gw = H / G * d;
  Mat z(fit(s.z, M * G * R), M, G * R);
  for (int64_t g = 0; g < G; ++g) {
    ops.linear(CMat(o).cols_slice(g * gw, gw), w.wo_a_groups[static_cast<size_t>(g)],
               z.cols_slice(g * R, R));
  }
  num.act(ops, z);
  ops.linear(z, w.wo_b, out, num.gemm());
  num.act(ops, out);
}

}  // namespace deepinfer::model::deepseek_v4
