// Decimal-digit grammars for bounded numbers: the JSON Schema front end's exact integer ranges
// (minimum/maximum become a digit-range grammar, like a regex range generator) and the
// bounded-number construction that keeps every generated value inside the bounds.
#pragma once

#include <cstdint>
#include <optional>

#include "structured/grammar.h"

namespace deepinfer::structured {

// Integers n with lo <= n <= hi (either end open), written as JSON writes them: no leading
// zeros, no "-0".
int32_t integer_range(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi);

// Decimal numbers (optional fraction, no exponent) whose value lies in [lo, hi], given integer
// bounds; with `lo_exclusive`/`hi_exclusive` the bound itself is excluded. A sound subset:
// every string it produces is in range; fractions within one unit of an exclusive bound are
// not produced.
int32_t bounded_number(Grammar& g, std::optional<int64_t> lo, bool lo_exclusive,
                       std::optional<int64_t> hi, bool hi_exclusive);

}  // namespace deepinfer::structured
