// DeepSeek-V4.1 (see model.h): load, the block composition, the head, the DSpark drafter's
// context and its draft. Composition only: every numerical step is an op call or one of the
// shared layer pieces (model/layers) or V4.1's own (attention.cc, engram.cc).
//
// Steps of at most Ops::record_max_rows() rows run padded to a bucket, their dense parts as
// recorded units (CUDA graphs on the GPU; model/recorded_steps.h), like V4's: the attention
// cores and the Engram gathers run eagerly between the units.
#include "model/deepseek_v41/model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "base/check.h"
#include "io/checkpoint.h"
#include "model/bounded_replay.h"
#include "model/context_parallel.h"
#include "model/deepseek_v41/attention.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/upper_rows.h"
#include "model/deepseek_v41/weights.h"
#include "model/layers/attention.h"
#include "model/layers/expert_rebind.h"
#include "model/layers/moe.h"
#include "model/layers/numerics.h"
#include "model/recorded_steps.h"
#include "model/step_check.h"
#include "sample/sample_spec.h"

namespace deepinfer::model::deepseek_v41 {

using backend::CMat;
using backend::Mat;

namespace {

// Buffers of a step's dense parts (backend memory, grow-only). Eager steps, recorded ones and
// drafts keep separate sets: a recorded unit replays the addresses it was captured with, so its
// set must not move when a long prefill grows the eager one.
struct DenseBuffers {
  explicit DenseBuffers(backend::Ops& o)
      : x(o),
        y(o),
        u(o),
        post(o),
        comb(o),
        sub(o),
        pre_a(o),
        pre_prev(o),
        engram_kv(o),
        features(o),
        ctx(o),
        ctx_kv(o),
        rows(o),
        attn(o),
        moe(o),
        x_up(o),
        pre_up(o),
        features_up(o) {}
  backend::Buffer x, y, u, post, comb, sub;
  backend::Buffer pre_a, pre_prev;  // the attention site's pre, and the pre a site collapses with
  backend::Buffer engram_kv;        // [M, (n + 1)·D]
  std::vector<backend::Buffer> engram_in;  // per Engram layer: the step's looked-up rows
  backend::Buffer features;                // DSpark target features [M, T·D]
  backend::Buffer ctx, ctx_kv;             // the drafter's projected context and a stage's K=V rows
  backend::Buffer rows;  // recorded steps: the RowInputs arrays, uploaded once per step
  AttentionBuffers attn;
  MoeScratch moe;
  // Bounded replay (eager steps only): the kept rows' streams, pre and features from the first
  // upper layer on (upper_rows.h).
  backend::Buffer x_up, pre_up, features_up;

  // What the units of a recorded step read and write (ctx and ctx_kv are eager-only).
  void fingerprint(RecordedSteps::Fingerprint& out) const {
    for (const backend::Buffer* b :
         {&x, &y, &u, &post, &comb, &sub, &pre_a, &pre_prev, &engram_kv, &features, &rows}) {
      out.emplace_back(b->data(), b->bytes());
    }
    for (const backend::Buffer& b : engram_in) out.emplace_back(b.data(), b.bytes());
    attn.fingerprint(out);
    moe.fingerprint(out);
  }
};

}  // namespace

class V41Model final : public model::Model {
 public:
  explicit V41Model(backend::Ops& o)
      : ops(&o),
        cp_x(o),
        cp_pre(o),
        cp_feats(o),
        cp_engram(o),
        step(o),
        recorded(o),
        draft(o),
        draft_recorded(o),
        head_in(o),
        head_pre(o),
        head_y(o),
        logits_buf(o),
        onehot(o),
        quarter(o),
        draft_cat(o),
        draft_conf(o),
        markov(o),
        markov_sum(o),
        attn(o),
        cs(o),
        rec_onehot(o),
        rec_quarter(o),
        rec_draft_logits(o),
        pages(std::make_shared<backend::PagePools>(o)),
        recording(o) {}
  V41Model(const V41Model&) = delete;
  V41Model& operator=(const V41Model&) = delete;

  static Expected<std::unique_ptr<model::Model>> load_unguarded(const std::string& model_dir,
                                                                backend::Ops& ops,
                                                                const io::LoadOptions& load,
                                                                const ExpertParallel& ep,
                                                                const TensorParallel& tp,
                                                                const ContextParallel& cp);

  const io::ModelConfig& config() const override { return cfg(); }
  bool official_semantics() const override { return num.official; }
  void set_draft_context(bool keep) override {
    if (keep == keep_draft_context_) return;
    keep_draft_context_ = keep;
    ops->drop_recordings();  // units recorded with (or without) the features' ops
  }
  DrafterKind drafter() const override {
    return w.dspark ? DrafterKind::kDSpark : DrafterKind::kNone;
  }
  SequenceCache new_sequence(const CacheOptions& options) const override {
    return SequenceCache::create(*pages, plan, options);
  }
  backend::PagePool::Stats cache_memory() const override { return pages->stats(); }
  WeightStats weight_stats() const override { return w.store.stats; }
  Expected<ExpertMoves> set_expert_placements(
      std::vector<parallel::ExpertPlacement> placements) override {
    if (!exchange) return Model::set_expert_placements(std::move(placements));
    std::vector<MoeWeights*> moe;
    for (Block& b : w.layers) moe.push_back(&b.base.moe);
    return rebind_routed_experts(ckpt, *ops, w.store, moe, *exchange, std::move(placements));
  }
  std::vector<std::pair<std::string, double>> host_counters() const override {
    if (!engram_lookup) return {};
    const EngramLookup::Stats& e = engram_lookup->stats();
    return {{"engram_gather_seconds", e.seconds},
            {"engram_upload_bytes", static_cast<double>(e.bytes)},
            {"engram_layer_gathers", static_cast<double>(e.layer_gathers)}};
  }

  Status forward(const StepInputs& in, StepOutputs& out) override {
    try {
      return forward_unguarded(in, out);
    } catch (const backend::OutOfMemory& e) {
      return out_of_memory_status(
          e,
          "running a step of " + std::to_string(in.token_ids.size()) + " tokens over " +
              std::to_string(in.sequences.size()) +
              " sequences (their caches are now invalid: discard them)",
          "Fewer concurrent sequences, shorter prompts or smaller prefill chunks need less "
          "memory.");
    } catch (const parallel::CollectiveFailure& e) {
      return e.status().with_context(
          "step of " + std::to_string(in.token_ids.size()) +
          " tokens (its sequences' caches are now invalid: discard them)");
    }
  }

  Expected<SequenceCache> window_replay_state(const SequenceCache& part,
                                              std::span<const int32_t> known,
                                              int64_t from) const override;

  Expected<DraftBlock> dspark_draft(SequenceCache& cache, int32_t anchor, int k,
                                    std::span<const int32_t> forced) override {
    const DSparkJob job{&cache, anchor, forced, {}};
    DI_ASSIGN_OR_RETURN(std::vector<DraftBlock> out, dspark_draft_all({&job, 1}, k, true));
    return std::move(out[0]);
  }

  Expected<std::vector<DraftBlock>> dspark_draft_all(std::span<const DSparkJob> jobs, int k,
                                                     bool logits) override {
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

 private:
  const io::ModelConfig& cfg() const { return ckpt.config(); }
  LayerEnv env() { return {*ops, cfg(), num, rope, tp_gather.get()}; }
  // logits = y · lm_headᵀ; with tensor parallelism this rank's vocabulary rows, gathered.
  void lm_head(CMat y, Mat logits) {
    if (tp_gather) {
      tp_gather->linear_gathered(*ops, y, w.lm_head, num.gemm_on_act(), logits, "LM head");
    } else {
      ops->linear(y, w.lm_head, logits, num.gemm_on_act());
    }
  }

  backend::HcParams hc_params(const HcWeights& h) const {
    return model::hc_params(h, cfg(), num.eps);
  }

  // [rows, n] of a constant row ((1, 0, ..) or (1/n, ..)) in backend memory, grown on demand.
  CMat constant_rows(backend::Buffer& b, int64_t rows, bool mean) {
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

  // Bounded replay's inputs (step.h upper_skip; cache.h compressed_until): a model that can
  // skip, and no span straddling the end of the compressed rows a window replay restored.
  Status check_replay_step(const StepInputs& in) const {
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

  // Embedding rows replicated into the n streams.
  void embed_streams(const int32_t* ids, Mat X) {
    const int64_t M = X.rows, n = cfg().hc_mult;
    // Rounded (official) in the same pass: one launch on a device backend, not 2 + n.
    ops->embed_streams(ids, M, w.embed, n, num.official, X);
  }

  // One block's dense parts around its attention core (spec §6.1), in two parts so a recorded
  // step can run each as a unit. Part 1: the attention site collapses with `pre_prev` and leaves
  // its own pre in d.pre_a; its norm and the attention projections.
  void attention_in(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows,
                    DenseBuffers& d) {
    backend::Ops& o = *ops;
    const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
    Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D);
    Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
    Mat pre_a(fit(d.pre_a, M * n), M, n);
    num.hc_pre_act(o, X, hc_params(b.hc_attn), pre_prev, y, pre_a, post, comb);
    num.rms_norm_act(o, y, &b.attn_norm, 0, u);
    attention_project(env(), b.attn, b.spec, u, rows, d.attn,
                      attention_rows(env(), b.attn, M, d.attn));
  }

  // Part 2 (after the core): the attention output and its mHC post-mix, then the FFN half,
  // whose site collapses with d.pre_a and leaves its pre in `pre_prev` for the next block.
  void attention_out_ffn(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows,
                         DenseBuffers& d) {
    backend::Ops& o = *ops;
    const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
    Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D), out(fit(d.sub, M * D), M, D);
    Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
    Mat pre_a(fit(d.pre_a, M * n), M, n);
    attention_output(env(), b.attn, b.spec, rows.positions,
                     attention_rows(env(), b.attn, M, d.attn), out, d.attn);
    num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);

    num.hc_pre_act(o, X, hc_params(b.hc_ffn), pre_a, y, pre_prev, post, comb);
    num.rms_norm_act(o, y, &b.ffn_norm, 0, u);
    moe_forward(o, cfg(), num, b.moe, u, rows.ids, out, d.moe, exchange.get(), tp_gather.get());
    num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);
  }

  // A whole block, eagerly: `core` runs the attention core between the two parts.
  template <typename Core>
  void block(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows, DenseBuffers& d,
             const Core& core) {
    attention_in(b, X, pre_prev, rows, d);
    core(attention_rows(env(), b.attn, X.rows, d.attn));
    attention_out_ffn(b, X, pre_prev, rows, d);
  }

  // The Engram memory of layer b writes into the streams (spec §6.7 item 1), from the step's
  // looked-up rows of its table (d.engram_in), or `looked_up` (context parallelism: this rank's).
  void engram(const EngramWeights& e, Mat X, DenseBuffers& d,
              const backend::Buffer* looked_up = nullptr) {
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

  // Layer l's rows of its Engram table, into d.engram_in (eager, between units: an upload).
  void gather_engram(size_t l, const StepInputs& in, int64_t rows, DenseBuffers& d) {
    const Block& b = w.layers[l];
    if (!b.engram) return;
    const auto j = static_cast<size_t>(b.engram->index);
    while (d.engram_in.size() <= j) d.engram_in.emplace_back(*ops);
    engram_lookup->gather_layer(*ops, in, *b.engram, rows, d.engram_in[j]);
  }

  // What precedes layer l's block: its Engram memory, and the drafter's features where l is a
  // target layer (the attention site's input, stream mean). `quarter`: constant mean rows.
  void before_block(size_t l, Mat X, Mat feats, backend::Buffer& quarter_rows, DenseBuffers& d,
                    const backend::Buffer* engram_rows = nullptr) {
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

  // The main layers over a step, eagerly (host arrays of `in` as row inputs). With bounded
  // replay (upper.active) the layers from first_upper on run only the kept rows: X, pre_prev
  // and feats are then views of those rows when it returns.
  void layers_eager(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats) {
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

  // The main layers over a step split over the context-parallel ranks (context_parallel.h), as
  // V4's: this rank's rows through the dense parts (embedding, Engram, mHC with the carried pre,
  // projections, MoE, the drafter's features), every row's K=V and Full-layer compressor rows
  // gathered so every rank builds the whole cache (compressed rows, index keys, windows), this
  // rank's queries through selection (candidate blocks included) and attention. X, pre_prev and
  // feats [M, ..] get every rank's rows at the end. Bounded replay is refused before (check).
  void layers_context_parallel(const StepInputs& in, Mat X, Mat pre_prev, Mat feats) {
    backend::Ops& o = *ops;
    DenseBuffers& d = step;
    ContextSplit& cp = *cp_split;
    cp.plan(in);
    const int64_t m = static_cast<int64_t>(cp.mine().size()), M = X.rows;
    const int32_t* ids = cp.ids().data();
    RowInputs rows;
    rows.ids = ids;
    rows.positions = cp.positions().data();
    LayerEnv split_env = env();
    split_env.query_of = cp.local_of().data();
    split_env.query_count = m;
    Mat Xl(fit(cp_x, m * X.cols), m, X.cols), pre_l(fit(cp_pre, m * pre_prev.cols), m,
                                                        pre_prev.cols);
    Mat feats_l(fit(cp_feats, m * feats.cols), m, feats.cols);
    if (m > 0) {
      embed_streams(ids, Xl);
      o.copy_rows(constant_rows(onehot, m, false), nullptr, pre_l);  // layer 0: stream 0
    }
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const Block& b = w.layers[l];
      if (b.engram) {  // the whole step's lookup (its n-grams span the rows), then this rank's
        gather_engram(l, in, M, d);
        const int64_t width = engram_lookup->columns() * cfg().engram.head_dim;
        Mat mine_rows(fit(cp_engram, m * width), m, width);
        if (m > 0) {
          o.copy_rows(CMat(d.engram_in[static_cast<size_t>(b.engram->index)].as<const float>(), M,
                           width),
                      cp.rows().data(), mine_rows);
        }
      }
      if (m > 0) {
        before_block(l, Xl, feats_l, quarter, d, b.engram ? &cp_engram : nullptr);
        attention_in(b.base, Xl, pre_l, rows, d);
      }
      AttentionRows r = attention_rows(env(), b.base.attn, m, d.attn);
      cp.gather_cache_rows(r);
      csa2_core(split_env, b.base.attn, b.base.spec, l, r, in, attn, cs);
      if (m > 0) {
        attention_out_ffn(b.base, Xl, pre_l, rows, d);
      } else if (exchange) {  // no rows here: this rank's experts still serve the others' rows
        moe_serve_only(o, cfg(), num, b.base.moe, d.moe, *exchange);
      }
    }
    std::vector<CMat> local{Xl, pre_l};
    std::vector<Mat> full{X, pre_prev};
    if (feats.cols > 0) {
      local.push_back(feats_l);
      full.push_back(feats);
    }
    cp.gather_rows(local, full, "final streams, pre and drafter features");
  }

  // Decoder-side bounded replay, at the first upper layer: the kept rows' streams, carried pre
  // and features move to their own buffers (and become the views), the latest selection and
  // candidate blocks are cut to them, and the upper windows and the drafter's context rings of
  // every span skip its leading rows (they are never computed there).
  void enter_upper(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats, DenseBuffers& d) {
    backend::Ops& o = *ops;
    const auto K = static_cast<int64_t>(upper.rows.size());
    const int32_t* rows = upper.rows.data();
    Mat x(fit(d.x_up, K * X.cols), K, X.cols),
        p(fit(d.pre_up, K * pre_prev.cols), K, pre_prev.cols);
    Mat f(fit(d.features_up, K * feats.cols), K, feats.cols);
    if (K > 0) {
      o.copy_rows(X, rows, x);
      o.copy_rows(pre_prev, rows, p);
      if (feats.cols > 0) o.copy_rows(feats, rows, f);
    }
    X = x;
    pre_prev = p;
    feats = f;
    const bool candidates =
        std::any_of(cfg().layers.begin(), cfg().layers.end(),
                    [](const io::LayerSpec& ls) { return ls.candidate_source; });
    keep_selection_rows(o, upper.rows, static_cast<int64_t>(in.token_ids.size()),
                        candidates ? cfg().candidate_topk_blocks : 0, attn, cs);
    for (const SequenceSpan& sq : in.sequences) sq.cache->skip_upper(first_upper, sq.upper_skip);
  }

  // RowInputs of a recorded step of Mb >= M rows, in d.rows (one upload): rows past M are
  // padding (token 0 at position 0), which the dense parts compute and nothing reads.
  RowInputs recorded_rows(const StepInputs& in, int64_t Mb, DenseBuffers& d) {
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

  // The main layers over a step padded to Mb rows: the dense parts between two attention cores
  // (and before the first) are units that Ops::run_recorded may replay as CUDA graphs; the
  // cores run eagerly on the real rows, and so do the Engram gathers, each just before the
  // unit that reads its rows (so the host work overlaps the layers already queued).
  void layers_recorded(const StepInputs& in, Mat X, Mat pre_prev, Mat feats) {
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

  // Every buffer a recorded unit of this model reads or writes (main steps and drafts): one
  // fingerprint, so that a step of either kind sees the other's buffers move too.
  RecordedSteps::Fingerprint recorded_fingerprint() const {
    RecordedSteps::Fingerprint print;
    recorded.fingerprint(print);
    draft_recorded.fingerprint(print);
    for (const backend::Buffer* b : {&rec_onehot, &rec_quarter, &rec_draft_logits}) {
      print.emplace_back(b->data(), b->bytes());
    }
    return print;
  }

  // The drafter's stages and base logits over a draft of M = ids.size() rows padded to Mb, as
  // recorded units around the stages' attention cores (`core(s, rows)`, eager: their key tables
  // follow the caches), the main layers' form (layers_recorded): eagerly each stage is ~50
  // launches. nj and lg: views of the M real rows of the normed collapse and the base logits.
  template <typename Core>
  void draft_stages_recorded(std::span<const int32_t> ids, std::span<const int32_t> pos,
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

  // Expert parallelism: this rank's part of the exchange of the main layers from `first` on,
  // in a step without rows of its own there (empty, refused, or past a bounded replay's last
  // row), so the peers never wait for it.
  void serve_experts_only(size_t first = 0) {
    for (size_t l = first; l < w.layers.size(); ++l) {
      moe_serve_only(*ops, cfg(), num, w.layers[l].base.moe, step.moe, *exchange);
    }
  }

  Status forward_unguarded(const StepInputs& in, StepOutputs& out) {
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
    // The drafter context follows the sequences made and stepped while it was kept; the others'
    // lags for good (set_draft_context), and dspark_draft refuses them.
    const bool context = w.dspark.has_value() && keep_draft_context_;
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
        draft_context(top, CMat(feats).rows_slice(0, static_cast<int64_t>(top.token_ids.size())),
                      d);
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
    Mat lg(fit(logits_buf, R * V), R, V);
    if (R > 0) {
      Mat Xs(fit(head_in, R * nD), R, nD), ps(fit(head_pre, R * n), R, n);
      Mat y(fit(head_y, R * D), R, D);
      o.copy_rows(X, head_rows.data(), Xs);
      o.copy_rows(pre_prev, head_rows.data(), ps);
      o.hc_collapse(Xs, ps, static_cast<int>(n), y);
      num.act(o, y);
      num.rms_norm_act(o, y, &w.norm, 0, y);
      lm_head(y, lg);
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
      backend::download_mat(o, CMat(X).rows_slice(0, M), out.hidden);
    } else {
      out.hidden.clear();
    }
    return {};
  }

  // The DSpark context of the step's positions (spec §6.7 item 10): the target features
  // projected once (main_proj, main_norm), then each stage's K=V rows of them (its wkv, kv_norm,
  // RoPE, FP8) into the stage's window ring, which a draft reads.
  void draft_context(const StepInputs& in, CMat feats, DenseBuffers& d) {
    backend::Ops& o = *ops;
    const io::ModelConfig& c = cfg();
    const DSparkWeights& dw = *w.dspark;
    const int64_t M = feats.rows, D = c.hidden_size, hd = c.head_dim;
    Mat ctx(fit(d.ctx, M * D), M, D);
    o.linear(feats, dw.main_proj, ctx, num.gemm_rounded());
    num.rms_norm_act(o, ctx, &dw.main_norm, 0, ctx);
    Mat kv(fit(d.ctx_kv, M * hd), M, hd);
    for (size_t s = 0; s < dw.stages.size(); ++s) {
      const AttentionWeights& a = dw.stages[s].attn;
      o.linear(ctx, a.wkv, kv, num.gemm_rounded());
      num.rms_norm_act(o, kv, &a.kv_norm, 0, kv);
      num.rope_act(o, kv, 1, hd, in.positions.data(), rope.main, false);
      o.fake_quant_fp8(kv, hd, kV41WindowFp8Block);
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

  Expected<std::vector<DraftBlock>> draft_unguarded(std::span<const DSparkJob> jobs, int k,
                                                    bool keep_logits);

 public:
  backend::Ops* ops = nullptr;
  io::Checkpoint ckpt;
  ModelWeights w;
  Numerics num;
  RopeTables rope;
  std::unique_ptr<MoeExchange> exchange;  // expert parallelism (expert_parallel.h), or null
  std::unique_ptr<TensorParallelGather> tp_gather;  // tensor parallelism, or null
  // Context parallelism (context_parallel.h), or null; with it: this rank's rows' streams,
  // carried pre, features and Engram rows.
  std::unique_ptr<ContextSplit> cp_split;
  backend::Buffer cp_x, cp_pre, cp_feats, cp_engram;
  bool keep_draft_context_ = true;  // set_draft_context
  CachePlan plan;
  std::optional<EngramLookup> engram_lookup;
  DenseBuffers step, recorded, draft;
  DenseBuffers draft_recorded;  // recorded drafts' stages (apart: neither moves the other)
  backend::Buffer head_in, head_pre, head_y, logits_buf, onehot, quarter;
  backend::Buffer draft_cat, draft_conf, markov, markov_sum;
  backend::WeightRef confidence;  // [1, D + r] dense F32 over w.dspark->confidence
  AttentionScratch attn;
  Csa2Scratch cs;
  UpperRows upper;         // this step's kept rows under bounded replay (upper_rows.h)
  size_t first_upper = 0;  // the first layer above the last KV source
  backend::Buffer rec_onehot, rec_quarter;  // recorded steps' constant rows (never move in a unit)
  backend::Buffer rec_draft_logits;         // a recorded draft's base logits
  std::vector<int32_t> row_host;            // recorded steps: the row inputs before their upload
  std::shared_ptr<backend::PagePools> pages;
  // Declared last: its destructor drops this model's recordings before the buffers they use go.
  RecordedSteps recording;
};

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
      block(dw.stages[s], X, pre_prev, rows, d,
            [&](const AttentionRows& ar) { core(s, ar); });
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
  Mat cat(fit(draft_cat, N * (D + r)), N, D + r);
  Mat emb = cat.cols_slice(D, r);
  Mat tj(fit(markov, N * V), N, V);
  Mat lj(fit(markov_sum, N * V), N, V);
  Mat conf_all(fit(draft_conf, K * N), K * N, 1);                 // row j·N + e: slot j of job e
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
    o.linear(emb, dw.markov_head, tj, num.rounded({}));
    for (int64_t e = 0; e < N; ++e)
      slot_rows[static_cast<size_t>(e)] = static_cast<int32_t>(e * K + j);
    o.copy_rows(CMat(nj), slot_rows.data(), cat.cols_slice(0, D));
    o.linear(cat, confidence, conf_all.rows_slice(j * N, N));
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

Expected<std::unique_ptr<model::Model>> V41Model::load_unguarded(const std::string& model_dir,
                                                                 backend::Ops& ops,
                                                                 const io::LoadOptions& load,
                                                                 const ExpertParallel& ep,
                                                                 const TensorParallel& tp,
                                                                 const ContextParallel& cp) {
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
