// engine_soak: a bounded soak test of the engine through its public API (include/deepinfer/).
//
//   engine_soak [--requests N] [--seed S] [--seconds CAP] [--rounds R] [--concurrency C]
//               [--rss-tolerance-mib M] [--spec-share F] [--model DIR]
//
// Runs R rounds of the same N seeded requests (soak_workload.h: random prompt lengths with
// shared system prompts, sampling settings, seeds, stop strings, n > 1, structured outputs,
// invalid parameters and grammars, bad prompts, aborts before start / before the first token /
// mid-decode) on two engines over the embedded default model: the main one with a KV pool
// small enough to force preemption, prefix caching on small blocks and asynchronous
// scheduling; a second one with ngram speculative decoding for a share of the requests (no
// prefix caching there, so its idle KV bytes must be exactly 0 even before any reset). Up to
// C requests are live at once; they are submitted in bursts and aborted between steps, as a
// front end does.
//
// Checks (any failure: exit 1, with the first failures printed):
//   * every request was refused at submit exactly when it had to be (InvalidArgument), and
//     every accepted one ended exactly once: its streamed deltas add up to its output, each
//     sample has one finished delta, and its finish reason / error / text fit its plan
//     (structured text matches its grammar, stop strings are honoured, token counts respect
//     max_tokens, logprobs are there when asked);
//   * seeded requests not aborted give the same tokens in every round;
//   * the main engine preempted (EngineStats::preemptions > 0), the prefix cache hit, the
//     speculative engine verified drafts;
//   * once idle: no request running or waiting, no KV block held; with no snapshot kept, no KV
//     byte held either; after Engine::reset_prefix_cache() no block cached, no snapshot and
//     no KV byte held;
//   * the resident memory (/proc/self/statm, after malloc_trim) after the last round is within
//     the tolerance of that after the first (the first round warms pools and caches), less
//     what the engines' KV page pools reserved meanwhile: a pool keeps the pages of its busiest
//     moment, bounded by its block count, and how busy a round gets depends on its timing
//     (CI saw round 2 reserve 12.8 MiB more than round 1 of the same seed, 16.1 MiB of RSS).
// A run that reaches CAP seconds stops submitting, aborts what is live and still checks.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "soak_workload.h"

namespace deepinfer::soak {
// GCC defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

namespace {

struct Args {
  int64_t requests = 2000;
  uint64_t seed = 1;
  double seconds = 600;
  int rounds = 2;
  int concurrency = 48;
  double rss_tolerance_mib = 16;
  double spec_share = 0.15;
  std::string model;
};

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", k.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (k == "--requests") {
      a.requests = std::atoll(v);
    } else if (k == "--seed") {
      a.seed = std::strtoull(v, nullptr, 10);
    } else if (k == "--seconds") {
      a.seconds = std::atof(v);
    } else if (k == "--rounds") {
      a.rounds = std::atoi(v);
    } else if (k == "--concurrency") {
      a.concurrency = std::atoi(v);
    } else if (k == "--rss-tolerance-mib") {
      a.rss_tolerance_mib = std::atof(v);
    } else if (k == "--spec-share") {
      a.spec_share = std::atof(v);
    } else if (k == "--model") {
      a.model = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return false;
    }
  }
  return a.requests > 0 && a.rounds >= 1 && a.concurrency >= 1 && a.seconds > 0;
}

double rss_mib() {
  malloc_trim(0);  // what the process keeps, not what the allocator has yet to return
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// One request's life in one round.
struct Track {
  bool accepted = false;
  StatusCode submit_code = StatusCode::kOk;
  std::string submit_error;
  RequestHandle handle = 0;
  int64_t submit_step = 0;  // the driver's step counter at submission
  bool abort_called = false;
  bool abort_ok = false;
  int64_t tokens_at_abort = 0;
  int64_t streamed_tokens = 0;  // over every sample
  int finals = 0;
  RequestOutput out;
  std::vector<std::string> delta_text;  // per sample
  std::vector<std::vector<int32_t>> delta_tokens;
  std::vector<int> finished_deltas;
};

struct RoundResult {
  int64_t submitted = 0, refused = 0, run_errors = 0, completed = 0, aborted = 0;
  int64_t abort_before_start = 0, abort_before_token = 0, abort_mid_decode = 0;
  int64_t abort_too_late = 0;  // abort() answered NotFound: the request had just ended
  int64_t steps = 0;
  double seconds = 0;
  bool capped = false;
};

class Soak {
 public:
  Soak(Args args, std::unique_ptr<Engine> main, std::unique_ptr<Engine> spec)
      : args_(std::move(args)) {
    engines_[0] = std::move(main);
    engines_[1] = std::move(spec);
    WorkloadOptions wo;
    wo.requests = args_.requests;
    wo.seed = args_.seed;
    wo.spec_share = args_.spec_share;
    wo.max_model_len = engines_[0]->max_model_len();
    wo.vocab_size = engines_[0]->vocab_size();
    Engine* e = engines_[0].get();
    plans_ = make_workload(wo, [e](const std::string& t) { return e->encode(t); });
  }

  // The engines' KV page pools' reserved bytes, in MiB.
  double kv_reserved_mib() const {
    double mib = 0;
    for (const auto& e : engines_) {
      if (e) mib += static_cast<double>(e->stats().kv_bytes_reserved);
    }
    return mib / (1 << 20);
  }

  bool run(int rounds) {
    rss_.push_back(rss_mib());
    kv_reserved_.push_back(kv_reserved_mib());
    std::printf("soak: %lld requests x %d rounds, seed %llu, concurrency %d\n  main: %s\n  spec: %s\n",
                static_cast<long long>(plans_.size()), rounds,
                static_cast<unsigned long long>(args_.seed), args_.concurrency,
                engines_[0]->describe().c_str(), engines_[1]->describe().c_str());
    std::printf("  RSS at start %.1f MiB\n", rss_.back());
    for (int r = 0; r < rounds; ++r) {
      const EngineStats before0 = engines_[0]->stats();
      const EngineStats before1 = engines_[1]->stats();
      tracks_.assign(plans_.size(), Track{});
      const RoundResult res = run_round();
      check_round();
      check_stats(r, before0, before1, res);
      check_idle(r);
      rss_.push_back(rss_mib());
      kv_reserved_.push_back(kv_reserved_mib());
      const EngineStats& s0 = engines_[0]->stats();
      const EngineStats& s1 = engines_[1]->stats();
      std::printf(
          "round %d: %lld requests in %.1f s (%lld steps)%s: %lld completed, %lld aborted "
          "(%lld before start, %lld before the first token, %lld mid-decode; %lld too late), "
          "%lld refused at submit, %lld failed as they should; preemptions %lld, prefix hit "
          "tokens %lld, snapshot restores %lld / recomputes %lld, spec verify steps %lld "
          "(accepted %lld of %lld drafts); RSS %.1f MiB\n",
          r + 1, static_cast<long long>(plans_.size()), res.seconds,
          static_cast<long long>(res.steps), res.capped ? " (CAPPED)" : "",
          static_cast<long long>(res.completed), static_cast<long long>(res.aborted),
          static_cast<long long>(res.abort_before_start),
          static_cast<long long>(res.abort_before_token),
          static_cast<long long>(res.abort_mid_decode),
          static_cast<long long>(res.abort_too_late), static_cast<long long>(res.refused),
          static_cast<long long>(res.run_errors),
          static_cast<long long>(s0.preemptions - before0.preemptions),
          static_cast<long long>(s0.prefix_hit_tokens - before0.prefix_hit_tokens),
          static_cast<long long>(s0.prefix_restores - before0.prefix_restores),
          static_cast<long long>(s0.prefix_recomputes - before0.prefix_recomputes),
          static_cast<long long>(s1.spec_verify_steps - before1.spec_verify_steps),
          static_cast<long long>(s1.spec_accepted_tokens - before1.spec_accepted_tokens),
          static_cast<long long>(s1.spec_draft_tokens - before1.spec_draft_tokens), rss_.back());
      std::fflush(stdout);
      if (r == 0) {
        first_tokens_.resize(plans_.size());
        for (size_t i = 0; i < plans_.size(); ++i) first_tokens_[i] = seeded_tokens(i);
      } else {
        for (size_t i = 0; i < plans_.size(); ++i) {
          const auto now = seeded_tokens(i);
          if (now && first_tokens_[i] && *now != *first_tokens_[i]) {
            fail(i, "round " + std::to_string(r + 1) + " gave other tokens than round 1");
          }
        }
      }
      if (res.capped) capped_ = true;
    }
    if (rss_.size() >= 3) {
      const double pools = kv_reserved_.back() - kv_reserved_[1];
      const double growth = rss_.back() - rss_[1] - pools;
      std::printf(
          "RSS: start %.1f MiB, after round 1 %.1f MiB, after round %d %.1f MiB "
          "(KV pools reserved %+.1f MiB of it; the rest %+.1f MiB, tolerance %.1f MiB)\n",
          rss_[0], rss_[1], rounds, rss_.back(), pools, growth, args_.rss_tolerance_mib);
      if (kUnderAddressSanitizer) {
        // ASan keeps freed blocks in its quarantine (256 MiB by default) and redzones around
        // live ones, so resident memory says nothing about our frees there; LeakSanitizer checks
        // at exit that nothing was lost.
        std::printf("RSS growth not judged under AddressSanitizer (its quarantine holds freed "
                    "memory); LeakSanitizer checks leaks at exit\n");
      } else if (growth > args_.rss_tolerance_mib) {
        failures_.push_back("resident memory grew by " + std::to_string(growth) +
                            " MiB beyond the KV pools' reservations between round 1 and round " +
                            std::to_string(rounds));
      }
    }
    for (size_t i = 0; i < failures_.size() && i < 30; ++i) {
      std::printf("FAIL: %s\n", failures_[i].c_str());
    }
    if (failures_.size() > 30) std::printf("... %zu failures in all\n", failures_.size());
    std::printf("%s\n", failures_.empty() ? "PASS" : "FAILED");
    return failures_.empty();
  }

 private:
  void fail(size_t i, const std::string& why) {
    const Plan& p = plans_[i];
    failures_.push_back("request " + std::to_string(i) + " (" + p.what +
                        (p.spec_engine ? ", spec engine" : "") + "; " + describe(p) + "): " + why);
  }

  static std::string describe(const Plan& p) {
    const SamplingParams& s = p.params;
    std::string d = "n " + std::to_string(s.n) + ", T " + std::to_string(s.temperature) +
                    ", top_k " + std::to_string(s.top_k) + ", top_p " + std::to_string(s.top_p) +
                    ", min_p " + std::to_string(s.min_p) + ", max_tokens " +
                    std::to_string(s.max_tokens.value_or(-1)) + ", min_tokens " +
                    std::to_string(s.min_tokens);
    if (s.seq_seed) d += ", seed " + std::to_string(*s.seq_seed);
    for (const std::string& st : s.stop) d += ", stop '" + st + "'";
    if (s.include_stop_str_in_output) d += ", include_stop_str";
    for (int32_t id : s.stop_token_ids) d += ", stop id " + std::to_string(id);
    if (s.ignore_eos) d += ", ignore_eos";
    if (s.logprobs) d += ", logprobs " + std::to_string(*s.logprobs);
    if (s.prompt_logprobs) d += ", prompt_logprobs " + std::to_string(*s.prompt_logprobs);
    if (!s.skip_special_tokens) d += ", special tokens kept";
    if (s.has_penalties()) d += ", penalties";
    if (s.structured) d += ", " + s.structured->schema_type + " '" + s.structured->schema + "'";
    if (p.use_ids) d += ", token ids";
    d += ", prompt of " + std::to_string(p.use_ids ? p.ids.size() : p.text.size()) +
         (p.use_ids ? " tokens" : " chars");
    return d;
  }

  // The tokens of every sample, for requests whose outcome does not depend on timing or on
  // the engine's own seed: seeded or greedy, never aborted, ended normally.
  std::optional<std::vector<std::vector<int32_t>>> seeded_tokens(size_t i) const {
    const Plan& p = plans_[i];
    const Track& t = tracks_[i];
    // A request the time cap aborted (a capped round, e.g. under the sanitizers) has no full
    // output to compare.
    if (p.expect != Expect::kOutput || p.abort_at != AbortAt::kNever || !t.accepted ||
        t.abort_called) {
      return {};
    }
    if (!p.params.seq_seed && p.params.temperature != 0.0f) return {};
    std::vector<std::vector<int32_t>> out;
    for (const CompletionOutput& c : t.out.outputs) out.push_back(c.token_ids);
    return out;
  }

  void submit(size_t i, int64_t step) {
    const Plan& p = plans_[i];
    Track& t = tracks_[i];
    Engine& e = *engines_[p.spec_engine ? 1 : 0];
    const auto n = static_cast<size_t>(std::max(p.params.n, 1));
    t.delta_text.assign(n, {});
    t.delta_tokens.assign(n, {});
    t.finished_deltas.assign(n, 0);
    Track* tp = &t;
    auto on_delta = [tp](const StreamDelta& d) {
      const auto k = static_cast<size_t>(d.index);
      if (k >= tp->delta_text.size()) {
        tp->finished_deltas.assign(tp->delta_text.size(), 99);  // flags the bad index
        return;
      }
      tp->delta_text[k] += d.text;
      tp->delta_tokens[k].insert(tp->delta_tokens[k].end(), d.token_ids.begin(),
                                 d.token_ids.end());
      tp->streamed_tokens += static_cast<int64_t>(d.token_ids.size());
      if (d.finished) ++tp->finished_deltas[k];
    };
    Expected<RequestHandle> h = p.use_ids ? e.submit(p.ids, p.params, on_delta)
                                          : e.submit_text(p.text, p.params, on_delta);
    t.submit_step = step;
    if (!h.ok()) {
      t.submit_code = h.status().code();
      t.submit_error = h.status().message();
      return;
    }
    t.accepted = true;
    t.handle = *h;
    by_handle_[p.spec_engine ? 1 : 0][*h] = i;
    live_.push_back(i);
  }

  void try_abort(size_t i, RoundResult& res) {
    Track& t = tracks_[i];
    Engine& e = *engines_[plans_[i].spec_engine ? 1 : 0];
    t.abort_called = true;
    t.tokens_at_abort = t.streamed_tokens;
    const Status st = e.abort(t.handle);
    t.abort_ok = st.ok();
    if (!st.ok()) {
      ++res.abort_too_late;
      if (st.code() != StatusCode::kNotFound || t.finals == 0) {
        fail(i, "abort of a live request failed: " + st.message());
      }
      return;
    }
    // A second abort of a request that has not ended yet is harmless.
    if (!e.abort(t.handle).ok()) fail(i, "a second abort before the end was refused");
  }

  RoundResult run_round() {
    RoundResult res;
    const auto t0 = std::chrono::steady_clock::now();
    std::mt19937_64 rng(args_.seed ^ 0x5eed);
    size_t next = 0;
    int64_t step = 0;
    live_.clear();
    by_handle_[0].clear();
    by_handle_[1].clear();
    const int64_t max_steps = 200 * static_cast<int64_t>(plans_.size()) + 10000;  // hang guard
    while (next < plans_.size() || !live_.empty() || engines_[0]->has_unfinished() ||
           engines_[1]->has_unfinished()) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!res.capped && elapsed > args_.seconds) {
        res.capped = true;
        for (size_t i : live_) {
          if (!tracks_[i].abort_called) try_abort(i, res);
        }
      }
      // Submit a burst while below the concurrency target.
      const size_t burst = 1 + rng() % 8;
      for (size_t k = 0; k < burst && !res.capped && next < plans_.size() &&
                         static_cast<int>(live_.size()) < args_.concurrency;
           ++k) {
        const size_t i = next++;
        submit(i, step);
        ++res.submitted;
        if (tracks_[i].accepted && plans_[i].abort_at == AbortAt::kBeforeStart) try_abort(i, res);
      }
      for (size_t i : live_) {
        const Plan& p = plans_[i];
        const Track& t = tracks_[i];
        if (t.abort_called || t.finals > 0) continue;
        if ((p.abort_at == AbortAt::kAfterSteps && t.streamed_tokens == 0 &&
             step - t.submit_step >= p.abort_after) ||
            (p.abort_at == AbortAt::kAfterTokens && t.streamed_tokens >= p.abort_after)) {
          try_abort(i, res);
        }
      }
      for (int k = 0; k < 2; ++k) {
        for (RequestOutput& o : engines_[k]->step()) take_output(k, std::move(o));
      }
      ++step;
      live_.erase(std::remove_if(live_.begin(), live_.end(),
                                 [&](size_t i) { return tracks_[i].finals > 0; }),
                  live_.end());
      if (step > max_steps) {
        failures_.push_back("no end after " + std::to_string(step) + " steps: " +
                            std::to_string(live_.size()) + " requests still live");
        break;
      }
    }
    // The last (wasted) asynchronous step is still in flight: it must end nothing.
    for (int k = 0; k < 2; ++k) {
      for (int d = 0; d < 3; ++d) {
        for (RequestOutput& o : engines_[k]->step()) take_output(k, std::move(o));
      }
    }
    res.steps = step;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < plans_.size(); ++i) {
      const Track& t = tracks_[i];
      if (i >= next) continue;
      if (!t.accepted) {
        ++res.refused;
      } else if (plans_[i].expect == Expect::kRunError) {
        ++res.run_errors;
      } else if (t.abort_ok) {
        ++res.aborted;
        if (plans_[i].abort_at == AbortAt::kBeforeStart) {
          ++res.abort_before_start;
        } else if (t.tokens_at_abort == 0) {
          ++res.abort_before_token;
        } else {
          ++res.abort_mid_decode;
        }
      } else {
        ++res.completed;
      }
    }
    submitted_ = next;
    return res;
  }

  void take_output(int engine, RequestOutput&& o) {
    const auto it = by_handle_[engine].find(o.id);
    if (it == by_handle_[engine].end()) {
      failures_.push_back("an output for unknown handle " + std::to_string(o.id));
      return;
    }
    Track& t = tracks_[it->second];
    if (++t.finals == 1) t.out = std::move(o);
  }

  // Plans past `submitted_` were never submitted (a capped round).
  void check_round() {
    for (size_t i = 0; i < submitted_; ++i) check_request(i);
  }

  void check_request(size_t i) {
    const Plan& p = plans_[i];
    const Track& t = tracks_[i];
    if (p.expect == Expect::kSubmitError) {
      if (t.accepted) {
        fail(i, "accepted, but submit() should have refused it");
      } else if (t.submit_code != StatusCode::kInvalidArgument || t.submit_error.empty()) {
        fail(i, "refused with the wrong code or no message: " + t.submit_error);
      }
      return;
    }
    if (!t.accepted) {
      fail(i, "refused at submit: " + t.submit_error);
      return;
    }
    if (t.finals != 1) {
      fail(i, t.finals == 0 ? "never ended (vanished)"
                            : "ended " + std::to_string(t.finals) + " times");
      return;
    }
    const RequestOutput& o = t.out;
    const SamplingParams& sp = p.params;
    if (!o.finished) fail(i, "final output not marked finished");
    if (o.outputs.size() != static_cast<size_t>(sp.n)) {
      fail(i, "has " + std::to_string(o.outputs.size()) + " samples, n = " +
                  std::to_string(sp.n));
      return;
    }
    if (sp.prompt_logprobs && p.expect == Expect::kOutput && !t.abort_ok) {
      const size_t prompt_len = o.prompt_token_ids.size();
      if (o.prompt_logprobs.size() + 1 != prompt_len) {
        fail(i, "prompt_logprobs has " + std::to_string(o.prompt_logprobs.size()) +
                    " entries for a prompt of " + std::to_string(prompt_len));
      }
    }
    for (size_t k = 0; k < o.outputs.size(); ++k) {
      const CompletionOutput& c = o.outputs[k];
      const std::string tag = "sample " + std::to_string(k) + ": ";
      if (c.index != static_cast<int32_t>(k)) fail(i, tag + "wrong index");
      if (t.finished_deltas[k] != 1) {
        fail(i, tag + std::to_string(t.finished_deltas[k]) + " finished deltas");
      }
      if (t.delta_text[k] != c.text) {
        fail(i, tag + "streamed text '" + t.delta_text[k] + "' != output '" + c.text + "'");
      }
      if (t.delta_tokens[k] != c.token_ids) fail(i, tag + "streamed tokens != output tokens");
      if (p.expect == Expect::kRunError) {
        if (c.finish_reason != "error" || c.error.empty() || o.error.empty()) {
          fail(i, tag + "should have failed, ended '" + c.finish_reason + "'");
        }
        continue;
      }
      if (!c.error.empty() || c.finish_reason == "error") {
        fail(i, tag + "failed: " + c.error);
        continue;
      }
      const auto max_tokens = static_cast<size_t>(sp.max_tokens.value_or(1 << 30));
      if (c.token_ids.size() > max_tokens) fail(i, tag + "more tokens than max_tokens");
      if (t.abort_ok) {
        if (c.finish_reason != "abort" && c.finish_reason != "stop" &&
            c.finish_reason != "length") {
          fail(i, tag + "aborted, ended '" + c.finish_reason + "'");
        }
        continue;
      }
      if (c.finish_reason != "stop" && c.finish_reason != "length") {
        fail(i, tag + "ended '" + c.finish_reason + "'");
        continue;
      }
      if (c.finish_reason == "length" && c.token_ids.size() != max_tokens) {
        fail(i, tag + "'length' after " + std::to_string(c.token_ids.size()) + " of " +
                    std::to_string(max_tokens) + " tokens");
      }
      if (sp.logprobs && c.logprobs.size() != c.token_ids.size()) {
        fail(i, tag + "logprobs for " + std::to_string(c.logprobs.size()) + " of " +
                    std::to_string(c.token_ids.size()) + " tokens");
      }
      // Stop strings count from min_tokens on (vLLM's semantics): earlier text may hold them.
      if (!sp.include_stop_str_in_output && sp.min_tokens == 0) {
        for (const std::string& s : sp.stop) {
          if (c.text.find(s) != std::string::npos) {
            fail(i, tag + "text '" + c.text + "' (" + c.finish_reason + ", " +
                        std::to_string(c.token_ids.size()) + " tokens) holds stop string '" +
                        s + "'");
          }
        }
      }
      if (c.finish_reason == "stop" && sp.stop.empty() && !sp.structured &&
          static_cast<int32_t>(c.token_ids.size()) < sp.min_tokens) {
        fail(i, tag + "stopped before min_tokens");
      }
      if (c.finish_reason == "stop" && sp.ignore_eos && sp.stop.empty() &&
          sp.stop_token_ids.empty() && !sp.structured) {
        fail(i, tag + "'stop' with ignore_eos and nothing else to stop it");
      }
      if (c.finish_reason == "stop" && p.grammar != Grammar::kNone &&
          !text_matches(p.grammar, c.text)) {
        fail(i, tag + "structured text does not match: '" + c.text + "'");
      }
    }
  }

  void check_stats(int round, const EngineStats& b0, const EngineStats& b1,
                   const RoundResult& res) {
    const EngineStats& s0 = engines_[0]->stats();
    const EngineStats& s1 = engines_[1]->stats();
    const std::string r = "round " + std::to_string(round + 1) + ": ";
    if (res.capped) return;  // a capped round ran fewer requests than the figures assume
    if (s0.preemptions <= b0.preemptions) failures_.push_back(r + "no preemption");
    if (s0.prefix_hit_tokens <= b0.prefix_hit_tokens) failures_.push_back(r + "no prefix hit");
    if (res.aborted == 0) failures_.push_back(r + "nothing aborted");
    if (plans_.size() >= 200 && args_.spec_share > 0 &&
        s1.spec_verify_steps <= b1.spec_verify_steps) {
      failures_.push_back(r + "the speculative engine verified no draft");
    }
  }

  void check_idle(int round) {
    const std::string r = "round " + std::to_string(round + 1) + ", ";
    for (int k = 0; k < 2; ++k) {
      Engine& e = *engines_[k];
      const std::string who = r + (k == 0 ? "main engine" : "spec engine") + ": ";
      if (e.has_unfinished()) failures_.push_back(who + "requests left after the round");
      const EngineStats s = e.stats();
      if (s.num_running != 0 || s.num_waiting != 0) {
        failures_.push_back(who + std::to_string(s.num_running) + " running, " +
                            std::to_string(s.num_waiting) + " waiting when idle");
      }
      if (s.kv_blocks_in_use != 0) {
        failures_.push_back(who + std::to_string(s.kv_blocks_in_use) +
                            " KV blocks held when idle");
      }
      if (s.prefix_snapshots == 0 && s.kv_bytes_in_use != 0) {
        failures_.push_back(who + std::to_string(s.kv_bytes_in_use) +
                            " KV bytes held when idle with no snapshot");
      }
      std::printf("  %s idle: %lld KV blocks cached of %lld, %lld snapshots (%.1f MiB "
                  "footprint), KV %.1f MiB in use / %.1f MiB reserved (peak %.1f MiB)\n",
                  k == 0 ? "main" : "spec", static_cast<long long>(s.kv_blocks_cached),
                  static_cast<long long>(s.kv_blocks_total),
                  static_cast<long long>(s.prefix_snapshots),
                  static_cast<double>(s.prefix_snapshot_bytes) / (1 << 20),
                  static_cast<double>(s.kv_bytes_in_use) / (1 << 20),
                  static_cast<double>(s.kv_bytes_reserved) / (1 << 20),
                  static_cast<double>(s.kv_bytes_in_use_peak) / (1 << 20));
      const Status st = e.reset_prefix_cache();
      if (!st.ok()) {
        failures_.push_back(who + "reset_prefix_cache: " + st.message());
        continue;
      }
      const EngineStats& a = e.stats();
      if (a.kv_blocks_in_use != 0 || a.kv_blocks_cached != 0 || a.prefix_snapshots != 0 ||
          a.prefix_snapshot_bytes != 0 || a.kv_bytes_in_use != 0) {
        failures_.push_back(who + "after reset_prefix_cache: " +
                            std::to_string(a.kv_blocks_in_use) + " blocks in use, " +
                            std::to_string(a.kv_blocks_cached) + " cached, " +
                            std::to_string(a.prefix_snapshots) + " snapshots, " +
                            std::to_string(a.kv_bytes_in_use) + " KV bytes in use");
      }
    }
  }

  Args args_;
  std::unique_ptr<Engine> engines_[2];
  std::vector<Plan> plans_;
  std::vector<Track> tracks_;
  std::vector<size_t> live_;
  std::map<RequestHandle, size_t> by_handle_[2];
  std::vector<std::optional<std::vector<std::vector<int32_t>>>> first_tokens_;
  std::vector<double> rss_, kv_reserved_;  // after each round (and at the start)
  std::vector<std::string> failures_;
  size_t submitted_ = 0;
  bool capped_ = false;
};

std::string default_model() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return std::string(d != nullptr ? d : DEEPINFER_SOAK_SOURCE_DIR) + "/models/v4-small";
}

}  // namespace
}  // namespace deepinfer::soak

int main(int argc, char** argv) {
  using namespace deepinfer;
  soak::Args args;
  if (!soak::parse_args(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: engine_soak [--requests N] [--seed S] [--seconds CAP] [--rounds R] "
                 "[--concurrency C] [--rss-tolerance-mib M] [--spec-share F] [--model DIR]\n");
    return 2;
  }
  if (args.model.empty()) args.model = soak::default_model();
  EngineOptions o;
  o.model_dir = args.model;
  o.max_model_len = 512;
  o.kv_block_size = 16;             // short shared prefixes hit the cache
  o.num_kv_blocks = 160;            // small: forces preemption at this concurrency
  o.max_num_seqs = 32;
  o.max_num_batched_tokens = 128;   // long prompts prefill in several chunks
  o.prefix_cache_bytes = 16 << 20;  // small: snapshots are evicted too
  o.async_scheduling = true;
  auto main_engine = Engine::create(o);
  if (!main_engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", main_engine.status().message().c_str());
    return 2;
  }
  // The second engine: ngram drafts, and no prefix caching, so that its KV bytes must be back
  // at exactly 0 whenever it is idle (no snapshot may hold any); a small pool preempts too.
  EngineOptions so = o;
  so.enable_prefix_caching = false;
  so.num_kv_blocks = 120;
  so.max_num_seqs = 8;
  so.speculative_method = "ngram";
  so.num_speculative_tokens = 3;
  auto spec_engine = Engine::create(so);
  if (!spec_engine.ok()) {
    std::fprintf(stderr, "spec engine: %s\n", spec_engine.status().message().c_str());
    return 2;
  }
  soak::Soak soak(args, std::move(*main_engine), std::move(*spec_engine));
  return soak.run(args.rounds) ? 0 : 1;
}
