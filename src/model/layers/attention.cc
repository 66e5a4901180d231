// Attention of one layer (see attention.h). Rounding points follow spec §2.0/§2.3 in official
// semantics (Numerics::act) and are no-ops in HF semantics.
#include "model/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"

namespace deepinfer::model {

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

const int32_t* RowInputs::ape_rows(int ratio) const {
  for (const auto& [r, rows] : ape) {
    if (r == ratio) return rows;
  }
  DI_CHECK(false && "no ape rows for this compress ratio");
  return nullptr;
}

void AttentionBuffers::fingerprint(std::vector<std::pair<const void*, size_t>>& out) const {
  for (const backend::Buffer* b :
       {&qr, &q, &kv, &o, &z, &comp_kv, &comp_gate, &idx_kv, &idx_gate, &iq, &iw, &ape}) {
    out.emplace_back(b->data(), b->bytes());
  }
}

AttentionRows attention_rows(const LayerEnv& env, const AttentionWeights& w, int64_t M,
                             AttentionBuffers& b) {
  const io::ModelConfig& cfg = env.config;
  const int64_t H = cfg.num_heads, d = cfg.head_dim, ql = cfg.q_lora_rank;
  AttentionRows r;
  r.qr = Mat(fit(b.qr, M * ql), M, ql);
  r.q = Mat(fit(b.q, M * H * d), M, H * d);
  r.kv = Mat(fit(b.kv, M * d), M, d);
  r.o = Mat(fit(b.o, M * H * d), M, H * d);
  if (w.compressor.has_value()) {
    const int64_t cw = w.compressor->width();
    r.ckv = Mat(fit(b.comp_kv, M * cw), M, cw);
    r.cg = Mat(fit(b.comp_gate, M * cw), M, cw);
  }
  if (w.indexer.has_value()) {
    const int64_t iwd = w.indexer->compressor->width();
    const int64_t Hi = cfg.index_n_heads, di = cfg.index_head_dim;
    r.ikv = Mat(fit(b.idx_kv, M * iwd), M, iwd);
    r.ig = Mat(fit(b.idx_gate, M * iwd), M, iwd);
    r.iq = Mat(fit(b.iq, M * Hi * di), M, Hi * di);
    r.iw = Mat(fit(b.iw, M * Hi), M, Hi);
  }
  return r;
}

void attention_project(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       CMat u, const RowInputs& rows, AttentionBuffers& b,
                       const AttentionRows& r) {
  const int32_t* pos = rows.positions;
  project_qkv(env, w, env.rope.for_kind(spec.attention), u, pos, r.qr, r.q, r.kv);
  if (w.compressor.has_value()) {
    compressor_project(env.ops, *w.compressor, u, rows.ape_rows(w.compressor->ratio), r.ckv, r.cg,
                       b.ape);
  }
  if (w.indexer.has_value()) {
    const CompressorWeights& icw = *w.indexer->compressor;
    compressor_project(env.ops, icw, u, rows.ape_rows(icw.ratio), r.ikv, r.ig, b.ape);
    project_indexer(env, *w.indexer, env.rope.compress, u, r.qr, pos, r.iq, r.iw);
  }
}

void attention_forward(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       bool mtp, size_t cache_index, CMat u, const RowInputs& rows,
                       const StepInputs& in, Mat out, AttentionBuffers& b, AttentionScratch& s) {
  const AttentionRows r = attention_rows(env, w, u.rows, b);
  attention_project(env, w, spec, u, rows, b, r);
  attention_core(env, w, spec, mtp, cache_index, r, in, s);
  attention_output(env, w, spec, rows.positions, r, out, b);
}

void attention_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                    bool mtp, size_t cache_index, const AttentionRows& rows, const StepInputs& in,
                    AttentionScratch& s) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  const int64_t H = cfg.num_heads, d = cfg.head_dim, W = cfg.sliding_window;
  const int32_t* pos = in.positions.data();
  const std::span<const float> cfreqs = env.rope.compress;
  const bool has_comp = w.compressor.has_value();
  const bool has_idx = w.indexer.has_value();
  const int64_t Hi = cfg.index_n_heads, di = cfg.index_head_dim;
  DI_CHECK(rows.q.rows >= M);
  const CMat kv = rows.kv, ckv = rows.ckv, cg = rows.cg, ikv = rows.ikv, ig = rows.ig;
  const CMat iq = rows.iq, iw = rows.iw;

  // Every sequence's compressors take this step's rows first: the selection below scores all
  // sequences' index keys at once.
  auto layer_cache = [&](const SequenceSpan& sq) -> LayerCache& {
    return mtp ? sq.cache->draft_layer(cache_index) : sq.cache->layer(cache_index);
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
    compressor_advance(ops, num, *w.indexer->compressor, CompressedRowKind::kIndexKey, cfreqs, ikv,
                       ig, idx_jobs, s.comp);
  }
  // Indexer selection (CSA): top-k of the visible index keys per query, over every sequence of
  // the step in one indexer_scores_multi + topk per block of rows. The selection stays in
  // backend memory (s.sel, [M, K], row stride K = the largest per-sequence k; a row's entries
  // past its visible count are -1): a device backend never returns it to the host.
  int64_t K = 0;
  int32_t* sel = nullptr;
  if (has_idx) {
    int64_t max_rows = 0;
    for (const SequenceSpan& sq : in.sequences) {
      if (sq.count > 0) max_rows = std::max(max_rows, layer_cache(sq).idx.rows.size());
    }
    K = std::min<int64_t>(cfg.index_topk, max_rows);
    if (K > 0) {
      int32_t* vis = fit_n(s.visible, M);
      std::fill(vis, vis + M, 0);
      s.row_keys.assign(static_cast<size_t>(M), backend::PagedCMat{nullptr, 0, di, 1});
      s.row_comp.assign(static_cast<size_t>(M), backend::PagedCMat{nullptr, 0, d, 1});
      for (const SequenceSpan& sq : in.sequences) {
        if (sq.count == 0) continue;
        const LayerCache& lc = layer_cache(sq);
        if (lc.idx.rows.size() == 0) continue;
        for (int64_t i = 0; i < sq.count; ++i) {
          vis[sq.begin + i] = static_cast<int32_t>((pos[sq.begin] + i + 1) / spec.compress_ratio);
          s.row_keys[static_cast<size_t>(sq.begin + i)] = lc.idx.rows.view();
          s.row_comp[static_cast<size_t>(sq.begin + i)] = lc.comp.rows.view();
        }
      }
      sel = static_cast<int32_t*>(s.sel.fit_bytes(static_cast<size_t>(M * K) * sizeof(int32_t)));
      // Query blocks bound the score matrix ([block, max_rows] floats) for long prompts.
      const int64_t block =
          std::clamp<int64_t>(kIndexerScoreFloats / max_rows, 1, kIndexerQueryBlock);
      for (int64_t i0 = 0; i0 < M; i0 += block) {
        const int64_t nb = std::min(block, M - i0);
        Mat scores(fit(s.scores, nb * max_rows), nb, max_rows);
        ops.indexer_scores_multi(iq.rows_slice(i0, nb), Hi, iw.rows_slice(i0, nb),
                                 std::span<const backend::PagedCMat>(s.row_keys)
                                     .subspan(static_cast<size_t>(i0), static_cast<size_t>(nb)),
                                 vis + i0, num.official, scores);
        ops.topk(scores, vis + i0, K, sel + i0 * K);
      }
    }
  }

  // Every query's keys by address, read in place by one sparse_attention_rows over every
  // sequence: columns [0, win_cols) the window (cached ring rows, then this step's rows),
  // [win_cols, width) the compressed rows (all visible ones for HCA; CSA's selection, filled in
  // on the backend from sel); nullptr = no key.
  int64_t win_cols = 0, comp_cols = 0;
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t T = pos[sq.begin] + sq.count;
    win_cols = std::max(win_cols, std::min(W, T));
    if (has_comp && !has_idx) comp_cols = std::max(comp_cols, T / spec.compress_ratio);
  }
  if (has_idx) comp_cols = K;
  const int64_t width = win_cols + comp_cols;
  std::vector<const float*>& table = s.key_rows;
  table.assign(static_cast<size_t>(M * width), nullptr);
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const LayerCache& lc = layer_cache(sq);
    const int64_t b = sq.begin, c = sq.count, L = pos[b];
    for (int64_t i = 0; i < c; ++i) {
      const int64_t p = L + i;
      const float** row = table.data() + (b + i) * width;
      int64_t j = 0;
      for (int64_t k = std::max<int64_t>(0, p - W + 1); k <= p; ++k) {
        row[j++] = k < L ? lc.window.row(k) : kv.row(b + k - L);
      }
      if (has_comp && !has_idx) {
        const int64_t vis = (p + 1) / spec.compress_ratio;
        for (int64_t r = 0; r < vis; ++r) row[win_cols + r] = lc.comp.rows.row(r);
      }
    }
  }
  const size_t table_bytes = table.size() * sizeof(const float*);
  auto* key_rows = static_cast<const float**>(s.key_table.fit_bytes(std::max<size_t>(table_bytes, 8)));
  ops.upload(key_rows, table.data(), table_bytes);
  if (sel != nullptr) ops.paged_row_addresses(sel, K, s.row_comp, key_rows + win_cols, width);

  const Mat o = rows.o.rows_slice(0, M);
  ops.sparse_attention_rows(rows.q.rows_slice(0, M), H, key_rows, width, d, w.sink,
                            1.0f / std::sqrt(static_cast<float>(d)), num.official, o);
  num.act(ops, o);
  // Only now may the window rings take this step's rows (one scatter for every sequence): the
  // attention above read ring slots a long chunk would overwrite.
  s.win_src.clear();
  s.win_dst.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t dropped = layer_cache(sq).window.claim(sq.count, s.win_dst);
    for (int64_t i = dropped; i < sq.count; ++i) s.win_src.push_back(kv.row(sq.begin + i));
  }
  ops.scatter_rows(s.win_src, s.win_dst, d);
}

void attention_output(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                      const int32_t* positions, const AttentionRows& r, Mat out,
                      AttentionBuffers& b) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = out.rows, H = cfg.num_heads, d = cfg.head_dim;
  const Mat o = r.o.rows_slice(0, M);
  ops.rope(o, H, d, positions, env.rope.for_kind(spec.attention), true);
  num.act(ops, o);

  // Grouped output projection: group g = heads [g·H/G, (g+1)·H/G) -> rows [g·r, (g+1)·r) of wo_a.
  // The reference runs wo_a as a BF16 einsum on the dequantized weight: no activation quant.
  const int64_t G = cfg.o_groups, R = cfg.o_lora_rank, gw = H / G * d;
  Mat z(fit(b.z, M * G * R), M, G * R);
  for (int64_t g = 0; g < G; ++g) {
    ops.linear(CMat(o).cols_slice(g * gw, gw), w.wo_a_groups[static_cast<size_t>(g)],
               z.cols_slice(g * R, R));
  }
  num.act(ops, z);
  ops.linear(z, w.wo_b, out, num.gemm());
  num.act(ops, out);
}

}  // namespace deepinfer::model
