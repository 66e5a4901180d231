// The shared pieces of the input limits (base/input_limits.h): the JSON depth scan and the
// wording of a limit error.
#include "base/input_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer {
namespace {

TEST(InputLimits, FormatCountGroupsThousands) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(1048576), "1,048,576");
  EXPECT_EQ(format_count(18446744073709551615ull), "18,446,744,073,709,551,615");
}

TEST(InputLimits, LimitMessageNamesFoundLimitAndFix) {
  EXPECT_EQ(limit_message("2,000,000 merges", 1048576, "kMaxMerges", "trim the merges"),
            "2,000,000 merges exceeds the limit of 1,048,576 (kMaxMerges); trim the merges");
}

TEST(InputLimits, JsonDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0u);
  EXPECT_EQ(json_nesting_depth("[]"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": [[2]]}], "c": {}})"), 5u);
  EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[[", {"k[": 1}])"), 2u);
  EXPECT_EQ(json_nesting_depth(R"(["\\", [1]])"), 2u);  // an escaped backslash ends the escape
  EXPECT_EQ(json_nesting_depth("]]]["), 1u);            // malformed: never negative
}

TEST(InputLimits, DeepDocumentIsRefusedWithTheLimitNamed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(json_nesting_depth(deep), 100000u);
  Status s = check_json_depth(deep, 64, "x.json", "kMaxX in src/x.h", "flatten it");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "x.json: JSON nesting depth 100,000 exceeds the limit of 64 (kMaxX in src/x.h); "
            "flatten it");
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(check_json_depth(at_limit, 64, "x.json", "kMaxX", "").ok());
  EXPECT_EQ(check_json_depth(deep, 64, "x", "k", "", StatusCode::kDataLoss).code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace deepinfer
