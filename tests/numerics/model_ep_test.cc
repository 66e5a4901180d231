// Expert parallelism inside the model (model/expert_parallel.h) on in-process ranks: every rank
// loads the model with its share of the routed experts and runs its own sequences (different
// prompt lengths, batches of one or two, a rank with nothing to do in some steps), prefill then
// decode steps in lockstep; each rank's logits must be the single-rank model's on the same steps,
// bit for bit. V4 (score and hash layers, official FP8/FP4 numerics and FP32 numerics) and V4.1
// (the default model), 1, 2 and 4 ranks, contiguous placements and an EPLB plan with replicas
// made from the loads the routers counted. Also: each rank binds only its experts; a rank that
// fails mid-step makes the others' steps errors, not a hang; bad placements are refused by name.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "model/bounded_replay.h"
#include "model/model.h"
#include "model_test_util.h"
#include "parallel/eplb.h"
#include "parallel/in_process_communicator.h"
#include "rank_failure_check.h"
#include "rank_schedule.h"

namespace deepinfer::model::testing {
namespace {

using parallel::Communicator;
using parallel::ExpertPlacement;
using parallel::run_ranks;

constexpr int kSteps = 5;

// Rank r's own work: prompts of different lengths (the longer ones prefilled in two chunks),
// one or two sequences, then decode steps with fixed tokens. Rank 1 starts a step late, the last
// rank of several stops a step early, and every rank of four but rank 0 has at least one idle
// step: zero-token steps of every kind.
Schedule schedule_for(int rank, int ranks, int32_t vocab) {
  Schedule s(kSteps);
  const auto tok = [&](int i) { return static_cast<int32_t>((37 * i + 11 * rank + 5) % vocab); };
  const int seqs = rank % 2 == 0 ? 2 : 1;
  const int first = rank == 1 ? 1 : 0;
  const int last = ranks > 1 && rank == ranks - 1 ? kSteps - 2 : kSteps - 1;
  for (int q = 0; q < seqs; ++q) {
    const int len = 3 + 5 * rank + 4 * q;
    std::vector<int32_t> prompt;
    for (int i = 0; i < len; ++i) prompt.push_back(tok(i + 100 * q));
    s[static_cast<size_t>(first)].push_back({q, prompt});
    for (int step = first + 1; step <= last; ++step) {
      if (ranks == 4 && rank == 2 && step == 2) continue;  // an idle step in the middle
      s[static_cast<size_t>(step)].push_back({q, {tok(1000 + step)}});
    }
  }
  return s;
}

// Runs a schedule and returns the logits of every row of every step ([step] -> flat).
Status run_schedule(Model& m, const Schedule& schedule, std::vector<std::vector<float>>* logits,
                    int fail_at_step = -1) {
  std::vector<SequenceCache> caches;
  for (int q = 0; q < 2; ++q) caches.push_back(m.new_sequence());
  logits->clear();
  for (size_t step = 0; step < schedule.size(); ++step) {
    if (static_cast<int>(step) == fail_at_step) throw std::runtime_error("rank failed mid-step");
    StepOutputs out;
    DI_TRY(run_scheduled_step(m, caches, schedule[step], false, out));
    logits->push_back(deepinfer::backend::to_vector(out.logits));
  }
  return {};
}

struct RankResult {
  std::vector<std::vector<float>> logits;
  WeightStats weights;
};

// Every rank loads `dir` with `ep` (placements as given, this rank's communicator) and runs its
// schedule; one thread per rank, each with its own one-thread CPU backend.
std::vector<RankResult> run_expert_parallel(const std::string& dir, int ranks,
                                            const std::vector<ExpertPlacement>& placements,
                                            parallel::ExpertLoadCounter* counter, int32_t vocab) {
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  const std::vector<Status> statuses = run_ranks(ranks, [&](Communicator& comm) -> Status {
    auto ops = backend::cpu::make_opt_ops(1);
    ExpertParallel ep;
    ep.comm = &comm;
    ep.placements = placements;
    ep.load_counter = counter;
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, ep));
    RankResult& r = results[static_cast<size_t>(comm.rank())];
    r.weights = m->weight_stats();
    return run_schedule(*m, schedule_for(comm.rank(), ranks, vocab), &r.logits);
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)].to_string();
  }
  return results;
}

// Each rank's logits equal the single-rank model's on the same schedule, bit for bit.
void expect_single_rank_bits(const std::string& dir, const std::vector<RankResult>& got,
                             Model& single) {
  const int ranks = static_cast<int>(got.size());
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::vector<float>> want;
    ASSERT_TRUE(run_schedule(single,
                             schedule_for(r, ranks, static_cast<int32_t>(single.vocab_size())),
                             &want)
                    .ok());
    ASSERT_EQ(got[static_cast<size_t>(r)].logits.size(), want.size());
    for (size_t step = 0; step < want.size(); ++step) {
      EXPECT_TRUE(same_bits(got[static_cast<size_t>(r)].logits[step], want[step]))
          << dir << ": " << ranks << " ranks, rank " << r << ", step " << step << " ("
          << want[step].size() / static_cast<size_t>(single.vocab_size()) << " rows)";
    }
  }
}

std::unique_ptr<Model> load_single(const std::string& dir, backend::Ops& ops) {
  auto m = load_model(dir, ops);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

void check_model(const std::string& dir) {
  auto single = load_single(dir, opt_ops());
  ASSERT_NE(single, nullptr);
  const io::ModelConfig& c = single->config();
  const int E = c.n_routed_experts;
  const auto L = static_cast<int64_t>(c.layers.size());
  const WeightStats all = single->weight_stats();
  const int64_t drafter_experts = all.routed_experts - L * E;
  for (int ranks : {1, 2, 4}) {
    const ExpertPlacement placement = ExpertPlacement::contiguous(E, ranks);
    const auto got =
        run_expert_parallel(dir, ranks, {placement}, nullptr, static_cast<int32_t>(c.vocab_size));
    expect_single_rank_bits(dir, got, *single);
    // The loader bound this rank's experts only (the drafter keeps all of its own).
    for (int rank = 0; rank < ranks; ++rank) {
      const RankResult& r = got[static_cast<size_t>(rank)];
      const auto held = static_cast<int64_t>(placement.experts_of(rank).size());
      EXPECT_EQ(r.weights.routed_experts, L * held + drafter_experts) << dir;
      EXPECT_EQ(all.bytes - r.weights.bytes,
                all.routed_expert_bytes - r.weights.routed_expert_bytes);
      if (ranks > 1) {
        EXPECT_LT(r.weights.bytes, all.bytes);
      }
    }
  }
}

TEST(ModelExpertParallel, V4OfficialQuantSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/v4-small");  // hash layer 0, score layers after
}

TEST(ModelExpertParallel, V4Fp32SameBitsOn124Ranks) {
  check_model(model_dir("v4_tiny_a", "hf_fp32"));  // gate weight after w2, no roundings
}

// Top-3 of 6 experts (4 ranks hold 1 or 2 each): the sum order of a token's experts matters
// (two terms add the same either way), and the combine must take ascending ids, not top-k order.
TEST(ModelExpertParallel, V4TopThreeSameBitsOn124Ranks) {
  check_model(model_dir("v4_tiny_b", "official_quant"));
  check_model(model_dir("v4_tiny_b", "hf_fp32"));
}

TEST(ModelExpertParallel, V41DefaultSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/default");
  check_model(model_dir("v41_tiny_b", "official_bf16"));  // top-3 of 6
}

// The routers count the loads, EPLB plans replicas from them, and a model loaded with the plan
// (hot experts on several ranks, pairs spread over the copies) still gives the same bits.
void check_eplb(const std::string& dir) {
  auto single = load_single(dir, opt_ops());
  ASSERT_NE(single, nullptr);
  const io::ModelConfig& c = single->config();
  const int E = c.n_routed_experts, L = static_cast<int>(c.layers.size()), ranks = 4;
  const auto vocab = static_cast<int32_t>(c.vocab_size);
  parallel::ExpertLoadCounter counter(L, E);
  run_expert_parallel(dir, ranks, {ExpertPlacement::contiguous(E, ranks)}, &counter, vocab);
  const auto load = counter.snapshot();
  int64_t rows = 0;
  for (int r = 0; r < ranks; ++r) {
    for (const Step& step : schedule_for(r, ranks, vocab)) {
      for (const Chunk& ch : step) rows += static_cast<int64_t>(ch.tokens.size());
    }
  }
  for (const auto& layer : load) {
    double pairs = 0;
    for (double x : layer) pairs += x;
    EXPECT_EQ(pairs, static_cast<double>(rows * c.num_experts_per_tok));  // every routed pair
  }
  parallel::EplbConfig config;
  config.num_replicas = E + ranks;  // one spare slot per rank
  config.num_gpus = ranks;
  auto plan = parallel::rebalance(load, config);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto placements = parallel::expert_placements(*plan);
  ASSERT_TRUE(placements.ok()) << placements.status().to_string();
  size_t copies = 0;
  for (const ExpertPlacement& p : *placements) {
    for (const auto& r : p.replicas) copies = std::max(copies, r.size());
  }
  EXPECT_GT(copies, 1u);  // some expert is replicated
  const auto got = run_expert_parallel(dir, ranks, *placements, nullptr, vocab);
  expect_single_rank_bits(dir, got, *single);
}

TEST(ModelExpertParallel, EplbReplicasFromCountedLoadsSameBits) {
  check_eplb(source_dir() + "/models/v4-small");
  check_eplb(source_dir() + "/models/default");
}

// V4.1 bounded replay: the first chunks of a prompt skip the upper layers entirely (zero rows
// there), yet those layers' exchanges still happen on that rank, so its peer, running ordinary
// steps, neither stalls nor changes; both ranks keep the single-rank bits.
Status replay_then_decode(Model& m, std::vector<std::vector<float>>* logits) {
  SequenceCache c = m.new_sequence();
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(static_cast<int32_t>((29 * i + 3) % 200));
  const int64_t n = 40, chunk = 8, from = upper_kept_from(n, 8);
  for (int64_t at = 0; at < n; at += chunk) {
    const bool last = at + chunk == n;
    DI_ASSIGN_OR_RETURN(StepOutputs out, m.extend(c, {ids.data() + at, static_cast<size_t>(chunk)},
                                                  last ? LogitsWanted::kLast : LogitsWanted::kNone,
                                                  false, upper_skip_rows(at, chunk, from)));
    logits->push_back(deepinfer::backend::to_vector(out.logits));
  }
  for (int32_t t : {5, 17}) {
    DI_ASSIGN_OR_RETURN(StepOutputs out, m.decode(c, t));
    logits->push_back(deepinfer::backend::to_vector(out.logits));
  }
  return {};
}

Status plain_steps(Model& m, std::vector<std::vector<float>>* logits) {
  SequenceCache c = m.new_sequence();
  DI_ASSIGN_OR_RETURN(StepOutputs out, m.extend(c, std::vector<int32_t>{7, 8, 9, 10, 11}));
  logits->push_back(deepinfer::backend::to_vector(out.logits));
  for (int i = 0; i < 6; ++i) {  // as many steps as replay_then_decode
    DI_ASSIGN_OR_RETURN(StepOutputs d, m.decode(c, static_cast<int32_t>(20 + i)));
    logits->push_back(deepinfer::backend::to_vector(d.logits));
  }
  return {};
}

TEST(ModelExpertParallel, V41BoundedReplaySkippedLayersStillServe) {
  const std::string dir = model_dir("v41_tiny_a", "official_quant");
  using Body = Status (*)(Model&, std::vector<std::vector<float>>*);
  const Body bodies[2] = {replay_then_decode, plain_steps};
  std::vector<std::vector<float>> got[2];
  const std::vector<Status> statuses = run_ranks(2, [&](Communicator& comm) -> Status {
    auto ops = backend::cpu::make_opt_ops(1);
    ExpertParallel ep;
    ep.comm = &comm;
    ep.placements = {ExpertPlacement::contiguous(4, 2)};
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, ep));
    return bodies[comm.rank()](*m, &got[comm.rank()]);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << statuses[static_cast<size_t>(r)].to_string();
    auto single = load_single(dir, opt_ops());
    ASSERT_NE(single, nullptr);
    std::vector<std::vector<float>> want;
    ASSERT_TRUE(bodies[r](*single, &want).ok());
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t step = 0; step < want.size(); ++step) {
      EXPECT_TRUE(same_bits(got[r][step], want[step])) << "rank " << r << ", step " << step;
    }
  }
}

TEST(ModelExpertParallel, ARankThatFailsMidStepFailsTheOthersWithoutAHang) {
  const std::string dir = source_dir() + "/models/v4-small";
  expect_rank_failure_propagates(
      [&](Communicator& comm, int fail_step) -> Status {
        auto ops = backend::cpu::make_opt_ops(1);
        ExpertParallel ep;
        ep.comm = &comm;
        ep.placements = {ExpertPlacement::contiguous(8, 3)};
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, ep));
        std::vector<std::vector<float>> logits;
        return run_schedule(*m, schedule_for(comm.rank(), 3, 256), &logits, fail_step);
      },
      "expert parallelism, MoE layer");
}

TEST(ModelExpertParallel, BadPlacementsAreRefusedByName) {
  const std::string dir = source_dir() + "/models/v4-small";
  const auto load_with = [&](std::vector<ExpertPlacement> placements, int ranks) {
    std::vector<Status> errors(static_cast<size_t>(ranks));
    run_ranks(ranks, [&](Communicator& comm) -> Status {
      ExpertParallel ep;
      ep.comm = &comm;
      ep.placements = placements;
      auto m = load_model(dir, opt_ops(), {}, ep);  // refused before anything runs
      errors[static_cast<size_t>(comm.rank())] = m.status();
      return Status();
    });
    return errors[0];
  };
  ExpertPlacement gap = ExpertPlacement::contiguous(8, 2);
  gap.replicas[3].clear();
  EXPECT_NE(load_with({gap}, 2).message().find("expert 3 is held by no rank"), std::string::npos);
  EXPECT_NE(load_with({ExpertPlacement::contiguous(8, 4)}, 2).message().find("made for 4 ranks"),
            std::string::npos);
  EXPECT_NE(load_with({ExpertPlacement::contiguous(6, 2)}, 2).message().find("places 6 experts"),
            std::string::npos);
  EXPECT_NE(load_with({ExpertPlacement::contiguous(8, 2), ExpertPlacement::contiguous(8, 2)}, 2)
                .message()
                .find("2 placements for 4 layers"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::model::testing
