// Tensor parallelism inside the model (model/tensor_parallel.h) on in-process ranks: every rank
// loads its shards (attention groups and heads, wo_b's and every expert's rows, the LM head's
// vocabulary rows) and runs the same steps (two sequences, prefill, a second prompt
// beside a decode, decode steps); every rank's logits must be the single-rank model's, bit for
// bit. V4 (official FP8/FP4 and FP32 numerics) and V4.1 (the default model), 1, 2 and 4 ranks
// (4 ranks over 2 output groups: two ranks hold no heads). Also: each rank binds about 1/N of
// the split weights; the drafters (MTP, DSpark) draft the same; a rank that fails mid-step makes
// the others' steps errors, not a hang. Tensor with expert parallelism over the same ranks
// (whole routed experts split over the ranks, each rank exchanging its share of a step's rows):
// the same bits again; either way each rank holds about 1/N of the routed experts' bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
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

// Sequence 0's prompt, then sequence 1's longer prompt beside sequence 0's first decode, then
// decode steps of both.
Schedule schedule(int32_t vocab) {
  const auto tok = [&](int i) { return static_cast<int32_t>((37 * i + 5) % vocab); };
  std::vector<int32_t> p0, p1;
  for (int i = 0; i < 9; ++i) p0.push_back(tok(i));
  for (int i = 0; i < 21; ++i) p1.push_back(tok(100 + i));
  Schedule s;
  s.push_back({{0, p0}});
  s.push_back({{0, {tok(7)}}, {1, p1}});
  for (int step = 0; step < 3; ++step)
    s.push_back({{0, {tok(200 + step)}}, {1, {tok(300 + step)}}});
  return s;
}

// Runs the schedule; returns the logits of every row of every step, and with `draft` the
// drafter's outputs after it (MTP logits of the last rows, or DSpark draft tokens and logits).
Status run_schedule(Model& m, const Schedule& sch, std::vector<std::vector<float>>* logits,
                    bool draft, int fail_at_step = -1) {
  std::vector<SequenceCache> caches;
  for (int q = 0; q < 2; ++q) caches.push_back(m.new_sequence());
  logits->clear();
  std::vector<float> hidden;
  for (size_t step = 0; step < sch.size(); ++step) {
    if (static_cast<int>(step) == fail_at_step) throw std::runtime_error("rank failed mid-step");
    StepOutputs out;
    const bool keep_hidden = draft && m.drafter() == DrafterKind::kMtp;  // the MTP block's input
    DI_TRY(run_scheduled_step(m, caches, sch[step], keep_hidden, out));
    logits->push_back(deepinfer::backend::to_vector(out.logits));
    hidden = deepinfer::backend::to_vector(out.hidden);
  }
  if (draft && m.drafter() == DrafterKind::kMtp) {
    // The MTP block over the last step's rows of both sequences (their hidden streams).
    const int64_t row = static_cast<int64_t>(hidden.size()) / 2;
    std::vector<MtpRows> rows;
    const std::vector<int32_t> next0{11}, next1{12};
    rows.push_back({&caches[0], {hidden.data(), static_cast<size_t>(row)}, next0});
    rows.push_back({&caches[1], {hidden.data() + row, static_cast<size_t>(row)}, next1});
    DI_ASSIGN_OR_RETURN(MtpStep st, m.mtp_step(rows, /*run_ahead=*/true));
    logits->push_back(st.logits);
  } else if (draft && m.drafter() == DrafterKind::kDSpark) {
    DI_ASSIGN_OR_RETURN(DraftBlock b, m.dspark_draft(caches[0], 11, 3, {}));
    logits->push_back(b.logits);
    logits->push_back(std::vector<float>(b.tokens.begin(), b.tokens.end()));
  }
  return {};
}

struct RankResult {
  std::vector<std::vector<float>> logits;
  WeightStats weights;
};

// experts > 0: expert parallelism beside it, over the same communicator (`placement`, or the
// experts in contiguous blocks).
std::vector<RankResult> run_tensor_parallel(const std::string& dir, int ranks, bool draft,
                                            bool ref, int experts = 0,
                                            const parallel::ExpertPlacement* placement = nullptr) {
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  const std::vector<Status> statuses = run_ranks(ranks, [&](Communicator& comm) -> Status {
    auto ops = ref ? backend::cpu::make_ref_ops() : backend::cpu::make_opt_ops(1);
    TensorParallel tp;
    tp.comm = &comm;
    ExpertParallel ep;
    if (experts > 0) {
      ep.comm = &comm;
      ep.placements = {placement ? *placement
                                 : parallel::ExpertPlacement::contiguous(experts, ranks)};
    }
    DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, ep, tp));
    RankResult& r = results[static_cast<size_t>(comm.rank())];
    r.weights = m->weight_stats();
    return run_schedule(*m, schedule(static_cast<int32_t>(m->vocab_size())), &r.logits, draft);
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)].to_string();
  }
  return results;
}

void check_model(const std::string& dir, bool draft = true, bool ref = false) {
  auto single_m = load_model(dir, ref ? ref_ops() : opt_ops());
  ASSERT_TRUE(single_m.ok()) << single_m.status().to_string();
  Model& single = **single_m;
  std::vector<std::vector<float>> want;
  const Status ran =
      run_schedule(single, schedule(static_cast<int32_t>(single.vocab_size())), &want, draft);
  ASSERT_TRUE(ran.ok()) << ran.to_string();
  const WeightStats all = single.weight_stats();
  const int experts = single.config().n_routed_experts;
  for (int ranks : {1, 2, 4}) {
    const auto got = run_tensor_parallel(dir, ranks, draft, ref);
    // Tensor with expert parallelism: the same bits. 4 ranks decode 2 rows: two ranks exchange
    // no rows of their own and only serve their experts. Both forms split the routed experts,
    // tensor parallelism alone by rows of every expert (moe_tp.h), expert parallelism by whole
    // experts: each rank holds about 1/N of their bytes either way.
    const auto with_ep = run_tensor_parallel(dir, ranks, draft, ref, experts);
    int64_t max_ep_routed = 0;  // the most routed-expert bytes an expert-parallel rank holds
    for (int rank = 0; rank < ranks; ++rank) {
      const RankResult& r = with_ep[static_cast<size_t>(rank)];
      ASSERT_EQ(r.logits.size(), want.size());
      for (size_t step = 0; step < want.size(); ++step) {
        EXPECT_TRUE(same_bits(r.logits[step], want[step]))
            << dir << ": " << ranks << " ranks with expert parallelism, rank " << rank
            << ", output " << step;
      }
      max_ep_routed = std::max(max_ep_routed, r.weights.routed_expert_bytes);
    }
    int64_t split_total = 0;
    for (const RankResult& r : got) split_total += r.weights.split_bytes;
    for (int rank = 0; rank < ranks; ++rank) {
      const RankResult& r = got[static_cast<size_t>(rank)];
      ASSERT_EQ(r.logits.size(), want.size());
      for (size_t step = 0; step < want.size(); ++step) {
        EXPECT_TRUE(same_bits(r.logits[step], want[step]))
            << dir << ": " << ranks << " ranks, rank " << rank << ", output " << step;
      }
      // This rank bound its shards of the split tensors, everything else whole: the bytes it
      // saves are the other ranks' shards (up to the FP8 scales of shards copied with one scale
      // row per weight row: within 2%).
      const double saved = static_cast<double>(all.bytes - r.weights.bytes);
      const double others = static_cast<double>(split_total - r.weights.split_bytes);
      EXPECT_NEAR(saved, others, 0.02 * others + 1) << dir << ", " << ranks << " ranks";
      // Shards differ by one unit at most; with more ranks than output groups some ranks hold
      // no heads and others a whole group: within twice the mean.
      EXPECT_LE(static_cast<double>(r.weights.split_bytes),
                2.0 * static_cast<double>(split_total) / ranks)
          << dir << ": rank " << rank << " of " << ranks << " holds more than its share";
      if (ranks > 1) {
        EXPECT_LT(r.weights.bytes, all.bytes);
      }
      // Every routed expert split by intermediate rows and hidden channels: each rank holds a
      // share of all of them, no more bytes than the fullest expert-parallel rank (whole experts
      // in blocks: uneven when the ranks do not divide the experts), the drafter's whole in both.
      EXPECT_EQ(r.weights.routed_experts, all.routed_experts);
      EXPECT_LE(r.weights.routed_expert_bytes, max_ep_routed)
          << dir << ": rank " << rank << " of " << ranks;
      if (ranks > 1) {
        EXPECT_LT(r.weights.routed_expert_bytes, all.routed_expert_bytes);
      }
    }
  }
}

TEST(ModelTensorParallel, V4OfficialQuantSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/v4-small");  // FP8 blocks of 128: shards inside blocks
}

TEST(ModelTensorParallel, V4Fp32SameBitsOn124Ranks) {
  check_model(model_dir("v4_tiny_a", "hf_fp32"));  // gate weight after w2, no roundings
  check_model(model_dir("v4_tiny_b", "official_quant"));
}

TEST(ModelTensorParallel, V41DefaultSameBitsOn124Ranks) {
  check_model(source_dir() + "/models/default");
  check_model(model_dir("v41_tiny_b", "official_bf16"));
}

TEST(ModelTensorParallel, ReferenceBackendSameBits) {
  check_model(model_dir("v4_tiny_b", "official_quant"), /*draft=*/false, /*ref=*/true);
}

TEST(ModelTensorParallel, ARankThatFailsMidStepFailsTheOthersWithoutAHang) {
  const std::string dir = source_dir() + "/models/v4-small";
  expect_rank_failure_propagates(
      [&](Communicator& comm, int fail_step) -> Status {
        auto ops = backend::cpu::make_opt_ops(1);
        TensorParallel tp;
        tp.comm = &comm;
        DI_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, load_model(dir, *ops, {}, {}, tp));
        std::vector<std::vector<float>> logits;
        return run_schedule(*m, schedule(256), &logits, false, fail_step);
      },
      "tensor parallelism");
}

TEST(ModelTensorParallel, WithExpertReplicasSameBits) {
  // Tensor with expert parallelism where experts have replicas on several ranks (an EPLB-style
  // placement): a pair goes to any copy, the bits do not change.
  const std::string dir = source_dir() + "/models/v4-small";
  auto single_m = load_model(dir, opt_ops());
  ASSERT_TRUE(single_m.ok()) << single_m.status().to_string();
  std::vector<std::vector<float>> want;
  ASSERT_TRUE(run_schedule(**single_m, schedule(static_cast<int32_t>((*single_m)->vocab_size())),
                           &want, /*draft=*/true)
                  .ok());
  // 8 experts over 2 ranks: experts 0 and 5 on both, the rest split.
  const std::vector<int32_t> physical{0, 1, 2, 3, 5, 0, 4, 5, 6, 7};
  auto placement = parallel::ExpertPlacement::from_physical(physical, 8, 2);
  ASSERT_TRUE(placement.ok()) << placement.status().to_string();
  const auto got = run_tensor_parallel(dir, 2, true, false, 8, &*placement);
  for (int rank = 0; rank < 2; ++rank) {
    const RankResult& r = got[static_cast<size_t>(rank)];
    ASSERT_EQ(r.logits.size(), want.size());
    for (size_t step = 0; step < want.size(); ++step) {
      EXPECT_TRUE(same_bits(r.logits[step], want[step])) << "rank " << rank << ", output " << step;
    }
  }
}

TEST(ModelTensorParallel, WithExpertParallelismOverOtherRanksIsRefused) {
  const std::string dir = source_dir() + "/models/v4-small";
  std::vector<Status> errors(2);
  auto other = parallel::InProcessGroup::create(3);  // not whole groups of 2
  run_ranks(2, [&](Communicator& comm) -> Status {
    ExpertParallel ep;
    auto ep_comm = other->communicator(comm.rank());
    ep.comm = ep_comm.get();
    ep.placements = {parallel::ExpertPlacement::contiguous(8, 3)};
    TensorParallel tp;
    tp.comm = &comm;
    errors[static_cast<size_t>(comm.rank())] = load_model(dir, opt_ops(), {}, ep, tp).status();
    return Status();
  });
  EXPECT_NE(errors[0].message().find("not a multiple"), std::string::npos)
      << errors[0].to_string();
}

}  // namespace
}  // namespace deepinfer::model::testing
