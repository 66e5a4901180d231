// The soak test's workload: a seeded, reproducible mix of requests for the public engine API
// (engine_soak.cc drives it). Each plan says what to submit, when to abort it, and what the
// engine must answer: a refusal at submit, a failed output, or an output that passes the
// checks of its kind (structured text that matches its grammar, stop strings honoured, ...).
//
// The same seed gives the same plans, so a second round of the same plans must give the same
// outputs for every request whose sampling is seeded and that is not aborted (the cross-round
// check), and must not grow the process (the leak check).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/params.h"

namespace deepinfer::soak {

// What the engine must do with a request.
enum class Expect {
  kOutput,       // accepted; every sample ends with "stop" or "length" (or "abort" if aborted)
  kSubmitError,  // submit() refuses it with InvalidArgument (bad parameter or grammar)
  kRunError,     // accepted; ends with finish_reason "error" (bad prompt)
};

// When the driver aborts it (between steps, as a front end does).
enum class AbortAt {
  kNever,
  kBeforeStart,  // right after submit, before any step
  kAfterSteps,   // `abort_after` engine steps after submit, if no token arrived yet (waiting
                 // or mid-prefill of a long prompt)
  kAfterTokens,  // once `abort_after` tokens were streamed (mid-decode)
};

// How a structured output's text is checked when it ends with "stop".
enum class Grammar { kNone, kRegexName, kRegexYesNo, kJsonOkN, kJsonName, kEbnfYesNo };

struct Plan {
  int64_t index = 0;
  std::string text;              // text prompt, or
  std::vector<int32_t> ids;      // token-id prompt (when use_ids)
  bool use_ids = false;
  bool spec_engine = false;      // runs on the speculative (ngram) engine
  SamplingParams params;
  Expect expect = Expect::kOutput;
  AbortAt abort_at = AbortAt::kNever;
  int abort_after = 0;
  Grammar grammar = Grammar::kNone;
  std::string what;  // short label of the case (reports)
};

struct WorkloadOptions {
  int64_t requests = 2000;
  uint64_t seed = 1;
  double spec_share = 0.15;  // share of plans run on the speculative engine
  int64_t max_model_len = 512;
  int64_t vocab_size = 0;
};

// `encode` turns text into the engine's token ids (used to keep valid prompts under the
// length limit and to build token-id prompts and over-long ones).
template <class Encode>
std::vector<Plan> make_workload(const WorkloadOptions& o, Encode&& encode);

// Whether `text` is in the language of `g` (for outputs that ended with "stop").
bool text_matches(Grammar g, const std::string& text);

// Implementation details shared with the template below.
namespace detail {
std::string words(std::mt19937_64& rng, int n);
const std::vector<std::string>& system_prompts();
void pick_sampling(std::mt19937_64& rng, Plan& p);
bool pick_structured(std::mt19937_64& rng, Plan& p);  // true: the plan is a structured one
bool pick_invalid(std::mt19937_64& rng, Plan& p, int64_t vocab_size);
}  // namespace detail

template <class Encode>
std::vector<Plan> make_workload(const WorkloadOptions& o, Encode&& encode) {
  std::vector<Plan> plans;
  plans.reserve(static_cast<size_t>(o.requests));
  for (int64_t i = 0; i < o.requests; ++i) {
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Plan p;
    p.index = i;
    p.spec_engine = u(rng) < o.spec_share;
    // Prompt: half start with one of the shared system prompts (prefix-cache hits), lengths
    // from a few words to a few hundred tokens (multi-step chunked prefills).
    const double len_pick = u(rng);
    const int tail_words = len_pick < 0.45 ? 1 + static_cast<int>(rng() % 10)
                           : len_pick < 0.85 ? 10 + static_cast<int>(rng() % 50)
                                             : 150 + static_cast<int>(rng() % 150);
    if (u(rng) < 0.5) {
      const auto& sys = detail::system_prompts();
      p.text = sys[rng() % sys.size()] + " ";
    }
    p.text += detail::words(rng, tail_words);
    detail::pick_sampling(rng, p);
    p.what = "sampled";
    const double kind = u(rng);
    if (kind < 0.15) {
      detail::pick_structured(rng, p);
    } else if (kind < 0.22) {
      detail::pick_invalid(rng, p, o.vocab_size);
    } else if (kind < 0.27) {
      // Accepted, failed at the next step: a bad prompt.
      p.expect = Expect::kRunError;
      const int bad = static_cast<int>(rng() % 3);
      if (bad == 0) {
        p.use_ids = true;
        p.ids = encode(p.text);
        p.ids.insert(p.ids.begin() + static_cast<std::ptrdiff_t>(rng() % (p.ids.size() + 1)),
                     static_cast<int32_t>(o.vocab_size + static_cast<int64_t>(rng() % 1000)));
        p.what = "token id outside the vocabulary";
      } else if (bad == 1) {
        p.text.clear();
        p.what = "empty prompt";
      } else {
        p.use_ids = true;
        const std::vector<int32_t> unit = encode(detail::words(rng, 64));
        while (static_cast<int64_t>(p.ids.size()) < o.max_model_len + 8) {
          p.ids.insert(p.ids.end(), unit.begin(), unit.end());
        }
        p.what = "prompt longer than max_model_len";
      }
    } else if (kind < 0.35) {
      p.use_ids = true;  // the same kind of request, as token ids
      p.what = "token-id prompt";
    }
    if (p.expect == Expect::kOutput) {
      // Keep prompt + output under the length limit, so "length" always means max_tokens.
      std::vector<int32_t> ids = encode(p.text);
      const int64_t room = o.max_model_len - 1 - p.params.max_tokens.value_or(16);
      if (static_cast<int64_t>(ids.size()) > room) ids.resize(static_cast<size_t>(room));
      if (ids.empty()) ids = encode("light");
      if (p.use_ids) {
        p.ids = std::move(ids);
      } else if (static_cast<int64_t>(encode(p.text).size()) > room) {
        p.use_ids = true;  // cut at a token, not mid-word
        p.ids = std::move(ids);
      }
      const double a = u(rng);
      if (a < 0.08) {
        p.abort_at = AbortAt::kBeforeStart;
      } else if (a < 0.16) {
        p.abort_at = AbortAt::kAfterSteps;
        p.abort_after = 1 + static_cast<int>(rng() % 3);
      } else if (a < 0.28) {
        p.abort_at = AbortAt::kAfterTokens;
        p.abort_after = 1 + static_cast<int>(rng() % 6);
      }
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace deepinfer::soak
