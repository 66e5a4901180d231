// Integer and bounded-number grammars checked arithmetically: every integer in a window is
// accepted exactly when it lies in the bounds; decimal forms are accepted only inside them.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

#include "structured/json_schema.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

std::string bound_schema(const char* type, std::optional<int64_t> lo, std::optional<int64_t> hi,
                         bool excl) {
  std::string s = std::string(R"({"type":")") + type + "\"";
  if (lo) s += std::string(excl ? ",\"exclusiveMinimum\":" : ",\"minimum\":") + std::to_string(*lo);
  if (hi) s += std::string(excl ? ",\"exclusiveMaximum\":" : ",\"maximum\":") + std::to_string(*hi);
  return s + "}";
}

TEST(StructuredNumbers, IntegerRangesAreExact) {
  auto tok = testing::byte_vocab();
  const std::optional<int64_t> bounds[][2] = {{0, 9},
                                              {-9, 0},
                                              {7, 123},
                                              {-123, -7},
                                              {-15, 237},
                                              {100, 999},
                                              {99, 1000},
                                              {-1000, -99},
                                              {0, std::nullopt},
                                              {std::nullopt, 0},
                                              {57, std::nullopt},
                                              {std::nullopt, -57},
                                              {5, 5},
                                              {-1, 1}};
  for (bool excl : {false, true}) {
    for (const auto& b : bounds) {
      if (excl && b[0] && b[1] && *b[1] - *b[0] < 2) continue;
      const std::string schema = bound_schema("integer", b[0], b[1], excl);
      auto g = grammar_from_json_schema(schema);
      ASSERT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
      auto cg = testing::compile_or_die(g.value(), tok);
      for (int64_t v = -1300; v <= 1300; ++v) {
        bool in = true;
        if (b[0]) in = in && (excl ? v > *b[0] : v >= *b[0]);
        if (b[1]) in = in && (excl ? v < *b[1] : v <= *b[1]);
        ASSERT_EQ(testing::full_match(cg, std::to_string(v)), in) << schema << " value " << v;
      }
      EXPECT_FALSE(testing::full_match(cg, "007"));
      EXPECT_FALSE(testing::full_match(cg, "-0"));
      EXPECT_FALSE(testing::full_match(cg, "1.0"));
    }
  }
}

TEST(StructuredNumbers, BoundedNumbersStayInBounds) {
  auto tok = testing::byte_vocab();
  for (bool excl : {false, true}) {
    const std::string schema = bound_schema("number", -3, 12, excl);
    auto g = grammar_from_json_schema(schema);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    auto cg = testing::compile_or_die(g.value(), tok);
    int accepted = 0;
    for (int tenths = -50; tenths <= 150; ++tenths) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", tenths / 10.0);
      if (std::string(buf) == "-0.0") continue;
      const double v = tenths / 10.0;
      const bool in = excl ? (v > -3 && v < 12) : (v >= -3 && v <= 12);
      const bool ours = testing::full_match(cg, buf);
      if (ours) {
        EXPECT_TRUE(in) << schema << " accepts out-of-range " << buf;
        ++accepted;
      }
    }
    // The subset is large: everything but fractions within one unit of an exclusive bound.
    EXPECT_GE(accepted, excl ? 120 : 145) << schema;
  }
}

}  // namespace
}  // namespace deepinfer::structured
