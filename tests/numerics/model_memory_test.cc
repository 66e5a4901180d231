// Memory exhaustion inside the model: an op that cannot allocate (backend::OutOfMemory) ends the
// call with a ResourceExhausted status that says what to change, and the model keeps working for
// other sequences, with the same numbers as before (nothing half-updated leaks into them).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/profiling_ops.h"
#include "model_test_util.h"

namespace deepinfer::model::testing {
namespace {

// The CPU opt backend with a byte budget: allocations past it throw as an exhausted device would.
class BudgetOps : public backend::ProfilingOps {
 public:
  explicit BudgetOps(backend::Ops& inner) : ProfilingOps(inner) { set_enabled(false); }
  void set_budget(int64_t bytes) { budget_ = bytes; }
  int64_t in_use() const { return in_use_; }

  void* allocate(size_t bytes) override {
    if (in_use_ + static_cast<int64_t>(bytes) > budget_) {
      throw backend::OutOfMemory("test budget of " + std::to_string(budget_) +
                                 " bytes exhausted: allocating " + std::to_string(bytes));
    }
    void* p = ProfilingOps::allocate(bytes);
    sizes_.push_back({p, bytes});
    in_use_ += static_cast<int64_t>(bytes);
    return p;
  }
  void deallocate(void* p) override {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i].first == p) {
        in_use_ -= static_cast<int64_t>(sizes_[i].second);
        sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    ProfilingOps::deallocate(p);
  }

 private:
  int64_t budget_ = INT64_MAX, in_use_ = 0;
  std::vector<std::pair<void*, size_t>> sizes_;
};

std::vector<int32_t> ids(int n, int64_t vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

TEST(ModelMemory, ExhaustedStepIsAStatusAndTheModelKeepsWorking) {
  BudgetOps ops(opt_ops());
  auto m = load_test_model("v4_tiny_a", "hf_fp32", ops);
  ASSERT_NE(m, nullptr);
  const auto prompt = ids(300, m->vocab_size());

  // The reference: the same prompt with no budget, in a fresh sequence.
  SequenceCache ref_seq = m->new_sequence();
  auto want = m->extend(ref_seq, prompt, LogitsWanted::kAll);
  ASSERT_TRUE(want.ok()) << want.status().message();

  // A second model whose step scratch is not allocated yet, under a budget that holds its
  // sequence rings but not a 300-token step.
  BudgetOps tight(opt_ops());
  auto m2 = load_test_model("v4_tiny_a", "hf_fp32", tight);
  ASSERT_NE(m2, nullptr);
  SequenceCache doomed = m2->new_sequence();
  tight.set_budget(tight.in_use() + 16 * 1024);
  auto failed = m2->extend(doomed, prompt, LogitsWanted::kAll);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted);
  const std::string& msg = failed.status().message();
  EXPECT_NE(msg.find("test budget"), std::string::npos) << msg;
  EXPECT_NE(msg.find("300 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Fewer concurrent sequences"), std::string::npos) << msg;

  // With memory back, a fresh sequence computes exactly what the unconstrained model did.
  tight.set_budget(INT64_MAX);
  SequenceCache fresh = m2->new_sequence();
  auto got = m2->extend(fresh, prompt, LogitsWanted::kAll);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->logits, want->logits);
}

TEST(ModelMemory, NewSequenceThatDoesNotFitThrowsOutOfMemory) {
  BudgetOps ops(opt_ops());
  auto m = load_test_model("v4_tiny_a", "hf_fp32", ops);
  ASSERT_NE(m, nullptr);
  ops.set_budget(ops.in_use());
  EXPECT_THROW((void)m->new_sequence(), backend::OutOfMemory);
}

}  // namespace
}  // namespace deepinfer::model::testing
