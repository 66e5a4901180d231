// V41Model, DeepSeek-V4.1 (model.h), for its own translation units only: model.cc (load, the
// block composition, the forward), layers_context_parallel.cc (a step split over
// context-parallel ranks) and draft.cc (the DSpark drafter's context and its draft).
#pragma once

#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "model/context_parallel.h"
#include "model/deepseek_v41/attention.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/upper_rows.h"
#include "model/deepseek_v41/weights.h"
#include "model/layers/attention.h"
#include "model/layers/moe.h"
#include "model/layers/numerics.h"
#include "model/recorded_steps.h"

namespace deepinfer::model::deepseek_v41 {

using backend::CMat;
using backend::Mat;

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

  static Expected<std::unique_ptr<model::Model>> load_unguarded(
      const std::string& model_dir, backend::Ops& ops, const io::LoadOptions& load,
      const ExpertParallel& ep, const TensorParallel& tp, const ContextParallel& cp);

  const io::ModelConfig& config() const override { return cfg(); }
  bool official_semantics() const override { return num.official; }
  void set_draft_context(bool keep) override {
    keep_draft_context_ = keep;
    recording.set_variant(keep ? 0 : 1);  // the units with and without the features' ops
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
      std::vector<parallel::ExpertPlacement> placements) override;
  std::vector<std::pair<std::string, double>> host_counters() const override;

  Status forward(const StepInputs& in, StepOutputs& out) override;

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
                                                     bool logits) override;

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
  CMat constant_rows(backend::Buffer& b, int64_t rows, bool mean);

  // Bounded replay's inputs (step.h upper_skip; cache.h compressed_until): a model that can
  // skip, and no span straddling the end of the compressed rows a window replay restored.
  Status check_replay_step(const StepInputs& in) const;

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
                    DenseBuffers& d);

  // Part 2 (after the core): the attention output and its mHC post-mix, then the FFN half,
  // whose site collapses with d.pre_a and leaves its pre in `pre_prev` for the next block.
  void attention_out_ffn(const BlockWeights& b, Mat X, Mat pre_prev, const RowInputs& rows,
                         DenseBuffers& d);

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
              const backend::Buffer* looked_up = nullptr);

  // Layer l's rows of its Engram table, into d.engram_in (eager, between units: an upload).
  void gather_engram(size_t l, const StepInputs& in, int64_t rows, DenseBuffers& d);

  // What precedes layer l's block: its Engram memory, and the drafter's features where l is a
  // target layer (the attention site's input, stream mean). `quarter`: constant mean rows.
  void before_block(size_t l, Mat X, Mat feats, backend::Buffer& quarter_rows, DenseBuffers& d,
                    const backend::Buffer* engram_rows = nullptr);

  // The main layers over a step, eagerly (host arrays of `in` as row inputs). With bounded
  // replay (upper.active) the layers from first_upper on run only the kept rows: X, pre_prev
  // and feats are then views of those rows when it returns.
  void layers_eager(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats);

  // The main layers over a step split over the context-parallel ranks (context_parallel.h), as
  // V4's: this rank's rows through the dense parts (embedding, Engram, mHC with the carried pre,
  // projections, MoE, the drafter's features), every row's K=V and Full-layer compressor rows
  // gathered so every rank builds the whole cache (compressed rows, index keys, windows), this
  // rank's queries through selection (candidate blocks included) and attention. X, pre_prev and
  // feats [M, ..] get every rank's rows at the end. Bounded replay is refused before (check).
  void layers_context_parallel(const StepInputs& in, Mat X, Mat pre_prev, Mat feats);

  // Decoder-side bounded replay, at the first upper layer: the kept rows' streams, carried pre
  // and features move to their own buffers (and become the views), the latest selection and
  // candidate blocks are cut to them, and the upper windows and the drafter's context rings of
  // every span skip its leading rows (they are never computed there).
  void enter_upper(const StepInputs& in, Mat& X, Mat& pre_prev, Mat& feats, DenseBuffers& d);

  // RowInputs of a recorded step of Mb >= M rows, in d.rows (one upload): rows past M are
  // padding (token 0 at position 0), which the dense parts compute and nothing reads.
  RowInputs recorded_rows(const StepInputs& in, int64_t Mb, DenseBuffers& d);

  // The main layers over a step padded to Mb rows: the dense parts between two attention cores
  // (and before the first) are units that Ops::run_recorded may replay as CUDA graphs; the
  // cores run eagerly on the real rows, and so do the Engram gathers, each just before the
  // unit that reads its rows (so the host work overlaps the layers already queued).
  void layers_recorded(const StepInputs& in, Mat X, Mat pre_prev, Mat feats);

  // Every buffer a recorded unit of this model reads or writes (main steps and drafts): one
  // fingerprint, so that a step of either kind sees the other's buffers move too.
  RecordedSteps::Fingerprint recorded_fingerprint() const;

  // The drafter's stages and base logits over a draft of M = ids.size() rows padded to Mb, as
  // recorded units around the stages' attention cores (`core(s, rows)`, eager: their key tables
  // follow the caches), the main layers' form (layers_recorded): eagerly each stage is ~50
  // launches. nj and lg: views of the M real rows of the normed collapse and the base logits.
  template <typename Core>
  void draft_stages_recorded(std::span<const int32_t> ids, std::span<const int32_t> pos, int64_t Mb,
                             const Core& core, Mat& nj, Mat& lg);

  // Expert parallelism: this rank's part of the exchange of the main layers from `first` on,
  // in a step without rows of its own there (empty, refused, or past a bounded replay's last
  // row), so the peers never wait for it.
  void serve_experts_only(size_t first = 0) {
    for (size_t l = first; l < w.layers.size(); ++l) {
      moe_serve_only(*ops, cfg(), num, w.layers[l].base.moe, step.moe, *exchange);
    }
  }

  Status forward_unguarded(const StepInputs& in, StepOutputs& out);

  // The DSpark context of the step's positions (spec §6.7 item 10): the target features
  // projected once (main_proj, main_norm), then each stage's K=V rows of them (its wkv, kv_norm,
  // RoPE, FP8) into the stage's window ring, which a draft reads. feats: at least the step's
  // rows (a recorded step's padded rows too, which it then computes and drops).
  void draft_context(const StepInputs& in, CMat feats, DenseBuffers& d);

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
  std::vector<int32_t> head_row_pad;        // the head's rows padded to their bucket
  std::vector<int32_t> ctx_positions;       // draft_context's rows' positions, padded
  std::shared_ptr<backend::PagePools> pages;
  // Declared last: its destructor drops this model's recordings before the buffers they use go.
  RecordedSteps recording;
};

}  // namespace deepinfer::model::deepseek_v41
