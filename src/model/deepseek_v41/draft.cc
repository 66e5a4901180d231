// The DSpark drafter of V41Model (v41_model.h): its context (the target features projected into
// each stage's window, during the main forward) and its draft (a block of k positions from one
// anchor, eager or as recorded units).
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/deepseek_v41/v41_model.h"

namespace deepinfer::model::deepseek_v41 {

Expected<std::vector<DraftBlock>> V41Model::dspark_draft_all(std::span<const DSparkJob> jobs, int k,
                                                             bool logits) {
  try {
    return draft_unguarded(jobs, k, logits);
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(e,
                                "drafting " + std::to_string(k) + " DSpark tokens for " +
                                    std::to_string(jobs.size()) + " sequences",
                                "Shorter draft blocks or fewer sequences need less memory.");
  } catch (const parallel::CollectiveFailure& e) {
    return e.status().with_context("drafting DSpark tokens");
  }
}

template <typename Core>
void V41Model::draft_stages_recorded(std::span<const int32_t> ids, std::span<const int32_t> pos,
                                     int64_t Mb, const Core& core, Mat& nj, Mat& lg) {
  const DSparkWeights& dw = *w.dspark;
  const io::ModelConfig& c = cfg();
  const int64_t M = static_cast<int64_t>(ids.size()), D = c.hidden_size, n = c.hc_mult;
  const int64_t V = c.vocab_size;
  DenseBuffers& d = draft_recorded;
  const StepInputs in{ids, pos, {}, false};
  const RowInputs rows = recorded_rows(in, Mb, d);
  const CMat first = constant_rows(rec_onehot, Mb, false);  // sized before the units
  Mat X(fit(d.x, Mb * n * D), Mb, n * D), pre_prev(fit(d.pre_prev, Mb * n), Mb, n);
  Mat y(fit(d.y, Mb * D), Mb, D), logits(fit(rec_draft_logits, Mb * V), Mb, V);
  const std::vector<BlockWeights>& stages = dw.stages;
  const size_t unit = w.layers.size() + 1;  // after the main layers' units 0..L
  recording.run(unit, Mb, [&] {
    embed_streams(rows.ids, X);
    ops->copy_rows(first, nullptr, pre_prev);
    attention_in(stages[0], X, pre_prev, rows, d);
  });
  for (size_t s = 0; s < stages.size(); ++s) {
    core(s, attention_rows(env(), stages[s].attn, Mb, d.attn));
    recording.run(unit + 1 + s, Mb, [&] {
      attention_out_ffn(stages[s], X, pre_prev, rows, d);
      if (s + 1 < stages.size()) {
        attention_in(stages[s + 1], X, pre_prev, rows, d);
        return;
      }
      ops->hc_collapse(X, pre_prev, static_cast<int>(n), y);  // into d.y: the blocks are done
      num.act(*ops, y);
      num.rms_norm_act(*ops, y, &dw.norm, 0, y);
      lm_head(y, logits);
    });
  }
  recording.buffers_after_step(recorded_fingerprint());
  nj = y.rows_slice(0, M);
  lg = logits.rows_slice(0, M);
}

void V41Model::draft_context(const StepInputs& in, CMat feats, DenseBuffers& d) {
  backend::Ops& o = *ops;
  const io::ModelConfig& c = cfg();
  const DSparkWeights& dw = *w.dspark;
  const auto M = static_cast<int64_t>(in.token_ids.size());
  const int64_t D = c.hidden_size, hd = c.head_dim;
  // Eager, over the step's rows padded to their bucket where feats has them (a recorded step's
  // buffers do): a GEMM's first call at a row count is slow on a GPU (V4Model::head_rows), and
  // varlen steps meet many counts. The padded rows take the last real row's position; only real
  // rows reach the caches.
  const int64_t Mr = std::min(feats.rows, RecordedSteps::padded_count(M, o.record_max_rows()));
  feats = feats.rows_slice(0, Mr);
  ctx_positions.assign(in.positions.begin(), in.positions.end());
  if (M > 0) ctx_positions.resize(static_cast<size_t>(Mr), in.positions.back());
  Mat ctx(fit(d.ctx, Mr * D), Mr, D);
  o.linear(feats, dw.main_proj, ctx, num.gemm_rounded());
  num.rms_norm_act(o, ctx, &dw.main_norm, 0, ctx);
  Mat kv(fit(d.ctx_kv, Mr * hd), Mr, hd);
  for (size_t s = 0; s < dw.stages.size(); ++s) {
    const AttentionWeights& a = dw.stages[s].attn;
    o.linear(ctx, a.wkv, kv, num.gemm_rounded());
    o.kv_rows_finish(kv, a.kv_norm, num.eps, ctx_positions.data(), rope.main, num.official, hd,
                     kV41WindowFp8Block);
    attn.win_src.clear();
    attn.win_dst.clear();
    for (const SequenceSpan& sq : in.sequences) {
      // A sequence whose context lags (made or stepped while it was off) gets none.
      if (sq.count == 0 || sq.cache->draft_length() != sq.cache->length()) continue;
      const int64_t dropped = sq.cache->draft_layer(s).window.claim(sq.count, attn.win_dst);
      for (int64_t i = dropped; i < sq.count; ++i) attn.win_src.push_back(kv.row(sq.begin + i));
    }
    o.scatter_rows(attn.win_src, attn.win_dst, hd);
  }
}

Expected<std::vector<DraftBlock>> V41Model::draft_unguarded(std::span<const DSparkJob> jobs, int k,
                                                            bool keep_logits) {
  if (!w.dspark) {
    return failed_precondition("checkpoint " + ckpt.model_dir() +
                               " has no DSpark drafter (no mtp.* tensors)");
  }
  const io::ModelConfig& c = cfg();
  if (k < 1 || k > c.dspark.block_size) {
    return invalid_argument("dspark_draft: k = " + std::to_string(k) + " is outside [1, " +
                            std::to_string(c.dspark.block_size) +
                            "] (dspark_block_size, the block the drafter was trained on)");
  }
  for (const DSparkJob& job : jobs) {
    if (job.cache == nullptr) return invalid_argument("dspark_draft: a job without a sequence");
    if (job.anchor < 0 || job.anchor >= c.vocab_size) {
      return out_of_range("dspark_draft: anchor token " + std::to_string(job.anchor) +
                          " is outside the vocabulary");
    }
    for (int32_t t : job.forced) {
      if (t < 0 || t >= c.vocab_size) {
        return out_of_range("dspark_draft: forced token " + std::to_string(t) +
                            " is outside the vocabulary");
      }
    }
    const SequenceCache& cache = *job.cache;
    if (cache.draft_length() != cache.length()) {
      return failed_precondition(
          "dspark_draft: the drafter's context (" + std::to_string(cache.draft_length()) +
          " positions) does not match the sequence (" + std::to_string(cache.length()) + ")");
    }
  }
  std::vector<DraftBlock> outs(jobs.size());
  if (jobs.empty()) return outs;
  backend::Ops& o = *ops;
  const DSparkWeights& dw = *w.dspark;
  const auto N = static_cast<int64_t>(jobs.size());
  const int64_t K = k, D = c.hidden_size, n = c.hc_mult, hd = c.head_dim, H = c.num_heads;
  const int64_t W = c.sliding_window, V = c.vocab_size, r = c.dspark.markov_rank;
  const int64_t M = N * K;
  // Blocks (spec §6.7 item 10): job e's rows e·K .. e·K + k - 1, slot 0 its anchor, then noise
  // tokens, at positions a_e .. a_e + k - 1.
  std::vector<int32_t> ids(static_cast<size_t>(M), static_cast<int32_t>(c.dspark.noise_token_id));
  std::vector<int32_t> pos(static_cast<size_t>(M));
  // After bounded replay the context rings start at the first position they computed.
  std::vector<int64_t> ctx_first(static_cast<size_t>(N)), ctx_n(static_cast<size_t>(N));
  int64_t widest = 0;
  for (int64_t e = 0; e < N; ++e) {
    const SequenceCache& cache = *jobs[static_cast<size_t>(e)].cache;
    const int64_t a = cache.length();
    ids[static_cast<size_t>(e * K)] = jobs[static_cast<size_t>(e)].anchor;
    for (int64_t j = 0; j < K; ++j)
      pos[static_cast<size_t>(e * K + j)] = static_cast<int32_t>(a + j);
    const int64_t first = std::max<int64_t>(cache.draft_layer(0).window.oldest(), a - W);
    ctx_first[static_cast<size_t>(e)] = first;
    ctx_n[static_cast<size_t>(e)] = a - first;
    widest = std::max(widest, a - first);
  }
  // Stage s's attention core (spec §6.7 item 10): every slot sees its stage's context rows
  // [a - W, a) and every slot of its own block; shorter contexts than the widest leave absent
  // (nullptr) keys at the end of their rows, which the attention skips (the same value as
  // without them). Only the M real rows of `ar` (a recorded draft pads them).
  const auto core = [&](size_t s, const AttentionRows& ar) {
    const BlockWeights& b = dw.stages[s];
    const int64_t width = widest + K;
    std::vector<const float*>& table = attn.key_rows;
    table.assign(static_cast<size_t>(M * width), nullptr);
    for (int64_t e = 0; e < N; ++e) {
      const LayerCache& ring = jobs[static_cast<size_t>(e)].cache->draft_layer(s);
      const int64_t first = ctx_first[static_cast<size_t>(e)], cn = ctx_n[static_cast<size_t>(e)];
      for (int64_t j = 0; j < K; ++j) {
        const float** row = table.data() + (e * K + j) * width;
        for (int64_t p = 0; p < cn; ++p) row[p] = ring.window.row(first + p);
        for (int64_t q = 0; q < K; ++q) row[cn + q] = ar.kv.row(e * K + q);
      }
    }
    const size_t bytes = table.size() * sizeof(const float*);
    auto* key_rows =
        static_cast<const float**>(attn.key_table.fit_bytes(std::max<size_t>(bytes, 8)));
    o.upload(key_rows, table.data(), bytes);
    const Mat ob = ar.o.rows_slice(0, M);
    num.sparse_attention_rows_act(o, ar.q.rows_slice(0, M), H, key_rows, width, hd, b.attn.sink,
                                  1.0f / std::sqrt(static_cast<float>(hd)), ob);
  };
  // n_j = norm(collapse(streams)), base logits = lm_head(n_j) (FP32).
  Mat nj, lg;
  const int64_t Mb = exchange || tp_gather || dw.stages.empty() ? 0 : recording.bucket(M);
  if (Mb > 0) {
    draft_stages_recorded(ids, pos, Mb, core, nj, lg);
  } else {
    DenseBuffers& d = draft;
    Mat X(fit(d.x, M * n * D), M, n * D);
    Mat pre_prev(fit(d.pre_prev, M * n), M, n);
    embed_streams(ids.data(), X);
    o.copy_rows(constant_rows(onehot, M, false), nullptr, pre_prev);
    RowInputs rows;
    rows.ids = ids.data();
    rows.positions = pos.data();
    for (size_t s = 0; s < dw.stages.size(); ++s) {
      block(dw.stages[s], X, pre_prev, rows, d, [&](const AttentionRows& ar) { core(s, ar); });
    }
    nj = Mat(fit(d.y, M * D), M, D);
    o.hc_collapse(X, pre_prev, static_cast<int>(n), nj);
    num.act(o, nj);
    num.rms_norm_act(o, nj, &dw.norm, 0, nj);
    lg = Mat(fit(logits_buf, M * V), M, V);
    lm_head(nj, lg);
  }

  // The Markov and confidence heads read the previous token, chosen left to right: slot j's
  // logits add T_j = head · embed[x_{j-1}] (x_{-1} = the anchor), its confidence is
  // w · [n_j ; embed[x_{j-1}]]. One batched step per slot over every job. The sum and its
  // argmax (or, for a job with draws, its draw) stay in the backend's memory (Ops::sample, greedy:
  // the lowest id of the maximum, as the host's max_element): only the N chosen ids come back per
  // slot, and the confidences once at the end. On a GPU the [N, vocab] rows going to the host were
  // most of a draft's time. Sampled drafts (DSparkJob::draws) need their distributions: those jobs
  // keep their logits.
  std::vector<uint8_t> keeps(static_cast<size_t>(N));
  bool any_keep = false;
  for (int64_t e = 0; e < N; ++e) {
    const size_t es = static_cast<size_t>(e);
    keeps[es] = keep_logits || !jobs[es].draws.empty();
    any_keep = any_keep || keeps[es];
    DraftBlock& out = outs[es];
    if (keeps[es]) out.logits.resize(static_cast<size_t>(K * V));
    out.confidence.resize(static_cast<size_t>(K));
    out.tokens.resize(static_cast<size_t>(K));
  }
  // The two heads' GEMMs run over the jobs padded to their bucket (Nb rows; the extra rows hold
  // whatever their buffers do and are dropped): a GEMM's first call at a row count is slow on a
  // GPU (cuBLAS takes dense GEMMs from 5 rows; V4Model::head_rows), and the jobs' count changes as
  // requests come and go. A slot's padded confidences spill into the next slot's rows, written
  // after it, and past the last slot into room of their own.
  const int64_t Nb = RecordedSteps::padded_count(N, o.record_max_rows());
  Mat cat_all(fit(draft_cat, Nb * (D + r)), Nb, D + r);
  Mat cat = cat_all.rows_slice(0, N);
  Mat emb = cat.cols_slice(D, r);
  Mat tj_all(fit(markov, Nb * V), Nb, V);
  Mat tj = tj_all.rows_slice(0, N);
  Mat lj(fit(markov_sum, N * V), N, V);
  float* conf_room = fit(draft_conf, K * N + Nb - N);
  Mat conf_all(conf_room, K * N, 1);                              // row j·N + e: slot j of job e
  std::vector<sample::SampleSpec> specs(static_cast<size_t>(N));  // greedy by default
  std::vector<float> lrow;
  std::vector<int32_t> prev(static_cast<size_t>(N)), slot_rows(static_cast<size_t>(N)),
      chosen(static_cast<size_t>(N));
  // A slot whose logits are not finite ends its job's proposal there (kSampleNonFinite).
  std::vector<int64_t> ends(static_cast<size_t>(N), K);
  for (int64_t e = 0; e < N; ++e)
    prev[static_cast<size_t>(e)] = jobs[static_cast<size_t>(e)].anchor;
  for (int64_t j = 0; j < K; ++j) {
    o.embed(prev.data(), N, dw.markov_embed, emb);
    num.act(o, emb);
    o.linear(cat_all.cols_slice(D, r), dw.markov_head, tj_all, num.rounded({}));
    for (int64_t e = 0; e < N; ++e)
      slot_rows[static_cast<size_t>(e)] = static_cast<int32_t>(e * K + j);
    o.copy_rows(CMat(nj), slot_rows.data(), cat.cols_slice(0, D));
    o.linear(cat_all, confidence, Mat(conf_room + j * N, Nb, 1));
    o.copy_rows(CMat(lg), slot_rows.data(), lj);
    o.add(lj, tj, lj);  // base + T_j, in that order (FP32, as the host sum was)
    for (int64_t e = 0; e < N; ++e) {
      const std::span<const sample::SampleSpec> draws = jobs[static_cast<size_t>(e)].draws;
      specs[static_cast<size_t>(e)] = j < static_cast<int64_t>(draws.size())
                                          ? draws[static_cast<size_t>(j)]
                                          : sample::SampleSpec{};
    }
    o.sample(lj, specs, chosen.data());
    if (any_keep) backend::download_mat(o, lj, lrow);
    for (int64_t e = 0; e < N; ++e) {
      DraftBlock& out = outs[static_cast<size_t>(e)];
      const size_t es = static_cast<size_t>(e);
      if (keeps[es]) {
        std::copy(lrow.begin() + e * V, lrow.begin() + (e + 1) * V, out.logits.begin() + j * V);
      }
      int32_t t = chosen[es];
      if (t < 0) {
        ends[es] = std::min(ends[es], j);
        t = 0;  // any valid id: the slots after the end are dropped
      }
      out.tokens[static_cast<size_t>(j)] = t;
      const std::span<const int32_t> forced = jobs[es].forced;
      prev[es] = j < static_cast<int64_t>(forced.size()) ? forced[static_cast<size_t>(j)] : t;
    }
  }
  std::vector<float> crow;
  backend::download_mat(o, conf_all, crow);
  for (int64_t e = 0; e < N; ++e) {
    DraftBlock& out = outs[static_cast<size_t>(e)];
    for (int64_t j = 0; j < K; ++j)
      out.confidence[static_cast<size_t>(j)] = crow[static_cast<size_t>(j * N + e)];
    const auto end = static_cast<size_t>(ends[static_cast<size_t>(e)]);
    out.tokens.resize(end);
    out.confidence.resize(end);
    if (keeps[static_cast<size_t>(e)]) out.logits.resize(end * static_cast<size_t>(V));
  }
  return outs;
}

}  // namespace deepinfer::model::deepseek_v41
