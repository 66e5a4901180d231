// DeepSeek-V4 (see model.h): load, the block composition (mHC -> attention -> mHC -> MoE), the
// head, the MTP block. Composition only: every numerical step is an op call or one of the
// shared layer pieces (model/layers: attention, compressor, moe); step validation and the
// CUDA-graph policy are shared with V4.1 (model/step_check.h, model/recorded_steps.h).
#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"
#include "io/checkpoint.h"
#include "model/context_parallel.h"
#include "model/deepseek_v4/weights.h"
#include "model/layers/attention.h"
#include "model/layers/expert_rebind.h"
#include "model/layers/moe.h"
#include "model/layers/numerics.h"
#include "model/recorded_steps.h"
#include "model/step_check.h"
#include "model/step_hidden.h"

namespace deepinfer::model::deepseek_v4 {

using backend::CMat;
using backend::Mat;

namespace {

// Buffers of a step's dense parts (backend memory). Eager steps and recorded ones keep separate
// sets: a recorded unit replays the addresses it was captured with, so its set must not move
// when a long prefill grows the eager one.
struct DenseBuffers {
  explicit DenseBuffers(backend::Ops& o)
      : x(o), y(o), u(o), post(o), comb(o), sub(o), rows(o), attn(o), moe(o) {}
  backend::Buffer x, y, u, post, comb, sub;
  backend::Buffer rows;  // recorded steps: the RowInputs arrays, uploaded once per step
  AttentionBuffers attn;
  MoeScratch moe;

  std::vector<std::pair<const void*, size_t>> fingerprint() const {
    std::vector<std::pair<const void*, size_t>> out;
    for (const backend::Buffer* b : {&x, &y, &u, &post, &comb, &sub, &rows}) {
      out.emplace_back(b->data(), b->bytes());
    }
    attn.fingerprint(out);
    moe.fingerprint(out);
    return out;
  }
};

}  // namespace

class V4Model final : public model::Model {
 public:
  explicit V4Model(backend::Ops& o)
      : ops(&o),
        cp_x(o),
        eager(o),
        recorded(o),
        head_in(o),
        head_y(o),
        logits_buf(o),
        mtp_e(o),
        mtp_h(o),
        mtp_hidden(o),
        mtp_recorded(o),
        attn(o),
        pages(std::make_shared<backend::PagePools>(o)),
        recording(o) {}
  V4Model(const V4Model&) = delete;
  V4Model& operator=(const V4Model&) = delete;

  static Expected<std::unique_ptr<model::Model>> load_unguarded(
      const std::string& model_dir, backend::Ops& ops, const io::LoadOptions& load,
      const ExpertParallel& ep, const TensorParallel& tp, const ContextParallel& cp);

  const io::ModelConfig& config() const override { return cfg(); }
  bool official_semantics() const override { return num.official; }
  DrafterKind drafter() const override {
    return w.mtp.empty() ? DrafterKind::kNone : DrafterKind::kMtp;
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
    for (BlockWeights& b : w.layers) moe.push_back(&b.moe);
    return rebind_routed_experts(ckpt, *ops, w.store, moe, *exchange, std::move(placements));
  }
  Status forward(const StepInputs& in, StepOutputs& out) override;
  Expected<std::vector<float>> mtp_draft(SequenceCache& cache, std::span<const float> hidden,
                                         std::span<const int32_t> next_ids) override;
  Expected<MtpStep> mtp_step(std::span<const MtpRows> rows, bool run_ahead = false,
                             MtpOutputs outputs = MtpOutputs::kLogits) override;
  Expected<MtpChain> mtp_chain(std::span<const MtpRows> rows, int steps, bool run_ahead,
                               bool probs) override;

 private:
  Status forward_unguarded(const StepInputs& in, StepOutputs& out);
  // The checks of a step before anything runs (a refused step changes nothing).
  Status check_forward(const StepInputs& in, StepOutputs& out) const;
  // Expert parallelism: this rank's part of every main layer's exchange in a step without rows
  // of its own (an empty or refused step), so the peers never wait for it.
  void serve_experts_only() {
    for (const BlockWeights& b : w.layers) {
      moe_serve_only(*ops, cfg(), num, b.moe, eager.moe, *exchange);
    }
  }
  // The MTP block over every entry's rows (one step; entries continue their caches' MTP
  // state): leaves the block's output streams in mtp_x.
  // `head`: the caller wants the head at each entry's last row; a recorded step whose entries
  // have one row each (every row a last row) runs it in its unit (mtp_logits; otherwise
  // mtp_logits is empty and mtp_last_rows runs it).
  // `chained`: a chained step of mtp_chain, whose token ids and hidden rows are already in
  // backend memory (ids: mtp_recorded.ids; hidden: chain_hidden(M)); the rows' next_ids are
  // then placeholders (their count only) and their hidden spans empty.
  Status mtp_run(std::span<const MtpRows> rows, bool run_ahead, bool head = false,
                 bool chained = false);
  Status mtp_chain_unguarded(std::span<const MtpRows> rows, int steps, bool run_ahead,
                             bool probs, MtpChain& out);
  // The rows a step of M rows runs with as recorded units (RecordedSteps::bucket), or 0 when
  // it runs eagerly: always under expert, tensor or context parallelism, whose host backends
  // never record (eager keeps it obvious).
  int64_t recorded_bucket(int64_t M) const {
    return exchange || tp_gather || cp_split ? 0 : recording.bucket(M);
  }

  // After mtp_run(rows, .., head): each entry's last row's output streams (`last`, one row per
  // entry) and the MTP head's logits there (`lg`): the recorded step's when it ran the head in
  // its unit, else the head over those rows now.
  void mtp_last_rows(std::span<const MtpRows> rows, Mat& last, Mat& lg) {
    const auto R = static_cast<int64_t>(rows.size());
    last = mtp_x;
    lg = mtp_logits;
    if (lg.data != nullptr) return;
    // The head runs over R rows padded to their bucket (head_rows says why).
    const int64_t Rb = std::max(R, recorded_bucket(R));
    Mat all = mtp_x;
    if (mtp_x.rows != R || Rb != R) {  // several rows per entry, or padding: gather
      std::vector<int32_t> at;
      int64_t row = 0;
      for (const MtpRows& m : rows) {
        row += static_cast<int64_t>(m.next_ids.size());
        at.push_back(static_cast<int32_t>(row - 1));
      }
      at.resize(static_cast<size_t>(Rb), at.back());
      all = Mat(fit(head_in, Rb * mtp_x.cols), Rb, mtp_x.cols);
      ops->copy_rows(mtp_x, at.data(), all);
      last = all.rows_slice(0, R);
    }
    const Mat lgb(fit(logits_buf, Rb * cfg().vocab_size), Rb, cfg().vocab_size);
    head(w.mtp[0].head, all, lgb);
    lg = lgb.rows_slice(0, R);
  }

  // The buffer a chained MTP step of M rows reads its hidden rows from: the recorded set's
  // input, padded to the step's bucket, when such a step is recorded, else the eager one's.
  Mat chain_hidden(int64_t M) {
    const int64_t nD = static_cast<int64_t>(cfg().hc_mult) * cfg().hidden_size;
    const int64_t Mb = recorded_bucket(M);
    return Mb > 0 ? Mat(fit(mtp_recorded.hidden, Mb * nD), Mb, nD)
                  : Mat(fit(mtp_hidden, M * nD), M, nD);
  }

  backend::Ops* ops = nullptr;
  io::Checkpoint ckpt;
  ModelWeights w;
  Numerics num;
  RopeTables rope;
  std::unique_ptr<MoeExchange> exchange;  // expert parallelism (expert_parallel.h), or null
  std::unique_ptr<TensorParallelGather> tp_gather;  // tensor parallelism, or null
  std::unique_ptr<ContextSplit> cp_split;           // context parallelism, or null
  // Context parallelism: this rank's rows' streams (its rows' ids and positions and the layers'
  // gathered rows live in the split: ContextSplit).
  backend::Buffer cp_x;
  std::vector<int> ratios;  // every compressor ratio of the model (RowInputs::ape)

  CachePlan plan;
  // Step scratch (grow-only), in the backend's memory.
  DenseBuffers eager, recorded;
  backend::Buffer head_in, head_y, logits_buf;
  backend::Buffer mtp_e, mtp_h, mtp_hidden;  // eager MTP steps' inputs
  // Recorded MTP steps (drafting on a recording backend): the block's dense parts and inputs,
  // apart from the main steps' set so that neither moves the other's buffers.
  struct MtpRecorded {
    explicit MtpRecorded(backend::Ops& o)
        : dense(o), e(o), h(o), hidden(o), y(o), logits(o), ids(o), tokens(o), probs(o) {}
    DenseBuffers dense;
    backend::Buffer e, h, hidden;
    backend::Buffer y, logits;  // the head, when it runs in the unit (one row per sequence)
    // mtp_chain: the drafts fed to the next chained step (read by its units: fingerprinted),
    // and every step's tokens and probabilities (written between units, step-major).
    backend::Buffer ids, tokens, probs;
  } mtp_recorded;
  std::vector<int32_t> mtp_pos, head_row_ids, head_row_pad, row_host, mtp_ids;
  std::vector<float> mtp_hidden_host;
  Mat mtp_x;  // the last mtp_run's output streams (eager.x, or the recorded set's x)
  Mat mtp_logits;  // the head over every row of mtp_x when the recorded step ran it, else empty
  AttentionScratch attn;  // the attention cores' scratch (eager in every step)
  // Every sequence's KV pages (cache.h); shared so snapshots may outlive nothing but the ops.
  std::shared_ptr<backend::PagePools> pages;
  // Declared last: its destructor drops this model's recordings before the buffers they use go.
  RecordedSteps recording;

  const io::ModelConfig& cfg() const { return ckpt.config(); }
  LayerEnv env() { return {*ops, cfg(), num, rope, tp_gather.get()}; }

  backend::HcParams hc_params(const HcWeights& h) const {
    return model::hc_params(h, cfg(), num.eps);
  }

  // a[i] = the ape row of step row i for compressor ratio ratios[k] (its position mod ratio).
  void fill_ape(const StepInputs& in, size_t k, int32_t* a) const {
    for (size_t i = 0; i < in.positions.size(); ++i) a[i] = in.positions[i] % ratios[k];
  }

  // RowInputs of an eager step: the host arrays of `in`, ape rows computed here.
  RowInputs host_rows(const StepInputs& in) {
    const int64_t M = static_cast<int64_t>(in.token_ids.size());
    RowInputs r;
    r.ids = in.token_ids.data();
    r.positions = in.positions.data();
    int32_t* ape = fit_n(row_host, static_cast<int64_t>(ratios.size()) * M);
    for (size_t k = 0; k < ratios.size(); ++k) {
      fill_ape(in, k, ape + static_cast<int64_t>(k) * M);
      r.ape.emplace_back(ratios[k], ape + static_cast<int64_t>(k) * M);
    }
    return r;
  }

  // RowInputs of a recorded step of Mb >= M rows, in d.rows (one upload): rows past M are
  // padding (token 0 at position 0), which the dense parts compute and nothing reads.
  RowInputs recorded_rows(const StepInputs& in, int64_t Mb, DenseBuffers& d) {
    const int64_t n_arrays = 2 + static_cast<int64_t>(ratios.size());
    int32_t* h = fit_n(row_host, n_arrays * Mb);
    std::fill(h, h + n_arrays * Mb, 0);
    std::copy(in.token_ids.begin(), in.token_ids.end(), h);
    std::copy(in.positions.begin(), in.positions.end(), h + Mb);
    for (size_t k = 0; k < ratios.size(); ++k) {
      fill_ape(in, k, h + (2 + static_cast<int64_t>(k)) * Mb);
    }
    const size_t bytes = static_cast<size_t>(n_arrays * Mb) * sizeof(int32_t);
    auto* dev = static_cast<int32_t*>(d.rows.fit_bytes(bytes));
    ops->upload(dev, h, bytes);
    RowInputs r;
    r.ids = dev;
    r.positions = dev + Mb;
    for (size_t k = 0; k < ratios.size(); ++k) {
      r.ape.emplace_back(ratios[k], dev + (2 + static_cast<int64_t>(k)) * Mb);
    }
    return r;
  }

  // Block part 1 (spec §2.2): mHC pre-mix, norm and the attention projections of X's rows.
  void attention_in(const BlockWeights& b, Mat X, const RowInputs& rows, DenseBuffers& d) {
    backend::Ops& o = *ops;
    const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
    Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D);
    Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
    num.hc_pre_norm_act(o, X, hc_params(b.hc_attn), {}, b.attn_norm, y, {}, post, comb, u);
    attention_project(env(), b.attn, b.spec, u, rows, d.attn,
                      attention_rows(env(), b.attn, M, d.attn));
  }

  // Block part 3: attention output, mHC post-mix, then the whole FFN half (mHC, norm, MoE).
  void attention_out_ffn(const BlockWeights& b, Mat X, const RowInputs& rows, DenseBuffers& d) {
    backend::Ops& o = *ops;
    const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
    Mat y(fit(d.y, M * D), M, D), u(fit(d.u, M * D), M, D), out(fit(d.sub, M * D), M, D);
    Mat post(fit(d.post, M * n), M, n), comb(fit(d.comb, M * n * n), M, n * n);
    attention_output(env(), b.attn, b.spec, rows.positions,
                     attention_rows(env(), b.attn, M, d.attn), out, d.attn);
    num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);

    num.hc_pre_norm_act(o, X, hc_params(b.hc_ffn), {}, b.ffn_norm, y, {}, post, comb, u);
    moe_forward(o, cfg(), num, b.moe, u, rows.ids, out, d.moe, exchange.get(), tp_gather.get());
    num.hc_post_act(o, X, out, post, comb, static_cast<int>(n), X);
  }

  // X [M, n·D] <- Block(X) (spec §2.2 block), eagerly; part 2 is the attention core.
  void block(const BlockWeights& b, bool mtp, size_t cache_index, Mat X, const RowInputs& rows,
             const StepInputs& in, DenseBuffers& d) {
    attention_in(b, X, rows, d);
    attention_core(env(), b.attn, b.spec, mtp, cache_index,
                   attention_rows(env(), b.attn, X.rows, d.attn), in, attn);
    attention_out_ffn(b, X, rows, d);
  }

  // The main layers over a step, eagerly.
  void layers_eager(const StepInputs& in, Mat X) {
    const RowInputs rows = host_rows(in);
    embed_streams(rows.ids, X);
    for (size_t l = 0; l < w.layers.size(); ++l) block(w.layers[l], false, l, X, rows, in, eager);
  }

  // The main layers over a step split over the context-parallel ranks (context_parallel.h):
  // this rank's rows through the dense parts, every row into the caches, this rank's rows
  // through selection and attention; X [M, n·D] gets every rank's final streams.
  void layers_context_parallel(const StepInputs& in, Mat X) {
    ContextSplit& cp = *cp_split;
    cp.plan(in);
    const int64_t m = static_cast<int64_t>(cp.mine().size()), nD = X.cols;
    const StepInputs mine_in{cp.ids(), cp.positions(), {}};
    const RowInputs rows = host_rows(mine_in);
    LayerEnv split_env = env();
    split_env.query_of = cp.local_of().data();
    split_env.query_count = m;
    Mat Xl(fit(cp_x, m * nD), m, nD);
    if (m > 0) embed_streams(rows.ids, Xl);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const BlockWeights& b = w.layers[l];
      if (m > 0) attention_in(b, Xl, rows, eager);
      AttentionRows r = attention_rows(env(), b.attn, m, eager.attn);
      cp.gather_cache_rows(r);
      attention_core(split_env, b.attn, b.spec, false, l, r, in, attn);
      if (m > 0) {
        attention_out_ffn(b, Xl, rows, eager);
      } else if (exchange) {  // no rows here: this rank's experts still serve the others' rows
        moe_serve_only(*ops, cfg(), num, b.moe, eager.moe, *exchange);
      }
    }
    cp.gather_rows({Xl}, {X}, "final residual streams");
  }

  // The main layers over a step padded to Mb rows: the dense parts between two attention cores
  // (and before the first) are units that Ops::run_recorded may replay as CUDA graphs; the cores
  // run eagerly, on the real rows only.
  void layers_recorded(const StepInputs& in, Mat X) {
    const int64_t Mb = X.rows;
    DenseBuffers& d = recorded;
    const RowInputs rows = recorded_rows(in, Mb, d);
    const auto& layers = w.layers;
    recording.run(0, Mb, [&] {
      embed_streams(rows.ids, X);
      if (!layers.empty()) attention_in(layers[0], X, rows, d);
    });
    for (size_t l = 0; l < layers.size(); ++l) {
      attention_core(env(), layers[l].attn, layers[l].spec, false, l,
                     attention_rows(env(), layers[l].attn, Mb, d.attn), in, attn);
      recording.run(l + 1, Mb, [&] {
        attention_out_ffn(layers[l], X, rows, d);
        if (l + 1 < layers.size()) attention_in(layers[l + 1], X, rows, d);
      });
    }
    // A unit's first (eager) run may have grown a buffer: units recorded before then point to
    // freed memory, so every recording goes (they are made again, two steps later).
    recording.buffers_after_step(recorded_fingerprint());
  }

  // Every buffer a recorded unit of this model reads or writes (main steps and MTP steps): one
  // fingerprint, so that a step of either kind sees the other's buffers move too.
  RecordedSteps::Fingerprint recorded_fingerprint() const {
    RecordedSteps::Fingerprint out = recorded.fingerprint();
    const RecordedSteps::Fingerprint mtp = mtp_recorded.dense.fingerprint();
    out.insert(out.end(), mtp.begin(), mtp.end());
    for (const backend::Buffer* b : {&mtp_recorded.e, &mtp_recorded.h, &mtp_recorded.hidden,
                                     &mtp_recorded.y, &mtp_recorded.logits, &mtp_recorded.ids}) {
      out.emplace_back(b->data(), b->bytes());
    }
    return out;
  }

  // The MTP block's input (spec §2.8) into X [M, n·D]: e = enorm(embed(ids)),
  // Hs = hnorm(hidden) per stream, X = h_proj(Hs) + e_proj(e) in every stream.
  void mtp_input(const MtpWeights& mw, const int32_t* ids, CMat hidden, Mat e, Mat hs, Mat pe,
                 Mat X) {
    backend::Ops& o = *ops;
    const int64_t M = X.rows, D = cfg().hidden_size, n = cfg().hc_mult;
    o.embed_streams(ids, M, w.embed, 1, num.official, e);  // embed, then act
    num.rms_norm_act(o, e, &mw.enorm, 0, e);
    num.rms_norm_act(o, hidden, &mw.hnorm, 0, hs);
    Mat Xs(X.data, M * n, D);  // the same buffer seen as one row per stream
    o.linear(hs, mw.h_proj, Xs, num.gemm_rounded());
    o.linear(e, mw.e_proj, pe, num.gemm_rounded());
    o.add_streams(pe, n, num.official, X);  // X_i += pe in every stream, then act
  }

  // The MTP block over a step padded to Mb rows, as two recorded units around its attention
  // core (the main layers' form, layers_recorded): drafting chains one block step per draft
  // position, and eagerly each is ~50 launches. The hidden rows past the real ones are zero
  // (their norm is then finite: padding rows are computed and never read). `with_head`: the
  // head over every row too, in the second unit (into mtp_logits), for steps whose every row
  // is a sequence's last (chained drafts), instead of five eager launches after it.
  // `chained`: the ids and hidden rows are already in r.ids and r.hidden (mtp_chain).
  void mtp_recorded_step(const MtpWeights& mw, const StepInputs& in, std::vector<float>& hid_host,
                         Mat X, bool with_head, bool chained) {
    const int64_t M = static_cast<int64_t>(in.token_ids.size()), Mb = X.rows;
    const int64_t D = cfg().hidden_size, n = cfg().hc_mult;
    MtpRecorded& r = mtp_recorded;
    DenseBuffers& d = r.dense;
    RowInputs rows = recorded_rows(in, Mb, d);
    float* hid = fit(r.hidden, Mb * n * D);
    if (chained) {
      rows.ids = static_cast<const int32_t*>(r.ids.data());
    } else {
      hid_host.resize(static_cast<size_t>(Mb * n * D), 0.0f);
      std::fill(hid_host.begin() + M * n * D, hid_host.end(), 0.0f);
      ops->upload(hid, hid_host.data(), hid_host.size() * sizeof(float));
    }
    // Units after the main layers' 0..L: input, output, output with the head; a chained step's
    // own three (its ids come from another buffer: the same key would replay the other's).
    const size_t unit = w.layers.size() + 1 + (chained ? 3 : 0);
    recording.run(unit, Mb, [&] {
      mtp_input(mw, rows.ids, CMat(hid, Mb * n, D), Mat(fit(r.e, Mb * D), Mb, D),
                Mat(fit(r.h, Mb * n * D), Mb * n, D), Mat(fit(d.sub, Mb * D), Mb, D), X);
      attention_in(mw.block, X, rows, d);
    });
    attention_core(env(), mw.block.attn, mw.block.spec, true, 0,
                   attention_rows(env(), mw.block.attn, Mb, d.attn), in, attn);
    const int64_t V = cfg().vocab_size;
    Mat lg(with_head ? fit(r.logits, Mb * V) : nullptr, Mb, V);
    recording.run(unit + (with_head ? 2 : 1), Mb, [&] {
      attention_out_ffn(mw.block, X, rows, d);
      if (with_head) head(mw.head, X, lg, r.y);
    });
    if (with_head) mtp_logits = lg.rows_slice(0, M);
    recording.buffers_after_step(recorded_fingerprint());
  }

  // logits [R, V] = head(norm(hc_head(X))) (spec §2.1, §2.2 final collapse).
  void head(const HeadWeights& h, CMat X, Mat logits) { head(h, X, logits, head_y); }
  // The same with its norm's rows in y_buf (a recorded unit's own buffer).
  void head(const HeadWeights& h, CMat X, Mat logits, backend::Buffer& y_buf) {
    backend::Ops& o = *ops;
    const int64_t R = X.rows, D = cfg().hidden_size;
    Mat y(fit(y_buf, R * D), R, D);
    num.hc_head_act(o, X, hc_params(h.hc), y);
    num.rms_norm_act(o, y, &h.norm, 0, y);
    // FP32 head in both semantics; its input was just rounded (official): one exact GEMM.
    // Tensor parallelism: this rank's vocabulary rows, the logits gathered.
    if (tp_gather) {
      tp_gather->linear_gathered(o, y, w.lm_head, num.gemm_on_act(), logits, "LM head");
    } else {
      o.linear(y, w.lm_head, logits, num.gemm_on_act());
    }
  }

  // Embedding rows replicated into the n streams.
  void embed_streams(const int32_t* ids, Mat X) {
    const int64_t M = X.rows, n = cfg().hc_mult;
    // Rounded (official) in the same pass: one launch on a device backend, not 2 + n.
    ops->embed_streams(ids, M, w.embed, n, num.official, X);
  }

  // logits [R, V] of the step rows `rows` of X, in the backend's memory. On a recording backend
  // the head runs over the rows padded to their bucket (copies of the last row), of which the
  // first R are returned: its GEMM is eager, and on an H100 every step whose head met a row count
  // for the first time took 2.5-5.9 ms against ~1.4 ms (stop 41: 38 of 1,362 varlen steps at 64
  // requests; cuBLAS sets a shape up at its first call, the likely cost, not timed apart);
  // start-up recording runs the head at every bucket (EngineCore::capture_graphs), so serving
  // meets none.
  Mat head_rows(CMat X, std::span<const int32_t> rows) {
    const int64_t R = static_cast<int64_t>(rows.size()), nD = X.cols, V = cfg().vocab_size;
    const int64_t Rb = std::max(R, recorded_bucket(R));
    const Mat lg(fit(logits_buf, Rb * V), Rb, V);
    if (R == 0) return lg;
    const std::span<const int32_t> padded = RecordedSteps::padded(rows, Rb, head_row_pad);
    Mat Xs(fit(head_in, Rb * nD), Rb, nD);
    ops->copy_rows(X, padded.data(), Xs);
    head(w.head, Xs, lg);
    return lg.rows_slice(0, R);
  }
};

namespace {

LayerCachePlan::Compressed compressed_plan(int ratio, int64_t d_c, bool overlap) {
  LayerCachePlan::Compressed p;
  p.ratio = ratio;
  p.row_width = d_c;
  p.state_width = overlap ? 2 * d_c : d_c;
  // An unfinished row needs its own window's tokens, plus the previous window's for the
  // overlap half.
  p.state_tokens = overlap ? 2 * ratio : ratio;
  return p;
}

LayerCachePlan layer_plan(const io::ModelConfig& c, const io::LayerSpec& spec) {
  LayerCachePlan p;
  p.window_width = c.head_dim;
  const bool overlap = spec.compress_ratio == 4;
  if (spec.attention != io::AttentionKind::kSWA) {
    p.comp = compressed_plan(spec.compress_ratio, c.head_dim, overlap);
  }
  if (spec.attention == io::AttentionKind::kCSA) {
    p.idx = compressed_plan(spec.compress_ratio, c.index_head_dim, overlap);
  }
  return p;
}

}  // namespace

CachePlan cache_plan(const io::ModelConfig& c) {
  CachePlan plan;
  plan.window = c.sliding_window;
  plan.draft_lag = 1;  // MTP row t uses token t + 1
  for (const auto& spec : c.layers) plan.layers.push_back(layer_plan(c, spec));
  for (const auto& spec : c.mtp_layers) plan.draft_layers.push_back(layer_plan(c, spec));
  return plan;
}

Expected<std::unique_ptr<model::Model>> load(const std::string& model_dir, backend::Ops& ops,
                                             const io::LoadOptions& load, const ExpertParallel& ep,
                                             const TensorParallel& tp, const ContextParallel& cp) {
  try {
    return V4Model::load_unguarded(model_dir, ops, load, ep, tp, cp);
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(
        e, "loading " + model_dir + " on backend '" + ops.name() + "'",
        "The weights do not fit: use a device with more memory, or the CPU.");
  }
}

Expected<std::unique_ptr<model::Model>> V4Model::load_unguarded(
    const std::string& model_dir, backend::Ops& ops, const io::LoadOptions& load,
    const ExpertParallel& ep, const TensorParallel& tp, const ContextParallel& cp) {
  auto s = std::make_unique<V4Model>(ops);
  DI_ASSIGN_OR_RETURN(s->ckpt, io::Checkpoint::open(model_dir, load));
  const io::ModelConfig& c = s->ckpt.config();
  if (c.num_kv_heads != 1) {
    return unimplemented("config " + c.source + ": num_key_value_heads " +
                         std::to_string(c.num_kv_heads) +
                         " (DeepSeek-V4 attention has one K=V head)");
  }
  if (c.o_groups <= 0 || c.num_heads % c.o_groups != 0) {
    return invalid_argument("config " + c.source +
                            ": num_attention_heads must be a multiple of o_groups");
  }
  if (c.scoring_func != io::ScoreFunc::kSqrtSoftplus) {
    return unimplemented("config " + c.source + ": scoring_func " +
                         std::string(io::score_func_name(c.scoring_func)) +
                         " (only sqrtsoftplus is implemented)");
  }
  for (const auto& l : c.layers) {
    if (l.attention == io::AttentionKind::kCSA &&
        (c.index_head_dim & (c.index_head_dim - 1)) != 0) {
      return unimplemented("config " + c.source + ": index_head_dim must be a power of two");
    }
  }
  DI_TRY(ep.validate(c, ops));
  DI_TRY(tp.validate(c, ops, ep));
  DI_TRY(cp.validate(c, ops, ep));
  DI_ASSIGN_OR_RETURN(s->w, bind_weights(s->ckpt, ops, ep, tp));
  if (ep.enabled()) s->exchange = std::make_unique<MoeExchange>(ep, c.layers.size(), c.hidden_size);
  if (tp.enabled()) s->tp_gather = std::make_unique<TensorParallelGather>(*tp.comm);
  if (cp.enabled()) s->cp_split = std::make_unique<ContextSplit>(*cp.comm);
  s->plan = cache_plan(c);
  s->num = Numerics::from_config(c);
  s->rope = RopeTables::from_config(c, ops);
  // The compressor ratios in use: each gets its ape-row array in a step's RowInputs.
  auto add_ratio = [&](const AttentionWeights& a) {
    for (const CompressorWeights* cw :
         {a.compressor ? &*a.compressor : nullptr,
          a.indexer && a.indexer->compressor ? &*a.indexer->compressor : nullptr}) {
      if (cw != nullptr &&
          std::find(s->ratios.begin(), s->ratios.end(), cw->ratio) == s->ratios.end()) {
        s->ratios.push_back(cw->ratio);
      }
    }
  };
  for (const BlockWeights& b : s->w.layers) add_ratio(b.attn);
  for (const MtpWeights& m : s->w.mtp) add_ratio(m.block.attn);
  using F = backend::Feature;
  DI_TRY(backend::require(ops, {F::kSparseAttention, F::kAttentionSink, F::kHyperConnections,
                                F::kCompressorPool, F::kIndexer, F::kMoeRouting, F::kMoeExperts}));
  if (c.quantization.expert_format == io::ExpertFormat::kFp4)
    DI_TRY(backend::require(ops, {F::kFp4Weights}));
  switch (s->w.embed.weight.dtype) {
    case DType::kBF16:
      DI_TRY(backend::require(ops, {F::kDenseBf16}));
      break;
    case DType::kF16:
      DI_TRY(backend::require(ops, {F::kDenseF16}));
      break;
    default:
      DI_TRY(backend::require(ops, {F::kDenseF32}));
      break;
  }
  if (s->num.official) {
    DI_TRY(backend::require(ops, {F::kActQuantFp8, F::kBf16Probs, F::kIndexerBf16, F::kFakeQuantFp8,
                                  F::kFakeQuantFp4, F::kFp8Weights}));
  }
  return std::unique_ptr<model::Model>(std::move(s));
}

Status V4Model::forward(const StepInputs& in, StepOutputs& out) {
  return guarded_forward(in, [&] { return forward_unguarded(in, out); });
}

Status V4Model::check_forward(const StepInputs& in, StepOutputs& out) const {
  DI_TRY(check_step(in, cfg().vocab_size, false));
  if (has_upper_skip(in)) {  // every V4 compressed layer owns its cache: nothing to bound
    return unimplemented(
        "bounded replay (SequenceSpan::upper_skip) applies to DeepSeek-V4.1 "
        "models only, whose upper layers keep only a window; " +
        cfg().source + " is DeepSeek-V4");
  }
  return plan_logit_rows(in, out);
}

Status V4Model::forward_unguarded(const StepInputs& in, StepOutputs& out) {
  V4Model& s = *this;
  // The step and its logits rows (and their draws) are checked before anything runs: a refused
  // step leaves every cache as it was (and, with expert parallelism, still serves the peers).
  if (Status refused = check_forward(in, out); !refused.ok()) {
    if (exchange) serve_experts_only();
    return refused;
  }
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  const int64_t nD = static_cast<int64_t>(s.cfg().hc_mult) * s.cfg().hidden_size;
  const int64_t Mb = s.recorded_bucket(M);
  Mat X;
  if (cp_split) {  // every rank joins every gather, with rows of its own or not
    X = Mat(fit(s.eager.x, M * nD), M, nD);
    s.layers_context_parallel(in, X);
  } else if (Mb > 0) {
    X = Mat(fit(s.recorded.x, Mb * nD), Mb, nD);
    s.layers_recorded(in, X);
  } else {
    X = Mat(fit(s.eager.x, M * nD), M, nD);
    if (M > 0) {
      s.layers_eager(in, X);
    } else if (exchange) {
      serve_experts_only();
    }
  }
  for (const SequenceSpan& sq : in.sequences) sq.cache->advance(sq.count);

  int32_t* rows = fit_n(s.head_row_ids, out.logit_rows);
  for (int64_t i = 0; i < out.logit_rows; ++i) {
    rows[i] = static_cast<int32_t>(out.logit_row_of[static_cast<size_t>(i)]);
  }
  const Mat lg = s.head_rows(X, {rows, static_cast<size_t>(out.logit_rows)});
  if (in.sample_specs.empty()) {
    out.sampled.clear();
    backend::download_mat(*s.ops, lg, out.logits);
  } else {
    out.logits.clear();
    out.sampled.resize(static_cast<size_t>(out.logit_rows));
    if (out.logit_rows > 0) s.ops->sample(lg, in.sample_specs, out.sampled.data());
  }
  if (in.keep_hidden) {
    download_hidden(*s.ops, CMat(X).rows_slice(0, M), in.sequences, out.hidden);
  } else {
    out.hidden.clear();
  }
  return {};
}

Expected<std::vector<float>> V4Model::mtp_draft(SequenceCache& cache, std::span<const float> hidden,
                                                std::span<const int32_t> next_ids) {
  const MtpRows one{&cache, hidden, next_ids};
  if (next_ids.empty() && !w.mtp.empty()) return std::vector<float>();
  try {
    DI_TRY(mtp_run({&one, 1}, /*run_ahead=*/false));
    // Logits of every row (the head over all of them).
    const int64_t M = static_cast<int64_t>(next_ids.size());
    std::vector<float> logits;
    if (M == 0) return logits;
    // Over the rows padded to their bucket (head_rows says why): mtp_run's recorded step
    // computed them (mtp_x views its first M), an eager one is never padded.
    const int64_t Rb = std::max(M, recorded_bucket(M));
    const Mat lg(fit(logits_buf, Rb * cfg().vocab_size), Rb, cfg().vocab_size);
    head(w.mtp[0].head, CMat(mtp_x.data, Rb, mtp_x.cols, mtp_x.ld), lg);
    backend::download_mat(*ops, lg.rows_slice(0, M), logits);
    return logits;
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(e, "drafting " + std::to_string(next_ids.size()) + " MTP rows",
                                "Fewer draft rows per call need less memory.");
  } catch (const parallel::CollectiveFailure& e) {
    return e.status().with_context("drafting MTP rows");
  }
}

Expected<MtpStep> V4Model::mtp_step(std::span<const MtpRows> rows, bool run_ahead,
                                    MtpOutputs outputs) {
  try {
    DI_TRY(mtp_run(rows, run_ahead, /*head=*/outputs != MtpOutputs::kNone));
    if (outputs == MtpOutputs::kNone) return MtpStep{};
    MtpStep out;
    const auto R = static_cast<int64_t>(rows.size());
    if (R == 0) return out;
    // Only each entry's last row: its logits and streams (what drafting continues from).
    Mat Xs, lg;
    mtp_last_rows(rows, Xs, lg);
    if (outputs == MtpOutputs::kTokens) {  // argmax on the backend: ids, not rows, come back
      const std::vector<sample::SampleSpec> greedy(static_cast<size_t>(R));
      out.tokens.resize(static_cast<size_t>(R));
      ops->sample(lg, greedy, out.tokens.data());
    } else {
      backend::download_mat(*ops, lg, out.logits);
    }
    backend::download_mat(*ops, Xs, out.streams);
    return out;
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(
        e, "drafting MTP rows of " + std::to_string(rows.size()) + " sequences",
        "Fewer concurrent sequences need less memory.");
  } catch (const parallel::CollectiveFailure& e) {
    return e.status().with_context("drafting MTP rows");
  }
}

Expected<MtpChain> V4Model::mtp_chain(std::span<const MtpRows> rows, int steps, bool run_ahead,
                                      bool probs) {
  try {
    MtpChain out;
    DI_TRY(mtp_chain_unguarded(rows, steps, run_ahead, probs, out));
    return out;
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(
        e, "drafting " + std::to_string(steps) + " MTP tokens for " + std::to_string(rows.size()) +
               " sequences",
        "Fewer concurrent sequences or fewer draft tokens need less memory.");
  } catch (const parallel::CollectiveFailure& e) {
    return e.status().with_context("drafting MTP tokens");
  }
}

Status V4Model::mtp_chain_unguarded(std::span<const MtpRows> rows, int steps, bool run_ahead,
                                    bool probs, MtpChain& out) {
  if (steps < 1) {
    return invalid_argument("mtp_chain: " + std::to_string(steps) + " steps (at least 1)");
  }
  const auto R = static_cast<int64_t>(rows.size());
  if (R == 0) return {};
  backend::Ops& o = *ops;
  const auto S = static_cast<int64_t>(steps);
  MtpRecorded& r = mtp_recorded;
  // Every step's drafts and probabilities, step-major, and the ids the next step embeds (zero
  // past the R real rows: a recorded step reads its padding rows' ids too).
  auto* tokens = static_cast<int32_t*>(r.tokens.fit_bytes(static_cast<size_t>(S * R) * 4));
  float* prob = probs ? fit(r.probs, S * R) : nullptr;
  const int64_t n_ids = std::max(R, recorded_bucket(R));
  auto* ids = static_cast<int32_t*>(r.ids.fit_bytes(static_cast<size_t>(n_ids) * 4));
  const std::vector<int32_t> zeros(static_cast<size_t>(n_ids), 0);
  o.upload(ids, zeros.data(), zeros.size() * sizeof(int32_t));

  // Step 0: every entry's rows; its drafts are the heads of each entry's last row.
  DI_TRY(mtp_run(rows, run_ahead, /*head=*/true));
  Mat last, lg;
  mtp_last_rows(rows, last, lg);
  o.argmax_rows(lg, tokens, ids, prob);
  // A recorded chained step computes its padding rows too: their hidden rows must be finite
  // (the buffer may have just grown, or held another step's rows).
  const Mat hidden = chain_hidden(R);
  if (S > 1 && hidden.rows > R) {
    const std::vector<float> pad(static_cast<size_t>((hidden.rows - R) * hidden.cols), 0.0f);
    o.upload(hidden.data + R * hidden.cols, pad.data(), pad.size() * sizeof(float));
  }

  // Chained steps: one row per entry, its previous row's output streams and draft, both
  // already in backend memory; the host only queues work until the download at the end.
  std::vector<int32_t> placeholder(static_cast<size_t>(R), 0);
  std::vector<MtpRows> chained(static_cast<size_t>(R));
  for (int64_t e = 0; e < R; ++e) {
    chained[static_cast<size_t>(e)] = {rows[static_cast<size_t>(e)].cache, {},
                                       {&placeholder[static_cast<size_t>(e)], 1}};
  }
  for (int64_t d = 1; d < S; ++d) {
    o.copy_rows(last, nullptr, hidden.rows_slice(0, R));
    DI_TRY(mtp_run(chained, /*run_ahead=*/true, /*head=*/true, /*chained=*/true));
    mtp_last_rows(chained, last, lg);
    o.argmax_rows(lg, tokens + d * R, ids, prob != nullptr ? prob + d * R : nullptr);
  }

  // The one wait for the device: every draft (and probability), entry-major for the caller.
  std::vector<int32_t> t(static_cast<size_t>(S * R));
  o.download(t.data(), tokens, t.size() * sizeof(int32_t));
  std::vector<float> p(prob != nullptr ? t.size() : 0);
  if (prob != nullptr) o.download(p.data(), prob, p.size() * sizeof(float));
  out.tokens.resize(t.size());
  out.probs.resize(p.size());
  for (int64_t e = 0; e < R; ++e) {
    for (int64_t d = 0; d < S; ++d) {
      out.tokens[static_cast<size_t>(e * S + d)] = t[static_cast<size_t>(d * R + e)];
      if (prob != nullptr) out.probs[static_cast<size_t>(e * S + d)] = p[static_cast<size_t>(d * R + e)];
    }
  }
  return {};
}

Status V4Model::mtp_run(std::span<const MtpRows> rows, bool run_ahead, bool head, bool chained) {
  V4Model& s = *this;
  if (s.w.mtp.empty()) {
    return failed_precondition("checkpoint " + s.ckpt.model_dir() + " has no mtp.* tensors");
  }
  const io::ModelConfig& c = s.cfg();
  const int64_t D = c.hidden_size, n = c.hc_mult;
  // One step over every entry's rows: entry e's rows continue its cache's MTP state.
  int64_t M = 0;
  for (const MtpRows& r : rows) {
    const auto m = static_cast<int64_t>(r.next_ids.size());
    if (m == 0 || (!chained && static_cast<int64_t>(r.hidden.size()) != m * n * D)) {
      return invalid_argument("mtp_draft: hidden has " + std::to_string(r.hidden.size()) +
                              " values, expected " + std::to_string(m) + " rows x " +
                              std::to_string(n * D) + " (and at least one row)");
    }
    if (!run_ahead && r.cache->draft_length() + m > r.cache->length()) {
      return invalid_argument(
          "mtp_draft: the MTP block would run ahead of the main model (MTP length " +
          std::to_string(r.cache->draft_length()) + " + " + std::to_string(m) + " > main length " +
          std::to_string(r.cache->length()) + ")");
    }
    M += m;
  }
  int32_t* pos = fit_n(s.mtp_pos, M);
  std::vector<int32_t>& ids = s.mtp_ids;
  ids.clear();
  std::vector<float>& hid_host = s.mtp_hidden_host;
  hid_host.clear();
  std::vector<SequenceSpan> spans;
  for (const MtpRows& r : rows) {
    const auto m = static_cast<int64_t>(r.next_ids.size());
    for (int64_t i = 0; i < m; ++i) {
      pos[static_cast<int64_t>(ids.size()) + i] = static_cast<int32_t>(r.cache->draft_length() + i);
    }
    spans.push_back({r.cache, static_cast<int64_t>(ids.size()), m, LogitsWanted::kAll});
    ids.insert(ids.end(), r.next_ids.begin(), r.next_ids.end());
    hid_host.insert(hid_host.end(), r.hidden.begin(), r.hidden.end());
  }
  StepInputs in{ids, {pos, static_cast<size_t>(M)}, spans, false};
  DI_TRY(check_step(in, cfg().vocab_size, true));
  s.mtp_x = Mat();
  s.mtp_logits = Mat();
  if (M == 0) return {};

  const MtpWeights& mw = s.w.mtp[0];
  const int64_t Mb = s.recorded_bucket(M);
  Mat X;
  if (Mb > 0) {
    X = Mat(fit(s.mtp_recorded.dense.x, Mb * n * D), Mb, n * D);
    s.mtp_recorded_step(mw, in, hid_host, X, head && M == static_cast<int64_t>(rows.size()),
                        chained);
  } else {
    float* hid = fit(s.mtp_hidden, M * n * D);
    if (!chained) {
      s.ops->upload(hid, hid_host.data(), static_cast<size_t>(M * n * D) * sizeof(float));
    }
    RowInputs row_in = s.host_rows(in);
    if (chained) row_in.ids = static_cast<const int32_t*>(s.mtp_recorded.ids.data());
    X = Mat(fit(s.eager.x, M * n * D), M, n * D);
    s.mtp_input(mw, row_in.ids, CMat(hid, M * n, D), Mat(fit(s.mtp_e, M * D), M, D),
                Mat(fit(s.mtp_h, M * n * D), M * n, D), Mat(fit(s.eager.sub, M * D), M, D), X);
    s.block(mw.block, true, 0, X, row_in, in, s.eager);
  }
  for (const MtpRows& r : rows) r.cache->advance_draft(static_cast<int64_t>(r.next_ids.size()));
  s.mtp_x = X.rows_slice(0, M);
  return {};
}

}  // namespace deepinfer::model::deepseek_v4
