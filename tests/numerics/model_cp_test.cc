// Context parallelism inside the model (model/context_parallel.h) on in-process ranks: every
// rank loads the whole model and runs the same steps (long prefills split zig-zag over the
// ranks, a chunk continuing a cached prefix beside another prompt, decode steps after them);
// every rank's logits of every row, and its final hidden rows, must be the single-rank model's,
// bit for bit. DeepSeek-V4 (official FP8/FP4 and FP32 numerics; the ref and opt backends), 1, 2
// and 4 ranks, prompt lengths not divisible by 2R, long enough that the window wraps and every
// compressor emits rows (and the CSA top-k really selects). Also: the zig-zag split balances
// causal attention work where equal token counts do not; a rank that fails mid-step makes the
// others' steps errors, not a hang; CP with EP over the same ranks gives the same bits; CP beside
// TP, and bounded replay with it, are refused by name. DeepSeek-V4.1 likewise (the default model
// and two tiny ones), its DSpark draft too.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "model/context_parallel.h"
#include "model/model.h"
#include "model_test_util.h"
#include "parallel/expert_placement.h"
#include "parallel/in_process_communicator.h"
#include "rank_failure_check.h"
#include "rank_schedule.h"

namespace deepinfer::model::testing {
namespace {

using parallel::Communicator;
using parallel::run_ranks;

std::vector<int32_t> tokens(int first, int n, int32_t vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((37 * (first + i) + 5) % vocab));
  return t;
}

// Sequence 0: a 301-token prompt (the 128-row window wraps twice; the ratio-4 compressors emit
// 75 rows, more than index_topk 16; ratio 16 emits 18), decoded. Sequence 1, in the same run: a
// 203-token prompt, then a 77-token chunk continuing its cache beside sequence 0's decode, then
// decodes of both.
Schedule schedule(int32_t vocab) {
  Schedule s;
  s.push_back({{0, tokens(0, 301, vocab)}});
  s.push_back({{0, tokens(400, 1, vocab)}, {1, tokens(1000, 203, vocab)}});
  s.push_back({{1, tokens(1300, 77, vocab)}, {0, tokens(401, 1, vocab)}});
  for (int step = 0; step < 3; ++step) {
    s.push_back({{0, tokens(500 + step, 1, vocab)}, {1, tokens(600 + step, 1, vocab)}});
  }
  return s;
}

// Every row's logits of every step, then every step's final hidden rows; with a DSpark drafter
// then a draft from sequence 0's cache (its context rings hold every rank's rows' features).
Status run_schedule(Model& m, const Schedule& sch, std::vector<std::vector<float>>* outputs,
                    int fail_at_step = -1) {
  std::vector<SequenceCache> caches;
  for (int q = 0; q < 2; ++q) caches.push_back(m.new_sequence());
  outputs->clear();
  std::vector<std::vector<float>> hidden;
  for (size_t step = 0; step < sch.size(); ++step) {
    if (static_cast<int>(step) == fail_at_step) throw std::runtime_error("rank failed mid-step");
    StepOutputs out;
    DI_TRY(run_scheduled_step(m, caches, sch[step], /*keep_hidden=*/true, out));
    outputs->push_back(deepinfer::backend::to_vector(out.logits));
    hidden.push_back(deepinfer::backend::to_vector(out.hidden));
  }
  outputs->insert(outputs->end(), hidden.begin(), hidden.end());
  if (m.drafter() == DrafterKind::kDSpark) {
    DI_ASSIGN_OR_RETURN(DraftBlock b, m.dspark_draft(caches[0], 11, 3, {}));
    outputs->push_back(b.logits);
    outputs->push_back(std::vector<float>(b.tokens.begin(), b.tokens.end()));
  }
  return {};
}

// experts > 0: expert parallelism over the same ranks (contiguous blocks of that many experts).
std::vector<std::vector<std::vector<float>>> run_context_parallel(const std::string& dir, int ranks,
                                                                  bool ref, int experts = 0) {
  std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(ranks));
  const std::vector<Status> statuses = run_ranks(ranks, [&](Communicator& comm) -> Status {
    auto ops = ref ? backend::cpu::make_ref_ops() : backend::cpu::make_opt_ops(1);
    ContextParallel cp;
    cp.comm = &comm;
    ExpertParallel ep;
    if (experts > 0) {
      ep.comm = &comm;
      ep.placements = {parallel::ExpertPlacement::contiguous(experts, ranks)};
    }
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, ep, {}, cp));
    return run_schedule(*m, schedule(static_cast<int32_t>(m->vocab_size())),
                        &results[static_cast<size_t>(comm.rank())]);
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)].to_string();
  }
  return results;
}

void check_model(const std::string& dir, bool ref = false, bool with_ep = false) {
  auto single_m = load_model(dir, ref ? ref_ops() : opt_ops());
  ASSERT_TRUE(single_m.ok()) << single_m.status().to_string();
  Model& single = **single_m;
  std::vector<std::vector<float>> want;
  const Status ran =
      run_schedule(single, schedule(static_cast<int32_t>(single.vocab_size())), &want);
  ASSERT_TRUE(ran.ok()) << ran.to_string();
  const int experts = with_ep ? single.config().n_routed_experts : 0;
  for (int ranks : {1, 2, 4}) {
    const auto got = run_context_parallel(dir, ranks, ref, experts);
    for (int rank = 0; rank < ranks; ++rank) {
      const auto& r = got[static_cast<size_t>(rank)];
      ASSERT_EQ(r.size(), want.size()) << dir << ": " << ranks << " ranks, rank " << rank;
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_FALSE(want[k].empty());
        EXPECT_TRUE(same_bits(r[k], want[k]))
            << dir << ": " << ranks << " ranks, rank " << rank << ", output " << k;
      }
    }
  }
}

TEST(ModelContextParallel, V4OfficialQuantSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/v4-small");
}

TEST(ModelContextParallel, V4Fp32SameBitsOn124Ranks) {
  check_model(model_dir("v4_tiny_a", "hf_fp32"));
  check_model(model_dir("v4_tiny_b", "official_quant"));
}

// DeepSeek-V4.1: Full layers (ratio 2 with a pending token, ratio 1) whose compressed rows and
// index keys every rank builds from the gathered rows, Reindex / Reuse layers selecting for this
// rank's queries (inside the candidate blocks), Engram layers looking up the whole step, the
// single-pass mHC's carried pre, and the DSpark context built from every rank's features.
TEST(ModelContextParallel, V41SameBitsOn124Ranks) {
  check_model(source_dir() + "/models/default");
  check_model(model_dir("v41_tiny_b", "official_bf16"));
  check_model(model_dir("v41_tiny_a", "official_quant"));
}

// Balanced CP with MoE EP over the same ranks (the original engine's deployment): each rank's
// rows through the expert exchange, a rank without rows (decodes land on rank 0) serving its
// experts; the same bits again.
TEST(ModelContextParallel, WithExpertParallelismSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/v4-small", /*ref=*/false, /*with_ep=*/true);
  check_model(source_dir() + "/models/default", /*ref=*/false, /*with_ep=*/true);
}

TEST(ModelContextParallel, ReferenceBackendSameBits) {
  check_model(model_dir("v4_tiny_b", "official_quant"), /*ref=*/true);
}

// Each rank's rows of a sequence: chunks r and 2R-1-r, every row once, for lengths that 2R
// does not divide too.
TEST(ModelContextParallel, ZigzagSplitCoversEveryRowOnce) {
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 5, 7, 64, 301}) {
      std::vector<int64_t> all;
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int64_t> rows = zigzag_rows(10, n, r, ranks);
        EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
        all.insert(all.end(), rows.begin(), rows.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> want(static_cast<size_t>(n));
      std::iota(want.begin(), want.end(), 10);
      EXPECT_EQ(all, want) << ranks << " ranks, " << n << " rows";
    }
  }
  EXPECT_EQ(zigzag_rows(0, 8, 0, 2), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(zigzag_rows(0, 8, 1, 2), (std::vector<int64_t>{2, 3, 4, 5}));
}

// max / mean causal work per rank: the zig-zag split against equal contiguous token counts.
double imbalance(int64_t n, int ranks, bool zigzag) {
  std::vector<double> work;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int64_t> rows = zigzag ? zigzag_rows(0, n, r, ranks) : [&] {
      std::vector<int64_t> v;
      for (int64_t i = n * r / ranks; i < n * (r + 1) / ranks; ++i) v.push_back(i);
      return v;
    }();
    work.push_back(static_cast<double>(causal_work(rows)));
  }
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / ranks;
  return *std::max_element(work.begin(), work.end()) / mean;
}

TEST(ModelContextParallel, ZigzagBalancesCausalWork) {
  for (int ranks : {2, 4, 8}) {
    const int64_t n = 32768;
    const double zig = imbalance(n, ranks, true), flat = imbalance(n, ranks, false);
    std::printf(
        "context parallelism, %d ranks, %lld tokens: max/mean causal work %.4f zig-zag, "
        "%.4f equal tokens\n",
        ranks, static_cast<long long>(n), zig, flat);
    EXPECT_LT(zig, 1.001) << ranks << " ranks";
    EXPECT_NEAR(flat, (2.0 * ranks - 1) / ranks, 0.01) << ranks << " ranks";
  }
  EXPECT_LT(imbalance(301, 4, true), 1.05);  // uneven chunks: within a few rows' work
}

TEST(ModelContextParallel, ARankThatFailsMidStepFailsTheOthersWithoutAHang) {
  const std::string dir = source_dir() + "/models/v4-small";
  expect_rank_failure_propagates(
      [&](Communicator& comm, int fail_step) -> Status {
        auto ops = backend::cpu::make_opt_ops(1);
        ContextParallel cp;
        cp.comm = &comm;
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, {}, {}, cp));
        std::vector<std::vector<float>> outputs;
        return run_schedule(*m, schedule(static_cast<int32_t>(m->vocab_size())), &outputs,
                            fail_step);
      },
      "context parallelism");
}

// Bounded replay (a V4.1 step with upper_skip) is refused at the step, on every rank alike,
// before anything runs.
TEST(ModelContextParallel, BoundedReplayBesideItIsRefusedByName) {
  std::vector<Status> replay(2);
  run_ranks(2, [&](Communicator& comm) -> Status {
    ContextParallel cp;
    cp.comm = &comm;
    const auto r = static_cast<size_t>(comm.rank());
    auto v41 = load_model(source_dir() + "/models/default", opt_ops(), {}, {}, {}, cp);
    if (!v41.ok()) return v41.status();
    SequenceCache cache = (*v41)->new_sequence();
    const std::vector<int32_t> prompt = tokens(0, 200, 8000);
    replay[r] =
        (*v41)->extend(cache, prompt, LogitsWanted::kLast, false, /*upper_skip=*/100).status();
    return Status();
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_NE(replay[r].message().find("with context parallelism"), std::string::npos)
        << replay[r].to_string();
  }
}

// A grid of cores: `cp` context-parallel ranks, each a tensor-parallel group of `tp` cores (core
// c·tp + t is tensor-parallel rank t of group c and context-parallel rank c of group t).
// experts > 0: the routed experts split over all the cores too (contiguous blocks). `weights`:
// each core's WeightStats (what it bound).
std::vector<std::vector<std::vector<float>>> run_grid(const std::string& dir, int cp, int tp,
                                                      int experts = 0,
                                                      std::vector<WeightStats>* weights = nullptr) {
  const int n = cp * tp;
  const auto ep_group = parallel::InProcessGroup::create(n);
  std::vector<std::shared_ptr<parallel::InProcessGroup>> cp_groups, tp_groups;
  for (int t = 0; t < tp; ++t) cp_groups.push_back(parallel::InProcessGroup::create(cp));
  for (int c = 0; c < cp; ++c) tp_groups.push_back(parallel::InProcessGroup::create(tp));
  std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(n));
  std::vector<Status> statuses(static_cast<size_t>(n));
  if (weights != nullptr) weights->assign(static_cast<size_t>(n), {});
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const int c = i / tp, t = i % tp;
      auto cp_comm = cp_groups[static_cast<size_t>(t)]->communicator(c);
      auto tp_comm = tp_groups[static_cast<size_t>(c)]->communicator(t);
      auto ops = backend::cpu::make_opt_ops(1);
      ContextParallel cpar;
      cpar.comm = cp_comm.get();
      TensorParallel tpar;
      tpar.comm = tp_comm.get();
      auto ep_comm = ep_group->communicator(i);
      ExpertParallel ep;
      if (experts > 0) {
        ep.comm = ep_comm.get();
        ep.placements = {parallel::ExpertPlacement::contiguous(experts, n)};
      }
      Status st;
      auto m = load_model(dir, *ops, {}, ep, tpar, cpar);
      if (!m.ok()) {
        st = m.status();
      } else {
        if (weights != nullptr) (*weights)[static_cast<size_t>(i)] = (*m)->weight_stats();
        st = run_schedule(**m, schedule(static_cast<int32_t>((*m)->vocab_size())),
                          &results[static_cast<size_t>(i)]);
      }
      if (!st.ok()) {  // the peers waiting in a gather fail instead of timing out
        cp_groups[static_cast<size_t>(t)]->abort(st);
        tp_groups[static_cast<size_t>(c)]->abort(st);
        ep_group->abort(st);
      }
      statuses[static_cast<size_t>(i)] = st;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(statuses[static_cast<size_t>(i)].ok())
        << "core " << i << ": " << statuses[static_cast<size_t>(i)].to_string();
  }
  return results;
}

// Context with tensor parallelism: 2 context-parallel ranks of 2 tensor-parallel cores each
// (and 2 x 1, 1 x 2), and 2 x 2 and 2 x 1 with the routed experts split over all the cores:
// every core's logits, hidden rows and DSpark drafts the single rank's.
TEST(ModelContextParallel, WithTensorParallelismGridSameBits) {
  for (const std::string& dir :
       {source_dir() + "/models/v4-small", source_dir() + "/models/default"}) {
    auto single_m = load_model(dir, opt_ops());
    ASSERT_TRUE(single_m.ok()) << single_m.status().to_string();
    std::vector<std::vector<float>> want;
    ASSERT_TRUE(
        run_schedule(**single_m, schedule(static_cast<int32_t>((*single_m)->vocab_size())), &want)
            .ok());
    const int experts = (*single_m)->config().n_routed_experts;
    // (cp, tp, experts split over the cores or not)
    for (const auto& [cp, tp, ep] :
         {std::tuple{2, 2, false}, std::tuple{2, 1, false}, std::tuple{1, 2, false},
          std::tuple{2, 2, true}, std::tuple{2, 1, true}}) {
      std::vector<WeightStats> bound;
      const auto got = run_grid(dir, cp, tp, ep ? experts : 0, &bound);
      const std::string what = dir + ": " + std::to_string(cp) + " x " + std::to_string(tp) +
                               (ep ? " with expert parallelism" : "");
      const WeightStats all = (*single_m)->weight_stats();
      for (size_t i = 0; i < got.size(); ++i) {
        // Each core bound its shards (tensor parallelism) and its share of the routed experts.
        if (tp > 1) {
          EXPECT_GT(bound[i].split_tensors, 0) << what << ", core " << i;
        }
        if (ep) {
          EXPECT_LT(bound[i].routed_experts, all.routed_experts) << what << ", core " << i;
        }
        ASSERT_EQ(got[i].size(), want.size()) << what << ", core " << i;
        for (size_t k = 0; k < want.size(); ++k) {
          EXPECT_TRUE(same_bits(got[i][k], want[k])) << what << ", core " << i << ", output " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
