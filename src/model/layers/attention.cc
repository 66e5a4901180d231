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
  const int64_t H = w.heads, d = env.config.head_dim;
  ops.linear(u, w.wq_a, qr, num.gemm_rounded());
  num.rms_norm_act(ops, qr, &w.q_norm, 0, qr);
  if (H > 0) {  // a tensor-parallel rank may hold no heads (more ranks than groups)
    ops.linear(qr, w.wq_b, q, num.gemm_rounded());
    if (num.v41) {  // V4.1 has no per-head q norm (spec §6.1)
      num.rope_act(ops, q, H, d, pos, freqs, false);
    } else {
      ops.q_heads_finish(q, H, d, num.eps, pos, freqs, num.official);
    }
  }

  ops.linear(u, w.wkv, kv, num.gemm_rounded());
  // kv_norm, RoPE and the FP8 round trip: V4.1 in every forward over all channels (spec §6.7
  // item 6), V4 in official semantics over the non-RoPE channels.
  const int64_t nope = d - 2 * static_cast<int64_t>(freqs.size());
  ops.kv_rows_finish(kv, w.kv_norm, num.eps, pos, freqs, num.official,
                     num.v41 ? d : (num.official ? nope : 0),
                     num.v41 ? kV41WindowFp8Block : kKvFp8Block);
}

// Indexer query and head weights (spec §2.5 steps 1-2) for all rows.
void project_indexer(const LayerEnv& env, const IndexerWeights& w, std::span<const float> freqs,
                     CMat u, CMat qr, const int32_t* pos, Mat iq, Mat iw) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const int64_t Hi = env.config.index_n_heads, di = env.config.index_head_dim;
  ops.linear(qr, w.wq_b, iq, num.gemm_rounded());
  num.rope_act(ops, iq, Hi, di, pos, freqs, false);
  if (num.v41) {  // MXFP4 in every forward, no Hadamard (spec §6.7 items 4, 6)
    ops.fake_quant_fp4(iq, kIndexerFp4Block);
  } else if (num.official) {
    ops.hadamard(iq, di);
    ops.round_bf16(iq);
    ops.fake_quant_fp4(iq, kIndexerFp4Block);
  }
  ops.linear(u, w.weights_proj, iw, num.rounded(num.gemm_on_act()));
  // V4.1's reference multiplies by d_I^-1/2 · H_I^-1/2 (two double factors, one FP32 scalar).
  const float wscale = num.v41 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(di)) /
                                                    std::sqrt(static_cast<double>(Hi)))
                               : 1.0f / std::sqrt(static_cast<float>(di) * static_cast<float>(Hi));
  ops.scale(iw, wscale);
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
  const int64_t H = w.heads, d = cfg.head_dim, ql = cfg.q_lora_rank;
  AttentionRows r;
  r.qr = Mat(fit(b.qr, M * ql), M, ql);
  r.q = Mat(fit(b.q, M * H * d), M, H * d);
  r.kv = Mat(fit(b.kv, M * d), M, d);
  r.o = Mat(fit(b.o, M * H * d), M, H * d);
  if (w.compressor.has_value()) {
    const int64_t cw = w.compressor->width();
    r.ckv = Mat(fit(b.comp_kv, M * cw), M, cw);
    if (w.compressor->wgate) r.cg = Mat(fit(b.comp_gate, M * cw), M, cw);
  }
  if (w.indexer.has_value()) {
    const int64_t Hi = cfg.index_n_heads, di = cfg.index_head_dim;
    if (w.indexer->compressor) {
      const int64_t iwd = w.indexer->compressor->width();
      r.ikv = Mat(fit(b.idx_kv, M * iwd), M, iwd);
      r.ig = Mat(fit(b.idx_gate, M * iwd), M, iwd);
    }
    r.iq = Mat(fit(b.iq, M * Hi * di), M, Hi * di);
    r.iw = Mat(fit(b.iw, M * Hi), M, Hi);
  }
  return r;
}

void attention_project(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       CMat u, const RowInputs& rows, AttentionBuffers& b, const AttentionRows& r) {
  const int32_t* pos = rows.positions;
  project_qkv(env, w, env.rope.for_kind(spec.attention), u, pos, r.qr, r.q, r.kv);
  if (w.compressor.has_value()) {
    const CompressorWeights& cw = *w.compressor;
    compressor_project(env.ops, cw, u, env.num.gemm_on_act(),
                       cw.ape != nullptr ? rows.ape_rows(cw.ratio) : nullptr, r.ckv, r.cg, b.ape);
  }
  if (w.indexer.has_value()) {
    if (w.indexer->compressor) {
      const CompressorWeights& icw = *w.indexer->compressor;
      compressor_project(env.ops, icw, u, env.num.gemm_on_act(), rows.ape_rows(icw.ratio), r.ikv,
                         r.ig, b.ape);
    }
    project_indexer(env, *w.indexer, env.rope.compress, u, r.qr, pos, r.iq, r.iw);
  }
}

void select_compressed(const LayerEnv& env, CMat iq, CMat iw, const StepInputs& in,
                       const LayerOf& keys_of, const SelectOpts& opts, AttentionScratch& s) {
  backend::Ops& ops = env.ops;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = env.queries(static_cast<int64_t>(in.token_ids.size()));
  const int64_t Hi = cfg.index_n_heads, di = cfg.index_head_dim;
  const int32_t* pos = in.positions.data();
  // Top-k of the visible index keys per query, over every sequence of the step in one
  // indexer_scores_multi + topk per block of rows. The selection stays in backend memory
  // (s.sel, [M, K], row stride K = the largest per-sequence k; a row's entries past its visible
  // count are -1): a device backend never returns it to the host.
  int64_t max_rows = 0;
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count > 0) max_rows = std::max(max_rows, keys_of(sq).idx.rows.size());
  }
  const int64_t K = std::min<int64_t>(opts.topk, max_rows);
  s.sel_k = K;
  if (K == 0) return;
  int32_t* vis = fit_n(s.visible, M);
  std::fill(vis, vis + M, 0);
  s.row_keys.assign(static_cast<size_t>(M), backend::PagedCMat{nullptr, 0, di, 1});
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const LayerCache& lc = keys_of(sq);
    if (lc.idx.rows.size() == 0) continue;
    for (int64_t i = 0; i < sq.count; ++i) {
      const int64_t q = env.query(sq.begin + i);
      if (q < 0) continue;
      vis[q] = static_cast<int32_t>((pos[sq.begin] + i + 1) / opts.ratio);
      s.row_keys[static_cast<size_t>(q)] = lc.idx.rows.view();
    }
  }
  auto* sel = static_cast<int32_t*>(s.sel.fit_bytes(static_cast<size_t>(M * K) * sizeof(int32_t)));
  const int64_t NB = opts.n_blocks;
  int32_t* cand = nullptr;
  if (opts.candidates != SelectOpts::Candidates::kNone) {
    const size_t bytes = static_cast<size_t>(M * NB) * sizeof(int32_t);
    cand = static_cast<int32_t*>(
        opts.candidates == SelectOpts::Candidates::kMake ? s.cand.fit_bytes(bytes) : s.cand.data());
    DI_CHECK(cand != nullptr && s.cand.bytes() >= bytes);
  }
  // Query blocks bound the score matrix ([block, max_rows] floats) for long prompts.
  const int64_t block = std::clamp<int64_t>(kIndexerScoreFloats / max_rows, 1, kIndexerQueryBlock);
  for (int64_t i0 = 0; i0 < M; i0 += block) {
    const int64_t nb = std::min(block, M - i0);
    Mat scores(fit(s.scores, nb * max_rows), nb, max_rows);
    ops.indexer_scores_multi(iq.rows_slice(i0, nb), Hi, iw.rows_slice(i0, nb),
                             std::span<const backend::PagedCMat>(s.row_keys)
                                 .subspan(static_cast<size_t>(i0), static_cast<size_t>(nb)),
                             vis + i0, env.num.official, scores);
    // The candidate source's own top-k is not restricted; the index sources after it score only
    // inside its blocks (spec §6.7 item 3).
    if (opts.candidates == SelectOpts::Candidates::kMake) {
      ops.candidate_blocks(scores, vis + i0, opts.block_size, NB, cand + i0 * NB);
    } else if (opts.candidates == SelectOpts::Candidates::kUse) {
      ops.restrict_to_blocks(scores, vis + i0, cand + i0 * NB, NB, opts.block_size);
    }
    ops.topk(scores, vis + i0, K, sel + i0 * K);
  }
}

namespace {

// Where each query's keys sit in the key-address table (attend): columns [0, win_cols) the
// window, [win_cols, width) the compressed rows.
struct KeyColumns {
  int64_t win_cols = 0, width = 0;
};

// Every query's keys by address, read in place by one sparse_attention_rows over every
// sequence: columns [0, win_cols) the window (cached ring rows, then this step's rows),
// [win_cols, width) the compressed rows (all visible ones, or, when `selected`, the selection
// filled in on the backend from s.sel); nullptr = no key. The host table is s.key_rows.
KeyColumns fill_key_table(const LayerEnv& env, const AttentionRows& r, const StepInputs& in,
                          const LayerOf& window_of, const LayerOf& comp_of, int ratio,
                          bool all_visible, bool selected, AttentionScratch& s) {
  const io::ModelConfig& cfg = env.config;
  const int64_t M = env.queries(static_cast<int64_t>(in.token_ids.size()));
  const int64_t d = cfg.head_dim, W = cfg.sliding_window;
  const int32_t* pos = in.positions.data();
  const CMat kv = r.kv;
  int64_t win_cols = 0, comp_cols = 0;
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t T = pos[sq.begin] + sq.count;
    win_cols = std::max(win_cols, std::min(W, T));
    if (comp_of && all_visible) comp_cols = std::max(comp_cols, T / ratio);
  }
  if (selected) comp_cols = s.sel_k;
  const int64_t width = win_cols + comp_cols;
  std::vector<const float*>& table = s.key_rows;
  table.assign(static_cast<size_t>(M * width), nullptr);
  if (selected) s.row_comp.assign(static_cast<size_t>(M), backend::PagedCMat{nullptr, 0, d, 1});
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const LayerCache& lc = window_of(sq);
    const PagedRows* comp = comp_of ? &comp_of(sq).comp.rows : nullptr;
    const int64_t b = sq.begin, c = sq.count, L = pos[b];
    DI_CHECK(lc.window.size() == L);
    // A ring keeps W + rollback rows, so its oldest row is never inside a window, except
    // after bounded replay skipped or rebuilt it (cache.h RowRing::skip): the window then
    // starts at the first row the layer computed (the replay's approximation).
    const int64_t first = lc.window.oldest();
    for (int64_t i = 0; i < c; ++i) {
      const int64_t qi = env.query(b + i);
      if (qi < 0) continue;  // a peer's query row (its keys are this step's kv rows all the same)
      const int64_t p = L + i;
      const float** row = table.data() + qi * width;
      int64_t j = 0;
      for (int64_t k = std::max<int64_t>(first, p - W + 1); k <= p; ++k) {
        row[j++] = k < L ? lc.window.row(k) : kv.row(b + k - L);
      }
      if (comp != nullptr && all_visible) {
        const int64_t vis = (p + 1) / ratio;
        for (int64_t q = 0; q < vis; ++q) row[win_cols + q] = comp->row(q);
      }
      if (selected && comp->size() > 0) s.row_comp[static_cast<size_t>(qi)] = comp->view();
    }
  }
  return {win_cols, width};
}

// The window rings take this step's rows, one scatter for every sequence. Only after the
// attention: it read ring slots a long chunk would overwrite.
void write_windows(const LayerEnv& env, const AttentionRows& r, const StepInputs& in,
                   const LayerOf& window_of, AttentionScratch& s) {
  const CMat kv = r.kv;
  s.win_src.clear();
  s.win_dst.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    const int64_t dropped = window_of(sq).window.claim(sq.count, s.win_dst);
    for (int64_t i = dropped; i < sq.count; ++i) s.win_src.push_back(kv.row(sq.begin + i));
  }
  env.ops.scatter_rows(s.win_src, s.win_dst, env.config.head_dim);
}

}  // namespace

void attend(const LayerEnv& env, const AttentionWeights& w, const AttentionRows& r,
            const StepInputs& in, const LayerOf& window_of, const LayerOf& comp_of, int ratio,
            bool all_visible, AttentionScratch& s) {
  backend::Ops& ops = env.ops;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = env.queries(static_cast<int64_t>(in.token_ids.size()));
  const int64_t H = w.heads, d = cfg.head_dim;
  DI_CHECK(r.q.rows >= M);
  const bool selected = comp_of && !all_visible && s.sel_k > 0;
  const KeyColumns cols =
      fill_key_table(env, r, in, window_of, comp_of, ratio, all_visible, selected, s);
  const std::vector<const float*>& table = s.key_rows;
  const size_t table_bytes = table.size() * sizeof(const float*);
  auto* key_rows =
      static_cast<const float**>(s.key_table.fit_bytes(std::max<size_t>(table_bytes, 8)));
  ops.upload(key_rows, table.data(), table_bytes);
  if (selected) {
    ops.paged_row_addresses(static_cast<const int32_t*>(s.sel.data()), s.sel_k, s.row_comp,
                            key_rows + cols.win_cols, cols.width);
  }

  const Mat o = r.o.rows_slice(0, M);
  if (H > 0 && M > 0) {  // a context-parallel rank may have no query rows in a step
    env.num.sparse_attention_rows_act(ops, r.q.rows_slice(0, M), H, key_rows, cols.width, d, w.sink,
                                      1.0f / std::sqrt(static_cast<float>(d)), o);
  }
  write_windows(env, r, in, window_of, s);
}

void attention_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                    bool mtp, size_t cache_index, const AttentionRows& rows, const StepInputs& in,
                    AttentionScratch& s) {
  const int64_t M = env.queries(static_cast<int64_t>(in.token_ids.size()));
  const int32_t* pos = in.positions.data();
  const std::span<const float> cfreqs = env.rope.compress;
  const bool has_comp = w.compressor.has_value();
  const bool has_idx = w.indexer.has_value();
  DI_CHECK(rows.q.rows >= M);
  const LayerOf layer_cache = [&](const SequenceSpan& sq) -> LayerCache& {
    return mtp ? sq.cache->draft_layer(cache_index) : sq.cache->layer(cache_index);
  };

  // Every sequence's compressors take this step's rows first: the selection below scores all
  // sequences' index keys at once.
  std::vector<CompressorJob>& comp_jobs = s.comp_jobs;
  std::vector<CompressorJob>& idx_jobs = s.idx_jobs;
  comp_jobs.clear();
  idx_jobs.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0) continue;
    LayerCache& lc = layer_cache(sq);
    const int64_t L = pos[sq.begin];
    comp_jobs.push_back({&lc.comp, sq.begin, sq.count, L});
    idx_jobs.push_back({&lc.idx, sq.begin, sq.count, L});
  }
  if (has_comp) {
    compressor_advance(env.ops, env.num, *w.compressor, CompressedRowKind::kAttention, cfreqs,
                       rows.ckv, rows.cg, comp_jobs, s.comp);
  }
  if (has_idx) {
    compressor_advance(env.ops, env.num, *w.indexer->compressor, CompressedRowKind::kIndexKey,
                       cfreqs, rows.ikv, rows.ig, idx_jobs, s.comp);
    SelectOpts so;
    so.ratio = spec.compress_ratio;
    so.topk = env.config.index_topk;
    select_compressed(env, rows.iq, rows.iw, in, layer_cache, so, s);
  }
  // CSA attends to its selection, HCA to every visible compressed row, SWA to its window.
  attend(env, w, rows, in, layer_cache, has_comp ? layer_cache : LayerOf{}, spec.compress_ratio,
         has_comp && !has_idx, s);
}

void attention_output(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                      const int32_t* positions, const AttentionRows& r, Mat out,
                      AttentionBuffers& b) {
  backend::Ops& ops = env.ops;
  const Numerics& num = env.num;
  const io::ModelConfig& cfg = env.config;
  const int64_t M = out.rows, H = w.heads, d = cfg.head_dim;
  const Mat o = r.o.rows_slice(0, M);
  if (H > 0) num.rope_act(ops, o, H, d, positions, env.rope.for_kind(spec.attention), true);

  // Grouped output projection: group g = heads [g·H/G, (g+1)·H/G) -> rows [g·r, (g+1)·r) of wo_a,
  // one block-diagonal product (Ops::linear_grouped), rounded to BF16 in its store. The reference
  // runs wo_a as a BF16 einsum on the dequantized weight: no activation quant. Split: this
  // rank's G groups of its H heads (wo_a holds their rows; none on a rank past the groups).
  const int64_t R = cfg.o_lora_rank, G = w.wo_a.n / R;
  DI_CHECK(G * R == w.wo_a.n && o.cols == G * w.wo_a.k);
  Mat z(fit(b.z, M * G * R), M, G * R);
  if (G > 0) ops.linear_grouped(o, w.wo_a, G, z, num.rounded(num.gemm_on_act()));
  if (!w.tp.split) {
    ops.linear(z, w.wo_b, out, num.gemm_rounded());
    return;
  }
  // Every group's output on every rank, then this rank's hidden channels of wo_b, gathered.
  DI_CHECK(env.tp != nullptr);
  const int64_t Gall = cfg.o_groups;
  Mat z_all(fit(b.z_all, M * Gall * R), M, Gall * R);
  env.tp->gather_cols(z, Gall, R, z_all, "attention output groups");
  Mat part(fit(b.out_part, M * w.tp.hidden.count), M, w.tp.hidden.count);
  if (M > 0 && part.cols > 0) ops.linear(z_all, w.wo_b, part, num.gemm_rounded());
  env.tp->gather_cols(part, out.cols, 1, out, "attention output projection");
}

}  // namespace deepinfer::model
