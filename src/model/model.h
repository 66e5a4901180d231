// Model: the seam between the engine and a model family. DeepSeek-V4 (deepseek_v4/) and
// DeepSeek-V4.1 (deepseek_v41/) implement it; the runtime, the CLI, the Python API and the
// benchmarks hold a Model and never name a family.
//
//   auto ops = backend::cpu::make_opt_ops();
//   DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model("/models/v41", *ops));
//   SequenceCache seq = m->new_sequence();
//   DI_ASSIGN_OR_RETURN(auto out, m->extend(seq, prompt_ids));   // prefill: last-row logits
//   DI_ASSIGN_OR_RETURN(auto next, m->decode(seq, token));       // decode = extend by one
//
// Every step shape (prefill, chunked prefill, decode, a verify block, several sequences at once
// through forward()) goes through the same code, so they agree by construction up to FP32
// summation order. The numeric semantics come from the checkpoint (quantized = the official
// quantisation-aware points, else FP32; model/layers/numerics.h). A Model is not thread-safe (it
// owns the step scratch); the ops object must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "backend/page_pool.h"
#include "base/status.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/cache.h"
#include "model/context_parallel.h"
#include "model/expert_parallel.h"
#include "model/layers/weights.h"
#include "model/step.h"
#include "model/tensor_parallel.h"

namespace deepinfer::model {

// The draft layers a checkpoint carries (speculative decoding; spec §2.8, §6.4).
enum class DrafterKind : uint8_t {
  kNone,
  kMtp,     // DeepSeek-V4: one autoregressive MTP block per drafted token
  kDSpark,  // DeepSeek-V4.1: a block drafter (Markov and confidence heads)
};
const char* drafter_kind_name(DrafterKind k);  // "none", "mtp", "dspark"

// One DSpark draft block (spec §6.7 item 10): k tokens after an anchor, chosen left to right.
struct DraftBlock {
  std::vector<int32_t> tokens;    // [k] the drafted tokens
  std::vector<float> logits;      // [k, vocab] draft logits (lm_head(n_j) + Markov bias), FP32
  std::vector<float> confidence;  // [k] confidence logits (before the sigmoid)
};

// One sequence's DSpark draft in a batch (Model::dspark_draft_all): its cache, its anchor (the
// token at position cache.length()) and, optionally, teacher-forced predecessors (as
// dspark_draft's `forced`).
struct DSparkJob {
  SequenceCache* cache = nullptr;
  int32_t anchor = 0;
  std::span<const int32_t> forced;
  // Sampled drafts (speculative decoding's residual acceptance): slot j's token is drawn with
  // draws[j] (Ops::sample: temperature, min_p, top_k, top_p at its uniform) instead of the
  // argmax, and the block carries its draft logits (the caller needs the distribution q each
  // token was drawn from). Empty: greedy.
  std::span<const sample::SampleSpec> draws;
};

// One sequence's rows for the MTP block (batched drafting, Model::mtp_step): the target's
// final streams of positions cache.draft_length() .. + rows, and the token after each.
struct MtpRows {
  SequenceCache* cache = nullptr;
  std::span<const float> hidden;
  std::span<const int32_t> next_ids;
};
// What Model::mtp_step returns for the last row of each entry: nothing (only advance the MTP
// state), the argmax token drawn on the backend (no logits leave it), or the logits.
enum class MtpOutputs : uint8_t { kNone, kTokens, kLogits };
// The MTP block's outputs at the last row of each entry: tokens [entries] (kTokens) or logits
// [entries, vocab] (kLogits), and output streams [entries, hc_mult · hidden] (both).
struct MtpStep {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  std::vector<float> streams;
};
// What Model::mtp_chain returns: tokens [entries, steps], entry-major (the draft of step d for
// entry e at e·steps + d, or kSampleNonFinite / kSampleNoToken where that row had none), and,
// when asked, the block's probability of each (the same layout; 0 where there is no token).
struct MtpChain {
  std::vector<int32_t> tokens;
  std::vector<float> probs;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const io::ModelConfig& config() const = 0;
  // True for a quantized checkpoint (official quantisation-aware semantics).
  virtual bool official_semantics() const = 0;
  virtual DrafterKind drafter() const = 0;
  bool has_mtp() const { return drafter() == DrafterKind::kMtp; }
  int64_t vocab_size() const { return config().vocab_size; }

  // A new sequence's caches, taken from the model's page pools (backend memory): throws
  // backend::OutOfMemory when they do not fit (the engine turns it into the request's error).
  virtual SequenceCache new_sequence(const CacheOptions& options = {}) const = 0;
  // Pages of KV memory the model's pools reserved from the backend, and those in use now.
  virtual backend::PagePool::Stats cache_memory() const = 0;
  // Host work of the model's own that benchmarks report beside the step time, cumulative since
  // load: (name, value) pairs, e.g. V4.1's Engram gather ("engram_gather_seconds",
  // "engram_upload_bytes", "engram_steps"). Empty when the model has none.
  virtual std::vector<std::pair<std::string, double>> host_counters() const { return {}; }
  // What the weight binding took from the checkpoint (layers/weights.h): with expert
  // parallelism, this rank's share of the routed experts.
  virtual WeightStats weight_stats() const = 0;

  // One step over any mix of sequences (step.h). Advances every sequence's cache. When the
  // backend runs out of memory mid-step, the result is a ResourceExhausted status that says
  // what to change; the model stays usable, but that step's caches are then invalid and must be
  // discarded (as after any error). A refused step (bad input) leaves every cache as it was.
  virtual Status forward(const StepInputs& in, StepOutputs& out) = 0;

  // Expert parallelism, EPLB while serving (docs/parallel.md, "EPLB in the engine"): makes this
  // rank hold exactly the routed experts `placements` give it (one per main layer, or one for
  // all; the same on every rank of the group), binding the new ones from the checkpoint and
  // dropping the others, and routes every later forward's exchange by them. Between forwards
  // only, and every rank must switch before the next one. All or nothing: an error leaves the
  // model as it was. FailedPrecondition for a model loaded without expert parallelism.
  virtual Expected<ExpertMoves> set_expert_placements(
      std::vector<parallel::ExpertPlacement> placements);

  // Single-sequence conveniences over forward(): the tokens continue the cache. Logits are
  // [rows, vocab] for the last row (kLast) or every row (kAll).
  // upper_skip: SequenceSpan::upper_skip (bounded replay, V4.1); hidden_tail:
  // SequenceSpan::hidden_tail (with keep_hidden, only the last rows' hidden streams).
  Expected<StepOutputs> extend(SequenceCache& cache, std::span<const int32_t> ids,
                               LogitsWanted logits = LogitsWanted::kLast, bool keep_hidden = false,
                               int64_t upper_skip = 0, int64_t hidden_tail = -1);
  Expected<StepOutputs> decode(SequenceCache& cache, int32_t token);

  // Encoder-side bounded replay (DeepSeek-V4.1; docs/bounded_replay.md). `part`: a state of
  // h = known.size() positions whose compressed rows and index keys it holds
  // (SequenceCache::compressed_part of a prefix snapshot; h closes every compression group);
  // known: the tokens of those positions. Returns a new sequence of length `from` that holds
  // part's compressed rows and index keys (shared), the compressor states and the Engram
  // look-back as they are there, and empty windows, so that extend(cache, known[from, h))
  // rebuilds every layer's window and the drafter's context from those tokens alone (the first
  // rows see windows cut at `from`: an approximation unless from == 0) while the KV sources
  // keep the restored rows. Unimplemented for families without shared compressed KV (V4).
  virtual Expected<SequenceCache> window_replay_state(const SequenceCache& part,
                                                      std::span<const int32_t> known,
                                                      int64_t from) const;

  // DeepSeek-V4 MTP draft logits (spec §2.8), block 0. Row i combines the main streams of
  // position p = cache.draft_length() + i (hidden row i, as returned by extend(keep_hidden)) with
  // the embedding of token p + 1 (next_ids[i]) and predicts token p + 2. Advances the MTP state.
  // FailedPrecondition without an MTP block.
  virtual Expected<std::vector<float>> mtp_draft(SequenceCache& cache,
                                                 std::span<const float> hidden,
                                                 std::span<const int32_t> next_ids);
  // mtp_draft over several sequences at once (one block step for all their rows; every entry
  // has at least one row), returning only each entry's last row, with the block's output
  // streams there: what batched drafting needs. Chained drafts feed those streams back in place
  // of the main streams, which runs the MTP state ahead of the main model: `run_ahead` allows
  // it (the caller then cuts it back with SequenceCache::truncate_draft). MtpOutputs::kNone only
  // advances the MTP state (no head): a drafter that keeps up while it is not drafting.
  virtual Expected<MtpStep> mtp_step(std::span<const MtpRows> rows, bool run_ahead = false,
                                     MtpOutputs outputs = MtpOutputs::kLogits);
  // MTP drafting chained on the backend (the engine's MTP drafter, one call per engine step):
  // the block step over every entry's rows, as mtp_step(rows, run_ahead), whose greedy token
  // after an entry's last row is its first draft, then `steps` - 1 chained steps over every
  // entry (run ahead), each on the block's output streams of the entry's previous row with its
  // previous draft as the token. Drafts are drawn and fed on the backend (Ops::argmax_rows), so
  // no step waits for the host: only the drafts (and, with `probs`, their probabilities) come
  // back, once, at the end. Equals mtp_step(kTokens) chained step by step on the same inputs
  // (its streams fed back, its tokens as the next ids), except that an entry whose row had no
  // token (kSampleNonFinite) keeps being run with id 0: its later slots are meaningless, and
  // the caller ends the entry's drafts at the code. The MTP state is left run ahead by steps - 1
  // past the rows: the caller cuts it back (SequenceCache::truncate_draft).
  virtual Expected<MtpChain> mtp_chain(std::span<const MtpRows> rows, int steps, bool run_ahead,
                                       bool probs);

  // Whether forwards keep the checkpoint's drafter context (DeepSeek-V4.1 DSpark: every row's
  // target features projected into each stage's window ring, which a draft reads). On by
  // default; a caller that will not draft with DSpark (the engine with another method or none)
  // turns it off and saves that work in every step (the engine also while varlen has put DSpark
  // to sleep): the sequences' drafter context then lags and dspark_draft refuses them
  // (FailedPrecondition). With it on again, a lagging sequence's next forward restarts its
  // context there (empty windows: drafts weaker until they refill, then exactly as if it had
  // never stopped). Either setting may change between forwards. No effect on other models.
  virtual void set_draft_context(bool /*keep*/) {}

  // DeepSeek-V4.1 DSpark draft of `k` tokens after `anchor`, the token at position
  // cache.length() (not yet processed by the model; the drafter reads the context features of
  // the positions before it). Slot j's token is the argmax of its draft logits, unless
  // `forced` gives the tokens to condition the Markov and confidence heads on (teacher forcing:
  // forced[j] is the token slot j + 1 sees as its predecessor; tests and acceptance studies).
  // The cache is not changed. FailedPrecondition for models without a DSpark drafter.
  virtual Expected<DraftBlock> dspark_draft(SequenceCache& cache, int32_t anchor, int k,
                                            std::span<const int32_t> forced = {});
  // dspark_draft over several sequences at once (batched drafting): one forward of the
  // drafter's stages over every job's block of k positions (each block attends to its own
  // sequence's context rows and its own block), the head over all of them, and the Markov and
  // confidence heads one batched step per slot. Entry e equals dspark_draft(*jobs[e].cache,
  // jobs[e].anchor, k, jobs[e].forced) bit for bit on the CPU backends. `logits`: whether the
  // blocks carry their draft logits (the drafter needs only tokens and confidences; the [k,
  // vocab] logits of every job are host work it may skip). A bad job refuses the whole call.
  virtual Expected<std::vector<DraftBlock>> dspark_draft_all(std::span<const DSparkJob> jobs, int k,
                                                             bool logits = true);
};

// Opens model_dir, reads its config.json and loads the family it names (deepseek_v4 or
// deepseek_v41) on `ops`. Errors name the directory / tensor / missing backend feature.
// load.format kDummy: random weights generated on `ops` from config.json alone
// (io/dummy_weights.h), the same bits for the same load.seed. ep: expert parallelism, this
// rank's part (expert_parallel.h); off by default. With it every rank loads its own model with
// the same placements and runs forward() in lockstep; a failed peer makes the step an error.
// tp: tensor parallelism, this rank's part (tensor_parallel.h); off by default. With it every
// rank loads its shards and makes every call (forward, drafting) with the same inputs.
// cp: context parallelism, this rank's part (context_parallel.h); off by default, DeepSeek-V4
// only. With it every rank loads the whole model and calls forward() with the same whole steps;
// each computes its zig-zag share of the rows and all end with the whole cache and logits.
Expected<std::unique_ptr<Model>> load_model(const std::string& model_dir, backend::Ops& ops,
                                            const io::LoadOptions& load = {},
                                            const ExpertParallel& ep = {},
                                            const TensorParallel& tp = {},
                                            const ContextParallel& cp = {});

// An op ran out of its backend's memory (backend::OutOfMemory): a ResourceExhausted status that
// says what ran out, what the model was doing and what needs less memory.
Status out_of_memory_status(const backend::OutOfMemory& e, const std::string& doing,
                            const std::string& fix);

// A step's forward (`forward`: a model's unguarded one) with what it may throw turned into the
// step's Status: its backend's memory running out (backend::OutOfMemory) and a collective between
// ranks failing (parallel::CollectiveFailure). Either leaves the step's sequences' caches invalid.
Status guarded_forward(const StepInputs& in, const std::function<Status()>& forward);

}  // namespace deepinfer::model
