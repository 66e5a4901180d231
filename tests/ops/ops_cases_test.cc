// The GoogleTest driver of the op harness (op_harness.h): every registered op case on every CPU
// backend but the oracle (opt at 1, 2 and 3 threads; the kHeavy cases on opt3 only), against the
// ref backend. One test per
// (case, backend), named OpCases/BackendVsOracle.Run/<case>_<backend>; a case the backend lacks
// a feature for, or meant for other backends only, is skipped with the reason. Each failed check
// is one failure naming what was compared. At the end it prints how many checks ran.
//
// The CUDA driver of the same cases is cuda/ops_cuda_main.cc (a plain executable). The thread
// count invariance of opt (two opt instances, not a backend against the oracle) is a plain test
// here.
#include <cstdio>
#include <string>

#include "op_harness.h"
#include "ops_test_util.h"

namespace deepinfer::backend::testing {
namespace {

struct Totals {
  int runs = 0, checks = 0, failures = 0, skipped = 0;
};
Totals& totals() {
  static Totals t;
  return t;
}

class PrintTotals : public ::testing::Environment {
 public:
  void TearDown() override {
    const Totals& t = totals();
    if (t.runs + t.skipped == 0) return;
    std::printf("op cases: %d runs, %d checks, %d failed checks, %d skipped\n", t.runs, t.checks,
                t.failures, t.skipped);
  }
};
const ::testing::Environment* const kPrintTotals =
    ::testing::AddGlobalTestEnvironment(new PrintTotals);

struct CaseOnBackend {
  size_t index;  // into op_cases()
  BackendCase backend;
};

void PrintTo(const CaseOnBackend& c, std::ostream* os) {
  *os << op_cases()[c.index].name << " on " << c.backend.name;
}

std::vector<CaseOnBackend> all_runs() {
  std::vector<BackendCase> under_test = backends();
  under_test.erase(under_test.begin());  // ref is the oracle
  std::vector<CaseOnBackend> runs;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    for (const BackendCase& b : under_test) runs.push_back({i, b});
  }
  return runs;
}

// Where the kHeavy cases run: opt with the most threads.
constexpr const char* kHeavyOn = "opt3";

class BackendVsOracle : public ::testing::TestWithParam<CaseOnBackend> {};

TEST_P(BackendVsOracle, Run) {
  const OpCase& c = op_cases()[GetParam().index];
  auto ops = GetParam().backend.make();
  if ((c.on & kHeavy) != 0 && GetParam().backend.name != kHeavyOn) {
    ++totals().skipped;
    GTEST_SKIP() << c.name << " is heavy: run on " << kHeavyOn << " only";
  }
  if ((c.on & kOnCpu) == 0) {
    ++totals().skipped;
    GTEST_SKIP() << c.name << " is for " << on_backends_name(c.on) << " backends only";
  }
  const Feature missing = missing_feature(c, *ops);
  if (missing != Feature::kCount) {
    ++totals().skipped;
    GTEST_SKIP() << ops->name() << " does not support " << feature_name(missing);
  }
  auto ref = cpu::make_ref_ops();
  CaseContext ctx;
  ctx.ops = ops.get();
  ctx.ref = ref.get();
  ctx.on = kOnCpu;
  ctx.report = [](const std::string& msg) { ADD_FAILURE() << msg; };
  run_case(c, ctx);
  ++totals().runs;
  totals().checks += ctx.checks;
  totals().failures += ctx.failures;
  RecordProperty("checks", ctx.checks);
  EXPECT_GT(ctx.checks, 0) << "a case that checks nothing";
}

INSTANTIATE_TEST_SUITE_P(OpCases, BackendVsOracle, ::testing::ValuesIn(all_runs()),
                         [](const auto& p) {
                           return std::string(op_cases()[p.param.index].name) + "_" +
                                  p.param.backend.name;
                         });

TEST(OptThreads, OutputsIndependentOfThreadCount) {
  std::mt19937 rng(5);
  auto one = cpu::make_opt_ops(1), three = cpu::make_opt_ops(3);
  OwnedWeight w = random_weight(rng, WKind::kFp8E8m0, 200, 384);
  Buf x = random_buf(rng, 37, 384), a(37, 200), b(37, 200);
  one->linear(x.cmat(), w.ref, a.mat(), {.act_quant = true});
  three->linear(x.cmat(), w.ref, b.mat(), {.act_quant = true});
  EXPECT_TRUE(close(b.v, a.v, 0.0));
  const int64_t H = 8, d = 64, L = 30;
  Buf q = random_buf(rng, 9, H * d), kv = random_buf(rng, 50, d), oa(9, H * d), ob(9, H * d);
  std::vector<int32_t> idx(static_cast<size_t>(9 * L));
  for (auto& i : idx) i = static_cast<int32_t>(rng() % 50);
  one->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, nullptr, 0.125f, true, oa.mat());
  three->sparse_attention(q.cmat(), H, kv.cmat(), idx.data(), L, nullptr, 0.125f, true, ob.mat());
  EXPECT_TRUE(close(ob.v, oa.v, 0.0));
}

}  // namespace
}  // namespace deepinfer::backend::testing
