// Digit-range grammars; see number_ranges.h.
#include "structured/number_ranges.h"

#include <string>
#include <vector>

namespace deepinfer::structured {
namespace {

int32_t digit_class(Grammar& g, char lo, char hi) { return g.bytes(ByteSet::range(lo, hi)); }

// All digit strings of lo's length between lo and hi (same length, lo <= hi).
int32_t same_length(Grammar& g, const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return g.empty();
  if (lo == hi) return g.literal(lo);
  if (lo[0] == hi[0])
    return g.seq({g.byte(static_cast<uint8_t>(lo[0])), same_length(g, lo.substr(1), hi.substr(1))});
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  const bool lo_zeros = rest_lo.find_first_not_of('0') == std::string::npos;
  const bool hi_nines = rest_hi.find_first_not_of('9') == std::string::npos;
  std::vector<int32_t> alts;
  char start = lo[0], end = hi[0];
  if (!lo_zeros) {
    alts.push_back(g.seq(
        {g.byte(static_cast<uint8_t>(lo[0])), same_length(g, rest_lo, std::string(n - 1, '9'))}));
    ++start;
  }
  if (!hi_nines) --end;
  if (start <= end) {
    alts.push_back(g.seq(
        {digit_class(g, start, end), g.repeat(digit_class(g, '0', '9'), static_cast<int32_t>(n - 1),
                                              static_cast<int32_t>(n - 1))}));
  }
  if (!hi_nines) {
    alts.push_back(g.seq(
        {g.byte(static_cast<uint8_t>(hi[0])), same_length(g, std::string(n - 1, '0'), rest_hi)}));
  }
  return g.alt(std::move(alts));
}

std::string pow10_str(size_t zeros) {
  std::string s(zeros + 1, '0');
  s[0] = '1';
  return s;
}

// Non-negative integers in [a, b] (b open if absent).
int32_t nonneg_range(Grammar& g, uint64_t a, std::optional<uint64_t> b) {
  const std::string sa = std::to_string(a);
  std::vector<int32_t> alts;
  if (!b) {
    alts.push_back(same_length(g, sa, std::string(sa.size(), '9')));
    alts.push_back(
        g.seq({digit_class(g, '1', '9'),
               g.repeat(digit_class(g, '0', '9'), static_cast<int32_t>(sa.size()), -1)}));
    return g.alt(std::move(alts));
  }
  const std::string sb = std::to_string(*b);
  for (size_t len = sa.size(); len <= sb.size(); ++len) {
    std::string lo = len == sa.size() ? sa : pow10_str(len - 1);
    std::string hi = len == sb.size() ? sb : std::string(len, '9');
    alts.push_back(same_length(g, lo, hi));
  }
  return g.alt(std::move(alts));
}

}  // namespace

int32_t integer_range(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<int32_t> alts;
  // Negative part: magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    uint64_t mag_lo = 1;
    if (hi && *hi < 0) mag_lo = static_cast<uint64_t>(-(*hi + 1)) + 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
    if (!mag_hi || mag_lo <= *mag_hi)
      alts.push_back(g.seq({g.byte('-'), nonneg_range(g, mag_lo, mag_hi)}));
  }
  if (!hi || *hi >= 0) {
    uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    if (!b || a <= *b) alts.push_back(nonneg_range(g, a, b));
  }
  return g.alt(std::move(alts));
}

int32_t bounded_number(Grammar& g, std::optional<int64_t> lo, bool lo_exclusive,
                       std::optional<int64_t> hi, bool hi_exclusive) {
  std::vector<int32_t> alts;
  // Integers.
  std::optional<int64_t> ilo = lo, ihi = hi;
  if (ilo && lo_exclusive) *ilo += 1;
  if (ihi && hi_exclusive) *ihi -= 1;
  if (!ilo || !ihi || *ilo <= *ihi) alts.push_back(integer_range(g, ilo, ihi));
  const int32_t frac = g.seq({g.byte('.'), g.plus(digit_class(g, '0', '9'))});
  // "k.ddd" (k >= 0) lies in [k, k + 1): needs lo <= k (lo < k if exclusive) and k + 1 <= hi.
  {
    int64_t klo = 0;
    if (lo) klo = std::max<int64_t>(klo, lo_exclusive ? *lo + 1 : *lo);
    std::optional<int64_t> khi;
    if (hi) khi = *hi - 1;
    if (!khi || klo <= *khi) {
      alts.push_back(g.seq(
          {nonneg_range(g, static_cast<uint64_t>(klo),
                        khi ? std::optional<uint64_t>(static_cast<uint64_t>(*khi)) : std::nullopt),
           frac}));
    }
  }
  // "-k.ddd" (k >= 0) lies in (-(k + 1), -k]: needs lo <= -(k + 1) and -k <= hi (-k < hi if
  // exclusive).
  {
    int64_t klo = 0;
    if (hi) klo = std::max<int64_t>(klo, hi_exclusive ? -*hi + 1 : -*hi);
    std::optional<int64_t> khi;
    if (lo) khi = -*lo - 1;
    if (!khi || klo <= *khi) {
      alts.push_back(g.seq(
          {g.byte('-'),
           nonneg_range(g, static_cast<uint64_t>(klo),
                        khi ? std::optional<uint64_t>(static_cast<uint64_t>(*khi)) : std::nullopt),
           frac}));
    }
  }
  return g.alt(std::move(alts));
}

}  // namespace deepinfer::structured
