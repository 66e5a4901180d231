// StopChecker: stop strings across deltas (one character at a time, held-back text released
// when it stops matching), several stop strings, stop token ids / EOS, max_tokens, min_tokens.
#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::sample {
namespace {

constexpr int32_t kText = 100;  // an ordinary token id
const std::vector<int32_t> kEos = {2};

struct FeedResult {
  std::vector<std::string> emitted;  // text returned by each append
  std::string all;                   // their concatenation
  StopUpdate last;
  int appended = 0;
};

// Feeds deltas (each as token kText) until the checker finishes.
FeedResult feed(StopChecker& checker, const std::vector<std::string>& deltas) {
  FeedResult run;
  for (const std::string& d : deltas) {
    run.last = checker.append(kText, d);
    ++run.appended;
    run.emitted.push_back(run.last.text);
    run.all += run.last.text;
    if (run.last.finished()) break;
  }
  return run;
}

std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

SamplingParams no_limit() {
  SamplingParams p;
  p.max_tokens.reset();
  return p;
}

TEST(StopCheckerTest, StopStringOneCharAtATime) {
  SamplingParams p = no_limit();
  p.stop = {"END"};
  StopChecker checker(p, kEos);
  const FeedResult run = feed(checker, chars("abcENxEND tail"));
  EXPECT_EQ(run.all, "abcENx");
  EXPECT_EQ(run.last.finish, FinishReason::kStop);
  ASSERT_TRUE(run.last.stop_string.has_value());
  EXPECT_EQ(*run.last.stop_string, 0u);
  EXPECT_FALSE(run.last.stop_token.has_value());
  // "a" "b" "c" stream at once; "E", "N" are held; "x" releases "ENx"; "E" "N" held; "D" ends.
  const std::vector<std::string> expected = {"a", "b", "c", "", "", "ENx", "", "", ""};
  EXPECT_EQ(run.emitted, expected);
  EXPECT_EQ(run.appended, 9);
  EXPECT_TRUE(checker.finished());
  EXPECT_EQ(checker.append(kText, "more").finish, FinishReason::kNone);  // ignored after
}

TEST(StopCheckerTest, StopStringSpanningDeltas) {
  SamplingParams p = no_limit();
  p.stop = {"STOP"};
  StopChecker checker(p, kEos);
  const FeedResult run = feed(checker, {"Hello wo", "rld! STO", "P more"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"Hello wo", "rld! ", ""}));
  EXPECT_EQ(run.last.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, IncludeStopStringInOutput) {
  SamplingParams p = no_limit();
  p.stop = {"STOP"};
  p.include_stop_str_in_output = true;
  StopChecker checker(p, kEos);
  const FeedResult run = feed(checker, {"Hello wo", "rld! STO", "P more"});
  EXPECT_EQ(run.all, "Hello world! STOP");
}

TEST(StopCheckerTest, OverlappingPrefixIsReleasedPartially) {
  // "aab" in "aaab": after "aaa" only "aa" can still start the stop string; "a" is released.
  SamplingParams p = no_limit();
  p.stop = {"aab"};
  StopChecker checker(p, kEos);
  const FeedResult run = feed(checker, chars("aaab"));
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_EQ(run.last.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, EarliestOfSeveralStopStringsWins) {
  SamplingParams p = no_limit();
  p.stop = {"bar", "ob"};
  {
    StopChecker checker(p, kEos);
    const FeedResult run = feed(checker, {"foobar"});
    EXPECT_EQ(run.all, "fo");
    EXPECT_EQ(*run.last.stop_string, 1u);
  }
  p.stop = {"abc", "ab"};  // same start: the first listed wins
  {
    StopChecker checker(p, kEos);
    const FeedResult run = feed(checker, {"xab", "c"});
    // "ab" completes in the first delta already.
    EXPECT_EQ(run.all, "x");
    EXPECT_EQ(*run.last.stop_string, 1u);
  }
  {
    StopChecker checker(p, kEos);
    const FeedResult run = feed(checker, {"xabc"});
    EXPECT_EQ(run.all, "x");
    EXPECT_EQ(*run.last.stop_string, 0u);
  }
}

TEST(StopCheckerTest, HeldTextHoldsForTheLongestCandidate) {
  // Two stop strings; held text is the longest suffix that prefixes either of them.
  SamplingParams p = no_limit();
  p.stop = {"<end>", "##"};
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.append(kText, "a<en").text, "a");
  EXPECT_EQ(checker.held_bytes(), 3u);
  EXPECT_EQ(checker.append(kText, "#").text, "<en");
  EXPECT_EQ(checker.held_bytes(), 1u);
  const StopUpdate up = checker.append(kText, "#!");
  EXPECT_EQ(up.finish, FinishReason::kStop);
  EXPECT_EQ(up.text, "");
  EXPECT_EQ(*up.stop_string, 1u);
}

TEST(StopCheckerTest, MultiByteCharactersAreHeldWhole) {
  SamplingParams p = no_limit();
  p.stop = {"\xC3\xA9!"};  // "é!"
  StopChecker checker(p, kEos);
  const FeedResult run = feed(checker, {"caf", "\xC3\xA9", "?", "\xC3\xA9", "!"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"caf", "", "\xC3\xA9?", "", ""}));
  EXPECT_EQ(run.last.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, StopTokenEndsAndItsTextIsDropped) {
  SamplingParams p = no_limit();
  p.stop_token_ids = {7};
  p.stop = {"xyz"};
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.append(1, "ab").text, "ab");
  EXPECT_EQ(checker.append(1, "xy").text, "");  // held: may become "xyz"
  const StopUpdate up = checker.append(7, "<stop>");
  EXPECT_EQ(up.finish, FinishReason::kStop);
  EXPECT_EQ(up.text, "xy");  // held text released, the stop token's own text dropped
  ASSERT_TRUE(up.stop_token.has_value());
  EXPECT_EQ(*up.stop_token, 7);
  EXPECT_FALSE(up.stop_string.has_value());

  p.include_stop_str_in_output = true;
  StopChecker with_text(p, kEos);
  EXPECT_EQ(with_text.append(7, "<stop>").text, "<stop>");
}

TEST(StopCheckerTest, EosStopsUnlessIgnored) {
  SamplingParams p = no_limit();
  {
    StopChecker checker(p, kEos);
    EXPECT_FALSE(checker.append(1, "a").finished());
    const StopUpdate up = checker.append(2, "");
    EXPECT_EQ(up.finish, FinishReason::kStop);
    EXPECT_EQ(*up.stop_token, 2);
  }
  p.ignore_eos = true;
  {
    StopChecker checker(p, kEos);
    EXPECT_FALSE(checker.append(2, "").finished());
    EXPECT_FALSE(checker.append(2, "").finished());
  }
}

TEST(StopCheckerTest, MaxTokensEndsWithLengthAndReleasesHeldText) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"XYZ"};
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.append(kText, "a").text, "a");
  EXPECT_EQ(checker.append(kText, "X").text, "");
  const StopUpdate up = checker.append(kText, "Y");
  EXPECT_EQ(up.finish, FinishReason::kLength);
  EXPECT_EQ(up.text, "XY");
  EXPECT_EQ(checker.num_tokens(), 3);
  EXPECT_EQ(finish_reason_name(up.finish), "length");
}

TEST(StopCheckerTest, StopBeatsLengthOnTheSameToken) {
  SamplingParams p;
  p.max_tokens = 2;
  p.stop = {"!"};
  StopChecker a(p, kEos);
  a.append(kText, "hi");
  EXPECT_EQ(a.append(kText, "!").finish, FinishReason::kStop);
  StopChecker b(p, kEos);
  b.append(kText, "hi");
  EXPECT_EQ(b.append(2, "").finish, FinishReason::kStop);  // EOS as the last allowed token
}

TEST(StopCheckerTest, MinTokensDelaysStops) {
  SamplingParams p = no_limit();
  p.min_tokens = 2;
  p.stop = {"."};
  StopChecker checker(p, kEos);
  EXPECT_FALSE(checker.append(2, "").finished());        // EOS at position 0: ignored
  EXPECT_FALSE(checker.append(kText, "a.").finished());  // position 1: still ignored
  const StopUpdate up = checker.append(kText, "b.c");
  EXPECT_EQ(up.finish, FinishReason::kStop);
  EXPECT_EQ(up.text, "b");
}

TEST(StopCheckerTest, FlushReleasesHeldText) {
  SamplingParams p = no_limit();
  p.stop = {"</answer>"};
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.append(kText, "42 </ans").text, "42 ");
  EXPECT_EQ(checker.flush(), "</ans");
  EXPECT_EQ(checker.held_bytes(), 0u);
}

}  // namespace
}  // namespace deepinfer::sample
