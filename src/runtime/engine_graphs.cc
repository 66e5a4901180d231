// EngineCore::capture_graphs: the CUDA graphs of every step size, recorded at start-up.
//
// A recording backend (CudaOps) runs a recorded unit eagerly the first time, captures it the
// second and replays it from then on, per unit and row bucket (model/recorded_steps.h). Two
// costs of doing that lazily, while serving: each new bucket's two setup steps cost several
// replays, and a step larger than any before grows the buffers every recording uses, which
// drops them all (made again two steps later, bucket by bucket). A workload whose step sizes
// wander (confidence-scheduled verification, MTP catching up a varying number of accepted
// rows, batches shrinking as requests end) kept paying both; varlen's probes leave such steps
// out of what they measure, so it did not even see them. vLLM captures its graph sizes at
// start-up for the same reason. Here: the largest step of each kind first (every buffer
// reaches its size before anything is captured), then every bucket, largest first, until its
// units are captured.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/recorded_steps.h"
#include "runtime/engine_core.h"
#include "sample/sample_spec.h"

namespace deepinfer::runtime {

namespace {
// Runs `step` until every unit it runs is recorded: a run whose setups were all captures (or
// refused captures) and that dropped nothing leaves only replays for the next one, so it is
// the last (a replay run to confirm would cost a third of the start-up). At most a few runs:
// after a buffer grew, a unit takes three (the drop, a first run, the capture).
template <typename Step>
Status until_recorded(backend::Ops& ops, Step&& step) {
  constexpr int kMostRuns = 4;
  for (int run = 0; run < kMostRuns; ++run) {
    const backend::Ops::RecordingCounts before = ops.recording_counts();
    DI_TRY(step());
    const backend::Ops::RecordingCounts after = ops.recording_counts();
    const int64_t first_runs = (after.setups - before.setups) - (after.captured - before.captured) -
                               (after.refused - before.refused);
    if (first_runs == 0 && after.drops == before.drops) break;
  }
  return {};
}

std::vector<int32_t> scratch_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 1) % vocab);
  return ids;
}
}  // namespace

Status EngineCore::scratch_draft_step(int64_t seqs, int64_t rows_each, int depth) {
  // `seqs` fresh sequences of a 2-token prompt (one forward), then one step of rows_each rows
  // each with the hidden streams kept, and the drafter's work after it (propose_all): what a
  // decode (rows_each 1) or a verify step whose drafts were all accepted costs the drafter.
  const int64_t vocab = model_->vocab_size(), prompt = 2;
  std::vector<model::SequenceCache> caches;
  caches.reserve(static_cast<size_t>(seqs));
  for (int64_t s = 0; s < seqs; ++s) caches.push_back(model_->new_sequence());
  std::vector<int32_t> ids = scratch_ids(seqs * (prompt + rows_each + 1), vocab);
  auto step = [&](int64_t first, int64_t n, bool hidden, model::StepOutputs& out) {
    std::vector<int32_t> tok, pos;
    std::vector<model::SequenceSpan> spans;
    for (int64_t s = 0; s < seqs; ++s) {
      spans.push_back({&caches[static_cast<size_t>(s)], static_cast<int64_t>(tok.size()), n,
                       model::LogitsWanted::kAll});
      for (int64_t i = 0; i < n; ++i) {
        tok.push_back(ids[static_cast<size_t>(s * (prompt + rows_each + 1) + first + i)]);
        pos.push_back(static_cast<int32_t>(first + i));
      }
    }
    model::StepInputs in{tok, pos, spans, hidden};
    return forward_model(in, out);
  };
  model::StepOutputs out;
  DI_TRY(step(0, prompt, drafter_->wants_hidden(), out));
  DI_TRY(step(prompt, rows_each, drafter_->wants_hidden(), out));
  std::vector<spec::DraftState> states(static_cast<size_t>(seqs));
  std::vector<spec::Drafter::Job> jobs(static_cast<size_t>(seqs));
  const int64_t per = prompt + rows_each + 1;
  const size_t width =
      out.hidden.empty() ? 0 : out.hidden.size() / static_cast<size_t>(seqs * rows_each);
  for (int64_t s = 0; s < seqs; ++s) {
    spec::Drafter::Job& j = jobs[static_cast<size_t>(s)];
    j.cache = &caches[static_cast<size_t>(s)];
    j.context = std::span<const int32_t>(ids).subspan(static_cast<size_t>(s * per),
                                                      static_cast<size_t>(per));
    j.state = &states[static_cast<size_t>(s)];
    j.first = prompt;
    if (width > 0) {
      j.hidden = std::span<const float>(out.hidden)
                     .subspan(static_cast<size_t>(s * rows_each) * width,
                              static_cast<size_t>(rows_each) * width);
    }
  }
  drafter_->propose_all(jobs, depth > 0 ? depth : spec_tokens_);
  return {};
}

void EngineCore::capture_graphs() {
  const int64_t record_rows = ops_->record_max_rows();
  const int64_t most = std::min<int64_t>(record_rows, sched_->config().max_num_batched_tokens);
  if (most <= 0 || stand_in_forward_ || lockstep_) return;
  const auto t0 = SteadyClock::now();
  const int64_t vocab = model_->vocab_size();
  const bool drafts =
      drafter_ != nullptr && (drafter_->wants_hidden() || drafter_->reads_draft_context());
  const std::vector<int64_t> sizes = model::RecordedSteps::buckets(most, record_rows);
  const int64_t most_seqs = std::min<int64_t>(sched_->config().max_num_seqs, most);
  const std::vector<int64_t> seq_sizes = model::RecordedSteps::buckets(most_seqs, record_rows);
  // DSpark with varlen: its blocks in every row bucket (below), which covers the sequence
  // buckets x k that the loop for other drafters records.
  const bool every_depth = drafts && spec_varlen_ && drafter_->reads_draft_context();
  // One fresh sequence's prompt of `rows` tokens: that bucket's recorded units, and with
  // `all_logits` the LM head at that row count too, every row's logits drawn greedily on the
  // backend (nothing vocabulary-sized comes back). The head is eager, and on a GPU the steps
  // whose head met a row count for the first time were slow (2.5-5.9 ms against ~1.4 ms, stop
  // 41: cuBLAS sets a shape up at its first call); the models run it over their logits rows
  // padded to a bucket, so these are all the counts it meets, and once each is enough.
  auto main_step = [&](int64_t rows, bool all_logits) -> Status {
    model::SequenceCache seq = model_->new_sequence();
    const std::vector<int32_t> ids = scratch_ids(rows, vocab);
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    std::iota(pos.begin(), pos.end(), 0);
    const model::SequenceSpan span{
        &seq, 0, rows, all_logits ? model::LogitsWanted::kAll : model::LogitsWanted::kLast};
    const std::vector<sample::SampleSpec> greedy(static_cast<size_t>(all_logits ? rows : 1));
    model::StepOutputs out;
    return forward_model(model::StepInputs{ids, pos, {&span, 1}, false, greedy}, out);
  };
  const auto record = [&]() -> Status {
    // Every buffer at its largest first: the biggest main step, the drafter's biggest steps
    // (many rows of one sequence: MTP catching up a prompt or accepted drafts; one row of each
    // of the most sequences: its head and chained drafts, DSpark's blocks).
    DI_TRY(main_step(sizes.back(), false));
    if (drafts) {
      DI_TRY(scratch_draft_step(1, sizes.back()));
      DI_TRY(scratch_draft_step(seq_sizes.back(), 1));
    }
    for (auto b = sizes.rbegin(); b != sizes.rend(); ++b) {
      bool head = true;  // the head's row count: the bucket's first run only
      DI_TRY(until_recorded(*ops_, [&] { return main_step(*b, std::exchange(head, false)); }));
    }
    // Varlen puts a drafter that does not pay to sleep, and DSpark's context with it: the main
    // steps' other form (execute_unguarded; the context goes back on below, whatever happens).
    if (every_depth) {
      model_->set_draft_context(false);
      for (auto b = sizes.rbegin(); b != sizes.rend(); ++b) {
        DI_TRY(until_recorded(*ops_, [&] { return main_step(*b, false); }));
      }
      model_->set_draft_context(true);
    }
    if (drafts) {
      for (auto b = sizes.rbegin(); b != sizes.rend(); ++b) {
        DI_TRY(until_recorded(*ops_, [&] { return scratch_draft_step(1, *b); }));
      }
      for (auto b = seq_sizes.rbegin(); b != seq_sizes.rend() && !every_depth; ++b) {
        DI_TRY(until_recorded(*ops_, [&] { return scratch_draft_step(*b, 1); }));
      }
    }
    // DSpark drafts a block of `depth` rows per sequence, for any number of sequences, and
    // varlen drafts as deep as its budget admits (+1): its units' row counts are sequences x
    // depth, up to the most sequences x k, landing in row buckets the sequence buckets x k above
    // miss (3 sequences x 5 rows: 16; 4 x 5: 24). Every such row bucket, largest first, each
    // from a (sequences, depth) pair that lands in it (stop 40, H100: without them DSpark varlen
    // set up 1-10 steps per timed run, up to 31 ms of a 0.25 s run; with them none, start-up
    // 0.96-1.32 s against 0.69-1.08). With varlen only: a fixed k's blocks are all k deep, so
    // only its sequence counts between buckets still set up while serving (1 step per 64-request
    // run with these recordings, 3 without), and the one H100 run of a fixed k with them read its
    // 64-request verify forwards at 5.4-6.6 ms against 4.3-4.9 ms the call before, on another
    // machine: not explained, so not kept for a fixed k.
    if (every_depth) {
      const int64_t k = spec_tokens_;
      const std::vector<int64_t> rows = model::RecordedSteps::buckets(most_seqs * k, record_rows);
      std::vector<int64_t> drafted;  // the sequence counts drafted so far
      for (auto b = rows.rbegin(); b != rows.rend(); ++b) {
        for (int64_t depth = k; depth >= 1; --depth) {
          const int64_t seqs = *b / depth;
          if (seqs < 1 || seqs > most_seqs ||
              model::RecordedSteps::bucket(seqs * depth, record_rows) != *b) {
            continue;
          }
          DI_TRY(until_recorded(
              *ops_, [&] { return scratch_draft_step(seqs, 1, static_cast<int>(depth)); }));
          drafted.push_back(model::RecordedSteps::bucket(seqs, record_rows));
          break;
        }
      }
      // The drafter's eager heads (DSpark's Markov and confidence heads) run over the drafted
      // sequences padded to their bucket: every sequence bucket once, so serving meets no first
      // GEMM call at a new row count (stop 41; GraphCapture tests).
      for (const int64_t seqs : seq_sizes) {
        if (std::find(drafted.begin(), drafted.end(), seqs) != drafted.end()) continue;
        DI_TRY(until_recorded(*ops_, [&] { return scratch_draft_step(seqs, 1, 1); }));
      }
    }
    return {};
  };
  // Not fatal (a step that fails, or does not fit beside the weights): what is not recorded now
  // is recorded while serving, as before.
  try {
    (void)record();
  } catch (const backend::OutOfMemory&) {
  }
  if (drafts && drafter_->reads_draft_context()) model_->set_draft_context(true);
  stats_.graph_startup_seconds = seconds_since(t0);
}

}  // namespace deepinfer::runtime
