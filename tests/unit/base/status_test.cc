#include "base/status.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

Expected<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

Expected<int> doubled(int v) {
  DI_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_even(int v) {
  DI_TRY(parse_positive(v).status());
  if (v % 2) return out_of_range("odd");
  return {};
}

TEST(Status, OkAndMessages) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.to_string(), "OK");
  Status bad = not_found("file x.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kNotFound);
  EXPECT_EQ(bad.to_string(), "NotFound: file x.json");
  EXPECT_EQ(bad.with_context("loading model").message(), "loading model: file x.json");
}

TEST(Expected, PropagatesValueAndError) {
  auto good = doubled(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-1"), std::string::npos);
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_EQ(check_even(3).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(check_even(0).code(), StatusCode::kInvalidArgument);
}

TEST(Expected, OkStatusIsNotAValue) {
  Expected<int> e{Status()};
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
}

TEST(ExpectedDeathTest, ValueOfErrorAborts) {
  Expected<int> e = invalid_argument("nope");
  EXPECT_DEATH({ (void)e.value(); }, "nope");
}

}  // namespace
}  // namespace deepinfer
