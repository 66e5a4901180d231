// The engine path of `deepinfer generate`: text prompts (arguments, a file, or stdin) and
// sampling, through deepinfer::Engine (continuous batching: every prompt is submitted first,
// then one engine loop runs them together). Streams text as it becomes final when one prompt is
// given (--stream), prints one JSON object per prompt with --json. The token-id greedy path in
// generate.cc stays the simplest whole path (numerics checks, bench/model_cpu).
#include "commands/generate_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deepinfer/engine.h"

namespace deepinfer::cli {
namespace {

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "deepinfer generate: error: %s\n", message.c_str());
  return code;
}

// Prompts from --prompt (repeatable), --prompts-file (one per line) or stdin ("-").
Expected<std::vector<std::string>> collect_prompts(const GenerateEngineArgs& a) {
  std::vector<std::string> prompts;
  for (const auto& p : a.prompts) {
    if (p == "-") {
      std::string all;
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof(buf), stdin)) > 0;) all.append(buf, n);
      while (!all.empty() && (all.back() == '\n' || all.back() == '\r')) all.pop_back();
      prompts.push_back(all);
    } else {
      prompts.push_back(p);
    }
  }
  if (!a.prompts_file.empty()) {
    std::ifstream f(a.prompts_file);
    if (!f) return not_found("--prompts-file " + a.prompts_file + ": cannot open the file");
    std::string line;
    while (std::getline(f, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) prompts.push_back(line);
    }
  }
  if (prompts.empty() && a.prompt_ids.empty()) {
    return invalid_argument(
        "no prompt: give --prompt TEXT (or - for stdin), --prompts-file, or "
        "--prompt-ids");
  }
  return prompts;
}

// The counters the stats line prints, over the timed run only (after a --warmup).
EngineStats stats_since(const EngineStats& now, const EngineStats& before) {
  EngineStats d = now;
  d.steps -= before.steps;
  d.forward_seconds -= before.forward_seconds;
  d.sample_seconds -= before.sample_seconds;
  d.host_seconds -= before.host_seconds;
  d.gap_seconds -= before.gap_seconds;
  d.draft_seconds -= before.draft_seconds;
  d.spec_verify_steps -= before.spec_verify_steps;
  d.spec_draft_tokens -= before.spec_draft_tokens;
  d.spec_accepted_tokens -= before.spec_accepted_tokens;
  d.spec_grammar_cut_tokens -= before.spec_grammar_cut_tokens;
  d.spec_draft_window_restarts -= before.spec_draft_window_restarts;
  d.spec_varlen_probes_passed -= before.spec_varlen_probes_passed;
  d.spec_varlen_probes_failed -= before.spec_varlen_probes_failed;
  d.spec_varlen_paused_plans -= before.spec_varlen_paused_plans;
  d.prefix_hit_tokens -= before.prefix_hit_tokens;
  d.graph_setup_steps -= before.graph_setup_steps;
  d.graph_setup_seconds -= before.graph_setup_seconds;
  d.graph_captures -= before.graph_captures;
  d.graph_replays -= before.graph_replays;
  d.graph_drops -= before.graph_drops;
  return d;
}

}  // namespace

int run_generate_with_engine(const GenerateEngineArgs& a) {
  auto prompts = collect_prompts(a);
  if (!prompts.ok()) return fail(2, prompts.status().message());

  SamplingParams p;
  p.temperature = static_cast<float>(a.temperature);
  p.top_p = static_cast<float>(a.top_p);
  p.top_k = a.top_k;
  p.min_p = static_cast<float>(a.min_p);
  p.max_tokens = a.max_tokens;
  p.ignore_eos = a.ignore_eos;
  p.stop = a.stop;
  if (a.seed >= 0) p.seq_seed = static_cast<uint64_t>(a.seed);
  if (Status s = p.validate(); !s.ok()) return fail(2, s.message());

  EngineOptions options;
  options.model_dir = a.model_dir;
  options.backend = a.backend;
  options.load_format = a.load_format;
  options.async_scheduling = !a.sync_scheduling;
  options.speculative_method = a.speculative_method;
  options.num_speculative_tokens = a.num_speculative_tokens;
  options.speculative_acceptance = a.speculative_acceptance;
  a.parallel.apply(options);
  auto engine = Engine::create(options);
  if (!engine.ok()) return fail(1, engine.status().message());
  if (!prompts->empty() && !(*engine)->has_tokenizer()) {
    return fail(1, "text prompts need a tokenizer, and " + (*engine)->no_tokenizer_reason() +
                       " (use --prompt-ids)");
  }

  const bool stream = a.stream && !a.json_output && prompts->size() == 1 && a.prompt_ids.empty();
  Engine::StreamCallback on_delta;
  if (stream) {
    on_delta = [](const StreamDelta& d) {
      std::fwrite(d.text.data(), 1, d.text.size(), stdout);
      std::fflush(stdout);
    };
  }
  // --warmup: the same requests once, untimed and unprinted, so that the timed run finds the
  // backend warm (CUDA graphs captured, memory pools grown, the speculation controller past its
  // first probes) whatever the engine did at start-up; the figures are the timed run's alone.
  if (a.warmup) {
    for (const auto& prompt : *prompts) {
      if (auto h = (*engine)->submit_text(prompt, p, {}); !h.ok())
        return fail(2, h.status().message());
    }
    if (!a.prompt_ids.empty()) {
      const std::vector<int32_t> ids(a.prompt_ids.begin(), a.prompt_ids.end());
      if (auto h = (*engine)->submit(ids, p, {}); !h.ok()) return fail(2, h.status().message());
    }
    (*engine)->run_until_done();
  }
  const EngineStats before = (*engine)->stats();

  std::vector<RequestHandle> handles;
  for (const auto& prompt : *prompts) {
    auto h = (*engine)->submit_text(prompt, p, on_delta);
    if (!h.ok()) return fail(2, h.status().message());
    handles.push_back(*h);
  }
  if (!a.prompt_ids.empty()) {
    const std::vector<int32_t> ids(a.prompt_ids.begin(), a.prompt_ids.end());
    auto h = (*engine)->submit(ids, p, on_delta);
    if (!h.ok()) return fail(2, h.status().message());
    handles.push_back(*h);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestOutput> outputs = (*engine)->run_until_done();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Outputs arrive in the order requests ended; print them in the order they were given.
  int rc = 0;
  int64_t generated = 0;
  for (RequestHandle h : handles) {
    for (const RequestOutput& out : outputs) {
      if (out.id != h) continue;
      const CompletionOutput& c = out.outputs.at(0);
      generated += static_cast<int64_t>(c.token_ids.size());
      if (c.finish_reason == "error") {
        std::fprintf(stderr, "deepinfer generate: error in prompt %lld: %s\n",
                     static_cast<long long>(&h - handles.data()), c.error.c_str());
        rc = 1;
      }
      if (a.json_output) {
        nlohmann::json j = {{"prompt", out.prompt},
                            {"prompt_token_ids", out.prompt_token_ids},
                            {"text", c.text},
                            {"token_ids", c.token_ids},
                            {"finish_reason", c.finish_reason}};
        if (!c.error.empty()) j["error"] = c.error;
        std::printf("%s\n", j.dump().c_str());
      } else if (stream) {
        std::printf("\n");
      } else if (!(*engine)->has_tokenizer()) {  // token-id prompts: the ids, as the direct path
        for (size_t t = 0; t < c.token_ids.size(); ++t) {
          std::printf(t == 0 ? "%d" : " %d", static_cast<int>(c.token_ids[t]));
        }
        std::printf("\n");
      } else {
        std::printf("%s%s\n", out.prompt.c_str(), c.text.c_str());
        if (handles.size() > 1) std::printf("\n");
      }
    }
  }
  if (a.stats) {
    const EngineStats st = stats_since((*engine)->stats(), before);
    std::fprintf(stderr, "%s\n", (*engine)->describe().c_str());
    std::fprintf(stderr, "%zu prompt(s), %lld generated tokens in %.2f s: %.1f tokens/s\n",
                 handles.size(), static_cast<long long>(generated), seconds,
                 seconds > 0 ? static_cast<double>(generated) / seconds : 0.0);
    // The executor's time split, per step: forward and sampling run on it; the gap is its idle
    // time waiting for the engine thread (what asynchronous scheduling hides).
    const double n = static_cast<double>(std::max<int64_t>(1, st.steps));
    std::fprintf(stderr,
                 "%lld steps; per step: forward %.3f ms, sample %.3f ms, host %.3f ms, "
                 "gap %.3f ms (%.1f%% of the executor's time)\n",
                 static_cast<long long>(st.steps), 1e3 * st.forward_seconds / n,
                 1e3 * st.sample_seconds / n, 1e3 * st.host_seconds / n, 1e3 * st.gap_seconds / n,
                 100.0 * st.gap_seconds /
                     std::max(1e-12, st.forward_seconds + st.sample_seconds + st.gap_seconds));
    if (st.graph_captures + st.graph_replays > 0) {
      std::fprintf(stderr,
                   "CUDA graphs: %lld steps ran setups (%.1f ms), %lld captures, %lld replays, "
                   "%lld times all recordings dropped; %.2f s recording at start-up\n",
                   static_cast<long long>(st.graph_setup_steps), 1e3 * st.graph_setup_seconds,
                   static_cast<long long>(st.graph_captures),
                   static_cast<long long>(st.graph_replays), static_cast<long long>(st.graph_drops),
                   st.graph_startup_seconds);
    }
    if (st.spec_verify_steps > 0) {
      std::fprintf(stderr,
                   "speculative decoding: %lld verify steps, %lld draft tokens, %.1f%% accepted, "
                   "acceptance length %.2f tokens per verify step; drafting %.3f ms per step; "
                   "%lld drafter window restarts\n",
                   static_cast<long long>(st.spec_verify_steps),
                   static_cast<long long>(st.spec_draft_tokens),
                   100.0 * static_cast<double>(st.spec_accepted_tokens) /
                       static_cast<double>(std::max<int64_t>(1, st.spec_draft_tokens)),
                   1.0 + static_cast<double>(st.spec_accepted_tokens) /
                             static_cast<double>(st.spec_verify_steps),
                   1e3 * st.draft_seconds / n,
                   static_cast<long long>(st.spec_draft_window_restarts));
    }
    if ((*engine)->describe().find(" varlen") != std::string::npos) {
      // "tokens: value, .." of a (tokens, value) table, each value scaled and cut to `width`.
      auto by_tokens = [](const std::vector<std::pair<int64_t, double>>& table, double scale,
                          size_t width) {
        std::string out;
        for (const auto& [tokens, value] : table) {
          out += (out.empty() ? "" : ", ") + std::to_string(tokens) + ": " +
                 std::to_string(scale * value).substr(0, width);
        }
        return out;
      };
      std::fprintf(stderr,
                   "varlen: %lld probes passed, %lld failed; %lld plans paused; step cost ms by "
                   "tokens {%s}\n",
                   static_cast<long long>(st.spec_varlen_probes_passed),
                   static_cast<long long>(st.spec_varlen_probes_failed),
                   static_cast<long long>(st.spec_varlen_paused_plans),
                   by_tokens(st.spec_step_cost_seconds, 1e3, 5).c_str());
      if (!st.spec_draft_context_share.empty()) {
        std::fprintf(stderr,
                     "varlen: drafter context %% of a forward by tokens {%s} (taken off the "
                     "plain estimate)\n",
                     by_tokens(st.spec_draft_context_share, 100.0, 4).c_str());
      }
      // The latest decisions (a --warmup run's too): what a probe measured, or what the budget
      // predicted.
      // Data-parallel ranks decide each for its own batches: the rank is named past rank 0.
      for (const EngineStats::SpecProbe& probe : st.spec_varlen_recent_probes) {
        const std::string rank =
            probe.rank > 0 ? " (data-parallel rank " + std::to_string(probe.rank) + ")" : "";
        if (probe.steps > 0) {
          std::fprintf(stderr,
                       "  varlen probe at plan %lld%s, %.1f decodes/step: %.2fx over %d steps "
                       "(%.0f tokens in %.3f ms, %.3f of it drafting, against %.3f ms plain, "
                       "%.3f of it sampling; drafting cost estimate %.3f ms per step) -> %s\n",
                       static_cast<long long>(probe.plan_step), rank.c_str(), probe.decodes,
                       probe.ratio, probe.steps, probe.tokens, 1e3 * probe.spent_seconds,
                       1e3 * probe.draft_spent_seconds, 1e3 * probe.plain_seconds,
                       1e3 * probe.plain_sample_seconds, 1e3 * probe.draft_cost_seconds,
                       probe.passed ? "drafting" : "paused");
        } else {
          std::fprintf(stderr,
                       "  varlen at plan %lld%s, %.0f decodes: predicted %.2fx (drafting charged "
                       "%.3f ms per step) -> paused\n",
                       static_cast<long long>(probe.plan_step), rank.c_str(), probe.decodes,
                       probe.ratio, 1e3 * probe.draft_cost_seconds);
        }
      }
    }
    if (st.replay_skipped_rows > 0 || st.prefix_window_replays > 0 ||
        (*engine)->describe().find("bounded replay compact") != std::string::npos) {
      std::fprintf(stderr,
                   "bounded replay: %lld prompt rows skipped the upper layers; %lld prefix hits "
                   "replayed their last window (%lld tokens recomputed)\n",
                   static_cast<long long>(st.replay_skipped_rows),
                   static_cast<long long>(st.prefix_window_replays),
                   static_cast<long long>(st.prefix_window_replay_tokens));
    }
    std::fprintf(stderr, "KV pages: %.1f MiB reserved, %.1f MiB in use at the peak\n",
                 static_cast<double>(st.kv_bytes_reserved) / (1 << 20),
                 static_cast<double>(st.kv_bytes_in_use_peak) / (1 << 20));
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace deepinfer::cli
