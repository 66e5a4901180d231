// The limits of the structured-output front ends (regex, JSON Schema, GBNF) and of the
// automaton they compile to, in one place; docs/limits.md lists them with every other parser's.
// Each bounds recursion (nesting depth), memory (text size, repetition counts, states) or time
// (rules) that a hostile pattern, schema or grammar could otherwise drive without bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::structured {

// Text sizes.
inline constexpr size_t kMaxRegexBytes = size_t{64} << 10;
inline constexpr size_t kMaxGrammarBytes = size_t{1} << 20;  // GBNF
inline constexpr size_t kMaxSchemaBytes = size_t{1} << 20;   // JSON Schema text
// Nesting: regex groups, GBNF parentheses, the JSON Schema text's arrays and objects, and
// schemas within schemas as the converter walks them.
inline constexpr int kMaxRegexDepth = 256;
inline constexpr int kMaxGrammarDepth = 256;
inline constexpr size_t kMaxSchemaJsonDepth = 512;
inline constexpr int kMaxSchemaDepth = 200;
// A bounded repetition {m,n} needs one automaton copy of its item per count.
inline constexpr int32_t kMaxRepeat = 10'000;
// Automaton size (AutomatonLimits' defaults): rules, and NFA plus DFA states of all rules.
inline constexpr int32_t kMaxRules = 10'000;
inline constexpr int32_t kMaxAutomatonStates = 2'000'000;
// Subset construction's work: the NFA states of every target set it forms, found or new, summed
// over all rules; compile time follows it (in a release build a few ms per million for an NFA
// of up to 1,024 states, built over bitsets, and 30-70 ms per million for a larger one; it was
// a second per million before the construction was rewritten, docs/fuzzing.md). An unbounded
// repetition followed by a long bounded one over overlapping characters ("[9a]+\\d{N}") makes N^2/2
// DFA states of up to N positions each: N^3/6 work, hours for N = 10,000 before kMaxAutomatonStates
// would stop it. The largest legitimate grammars seen (".{10000}", a schema of 512-character
// strings and 512-item arrays) need 0.1-4 million.
inline constexpr int64_t kMaxSubsetWork = 4'000'000;

}  // namespace deepinfer::structured
