// DeepSeek-V4.1 (see model.h; the class is in v41_model.h): load, the block composition, the
// forward and the head; the DSpark drafter is in draft.cc and the context-parallel layers in
// layers_context_parallel.cc. Composition only: every numerical step is an op call or one of the
// shared layer pieces (model/layers) or V4.1's own (attention.cc, engram.cc).
//
// Steps of at most Ops::record_max_rows() rows run padded to a bucket, their dense parts as
// recorded units (CUDA graphs on the GPU; model/recorded_steps.h), like V4's: the attention
// cores and the Engram gathers run eagerly between the units.
#include <algorithm>
#include <string>

#include "base/check.h"
#include "model/bounded_replay.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/layers/expert_rebind.h"
#include "model/step_check.h"
#include "model/step_hidden.h"
#include "sample/sample_spec.h"

namespace deepinfer::model::deepseek_v41 {

Expected<ExpertMoves> V41Model::set_expert_placements(
    std::vector<parallel::ExpertPlacement> placements) {
  if (!exchange) return Model::set_expert_placements(std::move(placements));
  std::vector<MoeWeights*> moe;
  for (Block& b : w.layers) moe.push_back(&b.base.moe);
  return rebind_routed_experts(ckpt, *ops, w.store, moe, *exchange, std::move(placements));
}

std::vector<std::pair<std::string, double>> V41Model::host_counters() const {
  if (!engram_lookup) return {};
  const EngramLookup::Stats& e = engram_lookup->stats();
  return {{"engram_gather_seconds", e.seconds},
          {"engram_upload_bytes", static_cast<double>(e.bytes)},
          {"engram_layer_gathers", static_cast<double>(e.layer_gathers)}};
}

Status V41Model::forward(const StepInputs& in, StepOutputs& out) {
  return guarded_forward(in, [&] { return forward_unguarded(in, out); });
}

CMat V41Model::constant_rows(backend::Buffer& b, int64_t rows, bool mean) {
  const int64_t n = cfg().hc_mult;
  if (b.bytes() < static_cast<size_t>(rows * n) * sizeof(float)) {
    const int64_t cap = std::max<int64_t>(rows, 2 * static_cast<int64_t>(b.bytes() / 4 / n));
    std::vector<float> h(static_cast<size_t>(cap * n), 0.0f);
    for (int64_t r = 0; r < cap; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        h[static_cast<size_t>(r * n + i)] = mean ? 1.0f / static_cast<float>(n) : (i == 0);
      }
    }
    ops->upload(b.fit_bytes(h.size() * sizeof(float)), h.data(), h.size() * sizeof(float));
  }
  return CMat(b.as<const float>(), rows, n);
}

Status V41Model::check_replay_step(const StepInputs& in) const {
  if (has_upper_skip(in)) DI_TRY(bounded_replay_supported(cfg()));
  for (const SequenceSpan& sq : in.sequences) {
    const int64_t held = sq.cache->compressed_until(), L = sq.cache->length();
    if (held > L && held < L + sq.count) {
      return invalid_argument("a window replay must feed exactly the positions up to " +
                              std::to_string(held) +
                              " whose compressed rows it restored (the "
                              "step feeds " +
                              std::to_string(L) + ".." + std::to_string(L + sq.count) + ")");
    }
  }
  return {};
}

void V41Model::attention_in(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows,
                            DenseBuffers& d) {
  backend::Ops& o = *ops;
  const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
  Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D);
  Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
  Mat pre_a(fit(d.pre_a, M * n), M, n);
  num.hc_pre_norm_act(o, X, hc_params(b.hc_attn), pre_prev, b.attn_norm, y, pre_a, post, comb, u);
  attention_project(env(), b.attn, b.spec, u, rows, d.attn,
                    attention_rows(env(), b.attn, M, d.attn));
}

void V41Model::attention_out_ffn(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows,
                                 DenseBuffers& d) {
  backend::Ops& o = *ops;
  const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
  Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D), out(fit(d.sub, M * D), M, D);
  Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
  Mat pre_a(fit(d.pre_a, M * n), M, n);
  attention_output(env(), b.attn, b.spec, rows.positions, attention_rows(env(), b.attn, M, d.attn),
                   out, d.attn);
  num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);

  num.hc_pre_norm_act(o, X, hc_params(b.hc_ffn), pre_a, b.ffn_norm, y, pre_prev, post, comb, u);
  moe_forward(o, cfg(), num, b.moe, u, rows.ids, out, d.moe, exchange.get(), tp_gather.get());
  num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);
}

void V41Model::engram(const EngramWeights& e, Mat X, DenseBuffers& d,
                      const backend::Buffer* looked_up) {
  const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
  const int64_t width = engram_lookup->columns() * cfg().engram.head_dim;
  const backend::Buffer& in_rows =
      looked_up ? *looked_up : d.engram_in[static_cast<size_t>(e.index)];
  const CMat rows(in_rows.as<const float>(), M, width);
  Mat kv(fit(d.engram_kv, M * (n + 1) * D), M, (n + 1) * D);
  ops->linear(rows, e.wkv, kv, num.gemm());
  num.act(*ops, kv);
  ops->engram_gate(X, kv, CMat(e.w_prod, n, D), static_cast<int>(n), num.eps);
  num.act(*ops, X);
}

void V41Model::gather_engram(size_t l, const StepInputs& in, int64_t rows, DenseBuffers& d) {
  const Block& b = w.layers[l];
  if (!b.engram) return;
  const auto j = static_cast<size_t>(b.engram->index);
  while (d.engram_in.size() <= j) d.engram_in.emplace_back(*ops);
  engram_lookup->gather_layer(*ops, in, *b.engram, rows, d.engram_in[j]);
}

void V41Model::before_block(size_t l, Mat X, Mat feats, backend::Buffer& quarter_rows,
                            DenseBuffers& d, const backend::Buffer* engram_rows) {
  const Block& b = w.layers[l];
  if (b.engram) engram(*b.engram, X, d, engram_rows);
  if (!w.dspark || !keep_draft_context_) return;
  const std::vector<int>& targets = cfg().dspark.target_layer_ids;
  const auto t = std::find(targets.begin(), targets.end(), static_cast<int>(l));
  if (t == targets.end()) return;
  const int64_t D = cfg().hidden_size, n = cfg().hc_mult;
  Mat f = feats.cols_slice((t - targets.begin()) * D, D);
  ops->hc_collapse(X, constant_rows(quarter_rows, X.rows, true), static_cast<int>(n), f);
  num.act(*ops, f);
}

void V41Model::layers_eager(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats) {
  DenseBuffers& d = step;
  RowInputs rows;
  rows.ids = in.token_ids.data();
  rows.positions = in.positions.data();
  const StepInputs* cur = &in;
  embed_streams(rows.ids, X);
  ops->copy_rows(constant_rows(onehot, X.rows, false), nullptr, pre_prev);  // layer 0: stream 0
  for (size_t l = 0; l <= w.layers.size(); ++l) {
    if (upper.active && l == first_upper) {
      enter_upper(in, X, pre_prev, feats, d);
      cur = &upper.in;
      rows.ids = upper.ids.data();
      rows.positions = upper.pos.data();
    }
    // A step whose every row skips the upper layers (chunks before the kept suffix) ends here:
    // no op runs on zero rows (under expert parallelism the rest only serve the peers).
    if (l == w.layers.size()) break;
    if (upper.active && l >= first_upper && upper.rows.empty()) {
      if (exchange) serve_experts_only(l);
      break;
    }
    const Block& b = w.layers[l];
    gather_engram(l, *cur, X.rows, d);
    before_block(l, X, feats, quarter, d);
    block(b.base, X, pre_prev, rows, d, [&](const AttentionRows& r) {
      csa2_core(env(), b.base.attn, b.base.spec, l, r, *cur, attn, cs);
    });
  }
}

void V41Model::enter_upper(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats,
                           DenseBuffers& d) {
  backend::Ops& o = *ops;
  const auto K = static_cast<int64_t>(upper.rows.size());
  const int32_t* rows = upper.rows.data();
  Mat x(fit(d.x_up, K * X.cols), K, X.cols), p(fit(d.pre_up, K * pre_prev.cols), K, pre_prev.cols);
  Mat f(fit(d.features_up, K * feats.cols), K, feats.cols);
  if (K > 0) {
    o.copy_rows(X, rows, x);
    o.copy_rows(pre_prev, rows, p);
    if (feats.cols > 0) o.copy_rows(feats, rows, f);
  }
  X = x;
  pre_prev = p;
  feats = f;
  const bool candidates = std::any_of(cfg().layers.begin(), cfg().layers.end(),
                                      [](const io::LayerSpec& ls) { return ls.candidate_source; });
  keep_selection_rows(o, upper.rows, static_cast<int64_t>(in.token_ids.size()),
                      candidates ? cfg().candidate_topk_blocks : 0, attn, cs);
  for (const SequenceSpan& sq : in.sequences) sq.cache->skip_upper(first_upper, sq.upper_skip);
}

RowInputs V41Model::recorded_rows(const StepInputs& in, int64_t Mb, DenseBuffers& d) {
  row_host.assign(static_cast<size_t>(2 * Mb), 0);
  std::copy(in.token_ids.begin(), in.token_ids.end(), row_host.begin());
  std::copy(in.positions.begin(), in.positions.end(), row_host.begin() + Mb);
  const size_t bytes = row_host.size() * sizeof(int32_t);
  auto* dev = static_cast<int32_t*>(d.rows.fit_bytes(bytes));
  ops->upload(dev, row_host.data(), bytes);
  RowInputs r;
  r.ids = dev;
  r.positions = dev + Mb;
  return r;
}

void V41Model::layers_recorded(const StepInputs& in, Mat X, Mat pre_prev, Mat feats) {
  const int64_t Mb = X.rows;
  DenseBuffers& d = recorded;
  const RowInputs rows = recorded_rows(in, Mb, d);
  // Constant rows sized before the units (an upload inside one would refuse its capture).
  const CMat first = constant_rows(rec_onehot, Mb, false);
  if (w.dspark && keep_draft_context_) constant_rows(rec_quarter, Mb, true);
  const std::vector<Block>& layers = w.layers;
  if (!layers.empty()) gather_engram(0, in, Mb, d);
  recording.run(0, Mb, [&] {
    embed_streams(rows.ids, X);
    ops->copy_rows(first, nullptr, pre_prev);
    if (layers.empty()) return;
    before_block(0, X, feats, rec_quarter, d);
    attention_in(layers[0].base, X, pre_prev, rows, d);
  });
  for (size_t l = 0; l < layers.size(); ++l) {
    const Block& b = layers[l];
    csa2_core(env(), b.base.attn, b.base.spec, l, attention_rows(env(), b.base.attn, Mb, d.attn),
              in, attn, cs);
    if (l + 1 < layers.size()) gather_engram(l + 1, in, Mb, d);
    recording.run(l + 1, Mb, [&] {
      attention_out_ffn(b.base, X, pre_prev, rows, d);
      if (l + 1 == layers.size()) return;
      before_block(l + 1, X, feats, rec_quarter, d);
      attention_in(layers[l + 1].base, X, pre_prev, rows, d);
    });
  }
  // A unit's first (eager) run may have grown a buffer: units recorded before then point to
  // freed memory, so every recording goes (they are made again, two steps later).
  recording.buffers_after_step(recorded_fingerprint());
}

RecordedSteps::Fingerprint V41Model::recorded_fingerprint() const {
  RecordedSteps::Fingerprint print;
  recorded.fingerprint(print);
  draft_recorded.fingerprint(print);
  for (const backend::Buffer* b : {&rec_onehot, &rec_quarter, &rec_draft_logits}) {
    print.emplace_back(b->data(), b->bytes());
  }
  return print;
}

Status V41Model::forward_unguarded(const StepInputs& in, StepOutputs& out) {
  // A refused step changes nothing (and, with expert parallelism, still serves the peers).
  Status refused = check_step(in, cfg().vocab_size, false);
  if (refused.ok()) refused = check_replay_step(in);
  if (refused.ok() && cp_split && has_upper_skip(in)) {
    refused = unimplemented(
        "bounded replay (SequenceSpan::upper_skip) with context parallelism: the upper layers "
        "would run a subset of every rank's rows; prefill without upper_skip "
        "(DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE off) or without context parallelism");
  }
  if (refused.ok()) refused = plan_logit_rows(in, out);
  if (!refused.ok()) {
    if (exchange) serve_experts_only();
    return refused;
  }
  // The drafter context follows every sequence stepped while it is kept. One whose context lags
  // (stepped while it was not: the engine stops it while drafting does not pay) starts it again
  // here, with empty windows (SequenceCache::skip_draft): its drafts are weaker until the
  // windows refill, and from a window's worth of positions on exactly what they would have been.
  const bool context = w.dspark.has_value() && keep_draft_context_;
  if (context) {
    for (const SequenceSpan& sq : in.sequences) {
      if (sq.cache->draft_length() != sq.cache->length()) {
        DI_TRY(sq.cache->skip_draft(sq.cache->length()));
      }
    }
  }
  backend::Ops& o = *ops;
  const io::ModelConfig& c = cfg();
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  const int64_t D = c.hidden_size, n = c.hc_mult, nD = n * D;
  plan_upper_rows(in, upper);
  // A bounded-replay step changes its row count between layers: it runs eagerly.
  // Expert parallelism runs on host backends, which never record; eager keeps it obvious.
  const int64_t Mb = upper.active || exchange || tp_gather || cp_split ? 0 : recording.bucket(M);
  const int64_t rows = Mb > 0 ? Mb : M;
  DenseBuffers& d = Mb > 0 ? recorded : step;
  Mat X(fit(d.x, rows * nD), rows, nD);
  Mat pre_prev(fit(d.pre_prev, rows * n), rows, n);
  // The drafter's features (none while its context is not kept).
  const auto T = context ? static_cast<int64_t>(c.dspark.target_layer_ids.size()) : 0;
  Mat feats(fit(d.features, rows * T * D), rows, T * D);
  if (M > 0) {
    if (engram_lookup) engram_lookup->begin_step(o, in);
    if (cp_split) {
      layers_context_parallel(in, X, pre_prev, feats);
    } else if (Mb > 0) {
      layers_recorded(in, X, pre_prev, feats);
    } else {
      layers_eager(in, X, pre_prev, feats);
    }
    const StepInputs& top = upper.active ? upper.in : in;  // the rows the last layer ran
    if (context && !top.token_ids.empty()) {
      draft_context(top, feats, d);
    }
    if (engram_lookup) engram_lookup->push_history(in);
  } else if (exchange) {
    serve_experts_only();
  }
  for (const SequenceSpan& sq : in.sequences) {
    const bool in_sync = context && sq.cache->draft_length() == sq.cache->length();
    sq.cache->advance(sq.count);
    if (in_sync) sq.cache->advance_draft(sq.count);
  }

  // Head (spec §6.1): collapse with the last pre, final norm, FP32 head.
  const int64_t R = out.logit_rows, V = c.vocab_size;
  std::vector<int32_t> head_rows(out.logit_row_of.begin(), out.logit_row_of.end());
  if (upper.active) {  // X holds the kept rows only (check_replay_step: logits rows are kept)
    for (int32_t& r : head_rows) r = upper.kept_of[static_cast<size_t>(r)];
  }
  // Over the rows padded to their bucket on a recording backend (V4Model::head_rows says why:
  // cuBLAS's first call at a new row count), the first R returned.
  const int64_t Rb = exchange || tp_gather || cp_split ? R : std::max(R, recording.bucket(R));
  const Mat lg_all(fit(logits_buf, Rb * V), Rb, V);
  const Mat lg = lg_all.rows_slice(0, R);
  if (R > 0) {
    const std::span<const int32_t> padded = RecordedSteps::padded(head_rows, Rb, head_row_pad);
    Mat Xs(fit(head_in, Rb * nD), Rb, nD), ps(fit(head_pre, Rb * n), Rb, n);
    Mat y(fit(head_y, Rb * D), Rb, D);
    o.copy_rows(X, padded.data(), Xs);
    o.copy_rows(pre_prev, padded.data(), ps);
    o.hc_collapse(Xs, ps, static_cast<int>(n), y);
    num.act(o, y);
    num.rms_norm_act(o, y, &w.norm, 0, y);
    lm_head(y, lg_all);
  }
  if (in.sample_specs.empty()) {
    out.sampled.clear();
    backend::download_mat(o, lg, out.logits);
  } else {
    out.logits.clear();
    out.sampled.resize(static_cast<size_t>(R));
    if (R > 0) o.sample(lg, in.sample_specs, out.sampled.data());
  }
  if (in.keep_hidden) {
    download_hidden(o, CMat(X).rows_slice(0, M), in.sequences, out.hidden);
  } else {
    out.hidden.clear();
  }
  return {};
}

Expected<SequenceCache> V41Model::window_replay_state(const SequenceCache& part,
                                                      std::span<const int32_t> known,
                                                      int64_t from) const {
  const auto h = static_cast<int64_t>(known.size());
  if (part.length() != h || from < 0 || from > h) {
    return invalid_argument("window_replay_state: " + std::to_string(known.size()) +
                            " known tokens for a state of " + std::to_string(part.length()) +
                            ", replay from " + std::to_string(from));
  }
  DI_TRY(bounded_replay_supported(cfg()));
  CacheOptions opts;
  opts.max_rollback = part.max_rollback();
  SequenceCache c = new_sequence(opts);
  DI_TRY(c.adopt_compressed(part, from));
  if (engram_lookup) {  // the look-back before `from`, from the known tokens
    const int64_t first = std::max<int64_t>(0, from - (cfg().engram.max_ngram_size - 1));
    std::vector<int32_t> ids;
    for (int64_t p = first; p < from; ++p) {
      ids.push_back(engram_lookup->compressed_id(known[static_cast<size_t>(p)]));
    }
    c.set_engram_history(ids);
  }
  return c;
}

namespace {

LayerCachePlan::Compressed compressed_plan(int ratio, int64_t width, bool pending) {
  LayerCachePlan::Compressed p;
  p.ratio = ratio;
  p.row_width = width;
  p.state_width = pending && ratio > 1 ? width : 0;  // ratio 1: every token closes its row
  p.state_tokens = ratio;
  return p;
}

}  // namespace

CachePlan cache_plan(const io::ModelConfig& c) {
  CachePlan plan;
  plan.window = c.sliding_window;
  plan.draft_lag = 0;  // the drafter's context rings hold exactly the processed positions
  for (const auto& spec : c.layers) {
    LayerCachePlan p;
    p.window_width = c.head_dim;
    if (spec.role == io::Csa2Role::kFull) {
      p.comp = compressed_plan(spec.compress_ratio, c.head_dim, true);
      p.idx = compressed_plan(spec.compress_ratio, c.index_head_dim, false);
    }
    plan.layers.push_back(p);
  }
  for (size_t s = 0; s < c.mtp_layers.size(); ++s) {
    LayerCachePlan p;
    p.window_width = c.head_dim;
    plan.draft_layers.push_back(p);
  }
  if (!c.engram.layer_ids.empty()) plan.engram_history = c.engram.max_ngram_size - 1;
  return plan;
}

Expected<std::unique_ptr<model::Model>> V41Model::load_unguarded(
    const std::string& model_dir, backend::Ops& ops, const io::LoadOptions& load,
    const ExpertParallel& ep, const TensorParallel& tp, const ContextParallel& cp) {
  auto s = std::make_unique<V41Model>(ops);
  DI_ASSIGN_OR_RETURN(s->ckpt, io::Checkpoint::open(model_dir, load));
  const io::ModelConfig& c = s->ckpt.config();
  if (c.scoring_func != io::ScoreFunc::kSqrtSoftplus) {
    return unimplemented("config " + c.source + ": scoring_func " +
                         std::string(io::score_func_name(c.scoring_func)) +
                         " (only sqrtsoftplus is implemented)");
  }
  using F = backend::Feature;
  DI_TRY(backend::require(
      ops,
      {F::kSparseAttention, F::kAttentionSink, F::kHyperConnections, F::kHcSinglePass,
       F::kCompressorPool, F::kIndexer, F::kFakeQuantFp8, F::kFakeQuantFp4, F::kFakeQuantNvfp4,
       F::kCandidateBlocks, F::kEngramGate, F::kRouterOptions, F::kMoeRouting, F::kMoeExperts}));
  if (c.quantization.expert_format == io::ExpertFormat::kFp4) {
    DI_TRY(backend::require(ops, {F::kFp4Weights}));
  }
  if (s->ckpt.config().quantization.quantized) {
    DI_TRY(
        backend::require(ops, {F::kActQuantFp8, F::kBf16Probs, F::kIndexerBf16, F::kFp8Weights}));
  }
  if (!c.engram.layer_ids.empty()) {
    DI_ASSIGN_OR_RETURN(EngramLookup lookup, EngramLookup::create(c, model_dir));
    s->engram_lookup.emplace(std::move(lookup));
  }
  DI_TRY(ep.validate(c, ops));
  DI_TRY(tp.validate(c, ops, ep));
  DI_ASSIGN_OR_RETURN(s->w, bind_weights(s->ckpt, ops, ep, tp));
  if (ep.enabled()) s->exchange = std::make_unique<MoeExchange>(ep, c.layers.size(), c.hidden_size);
  if (tp.enabled()) s->tp_gather = std::make_unique<TensorParallelGather>(*tp.comm);
  if (cp.enabled()) s->cp_split = std::make_unique<ContextSplit>(*cp.comm);
  s->plan = cache_plan(c);
  s->first_upper = first_upper_layer(c);
  s->num = Numerics::from_config(c);
  s->rope = RopeTables::from_config(c, ops);
  if (s->w.dspark) {
    const int64_t width = c.hidden_size + c.dspark.markov_rank;
    const TensorView v =
        TensorView::make(DType::kF32, {1, width}, s->w.dspark->confidence, ops.device_kind());
    DI_ASSIGN_OR_RETURN(s->confidence, backend::WeightRef::dense(v));
  }
  return std::unique_ptr<model::Model>(std::move(s));
}

Expected<std::unique_ptr<model::Model>> load(const std::string& model_dir, backend::Ops& ops,
                                             const io::LoadOptions& load, const ExpertParallel& ep,
                                             const TensorParallel& tp, const ContextParallel& cp) {
  try {
    return V41Model::load_unguarded(model_dir, ops, load, ep, tp, cp);
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(
        e, "loading " + model_dir + " on backend '" + ops.name() + "'",
        "The weights do not fit: use a device with more memory, or the CPU.");
  }
}

}  // namespace deepinfer::model::deepseek_v41
