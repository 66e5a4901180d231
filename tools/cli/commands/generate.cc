// `deepinfer generate`. Text prompts (--prompt, --prompts-file), sampling (a non-zero
// --temperature) or stop strings run through the engine (generate_engine.cc: batching,
// streaming, speculative decoding, on the backend --backend names). Greedy generation from
// token ids (`--prompt-ids 5,17,42 --temperature 0 [--ignore-eos] [--json] [--backend
// opt|ref|cuda]`) takes the direct path below: one sequence through a ModelSession
// (include/deepinfer/model_session.h: prefill, then one decode step per token), what the
// numerics tests and bench/model_cpu use.
// It prints the generated ids (and their text when the model directory has a tokenizer.json).
// `--stats` adds timings (load, prefill = the first extend over the whole prompt, decode =
// every later one-token step) and memory (peak RSS from getrusage, RSS right after load from
// /proc/self/statm).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "commands/generate_engine.h"
#include "deepinfer/model_session.h"
#include "deepinfer/options.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

struct GenerateArgs {
  GenerateEngineArgs engine;  // text prompts and sampling options (the engine path)
  std::string model_dir;
  std::string prompt_ids;
  bool prompt_ids_given = false;
  int max_tokens = 16;
  double temperature = 0.0;
  bool ignore_eos = false;
  bool json_output = false;
  bool stats = false;
  std::string backend;  // "" = DEEPINFER_ACCELERATOR (ModelSession::create)
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "deepinfer generate: error: %s\n", message.c_str());
  return code;
}

// "5, 17,42" -> ids; an error message names the bad item.
Expected<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(at, end - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      if (end == text.size() && ids.empty() && at == 0) break;  // wholly empty
      return invalid_argument("--prompt-ids: empty item at character " + std::to_string(at) +
                              " (expected comma-separated token ids, e.g. 5,17,42)");
    }
    errno = 0;
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (errno != 0 || stop == item.c_str() || *stop != '\0' || v < 0 || v > INT32_MAX) {
      return invalid_argument("--prompt-ids: '" + item +
                              "' is not a token id (a non-negative integer)");
    }
    ids.push_back(static_cast<int32_t>(v));
    at = end + 1;
  }
  return ids;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// getrusage reports ru_maxrss in KiB on Linux.
int64_t peak_rss_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// Resident set now (second field of /proc/self/statm, in pages); -1 where unavailable.
int64_t current_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(f >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Text prompts, sampling (temperature != 0) or stop strings go through the engine; greedy
// token-id prompts take the direct model path below, unless SWA bounded replay is on
// (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact) or rank options are given, which only the
// engine applies (and checks).
bool wants_engine(const GenerateArgs& args) {
  const auto& env = env_options();
  const bool replay = env.ok() && env->yoco_prefill_truncation_mode == "compact";
  return !args.engine.prompts.empty() || !args.engine.prompts_file.empty() ||
         args.temperature != 0.0 || !args.engine.stop.empty() || replay ||
         args.engine.parallel.any();
}

int run(GenerateArgs args) {
  if (args.max_tokens < 0) return fail(2, "--max-tokens must be >= 0");
  if (!args.prompt_ids_given && !wants_engine(args)) {
    return fail(2,
                "no prompt: give --prompt TEXT (or - for stdin), --prompts-file, or --prompt-ids");
  }
  auto ids = parse_ids(args.prompt_ids);
  if (!ids.ok()) return fail(2, ids.status().message());
  if (wants_engine(args)) {
    GenerateEngineArgs e = args.engine;
    e.model_dir = args.model_dir;
    e.max_tokens = args.max_tokens;
    e.temperature = args.temperature;
    e.ignore_eos = args.ignore_eos;
    e.json_output = args.json_output;
    e.stats = args.stats;
    e.backend = args.backend;
    e.prompt_ids.assign(ids->begin(), ids->end());
    return run_generate_with_engine(e);
  }
  if (ids->empty()) return fail(2, "--prompt-ids is empty: give at least one token id");

  const auto& env = env_options();
  // What make_opt_ops does with 0: one thread per hardware thread.
  int threads = env.ok() ? env->num_threads : 0;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto session = ModelSession::create(args.backend);
  if (!session.ok()) return fail(2, session.status().message());
  ModelSession& m = **session;
  if (m.backend_name() != "cpu-opt") threads = 1;

  const auto t_load = Clock::now();
  if (Status s = m.load(args.model_dir, args.engine.load_format); !s.ok()) {
    return fail(1, s.message());
  }
  const double load_s = seconds_since(t_load);
  const int64_t rss_after_load = current_rss_bytes();
  const int64_t peak_after_load = peak_rss_bytes();
  const int64_t V = m.vocab_size();
  for (size_t i = 0; i < ids->size(); ++i) {
    if ((*ids)[i] >= V) {
      return fail(2, "--prompt-ids: token id " + std::to_string((*ids)[i]) + " (item " +
                         std::to_string(i) + ") is outside the model's vocabulary [0, " +
                         std::to_string(V) + ")");
    }
  }
  auto generated = m.generate_greedy(*ids, args.max_tokens, args.ignore_eos);
  if (!generated.ok()) return fail(1, generated.status().message());
  const std::vector<int32_t>& out_ids = generated->token_ids;
  const std::string& finish = generated->finish_reason;
  const double prefill_s = generated->prefill_seconds;
  const double decode_s = generated->decode_seconds;

  std::string text;
  bool has_text = false;
  const std::filesystem::path tok_path = std::filesystem::path(args.model_dir) / "tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
    auto tok = Tokenizer::from_file(tok_path.string());
    if (tok.ok()) {
      text = tok->decode(out_ids);
      has_text = true;
    } else if (tok.status().code() == StatusCode::kUnimplemented) {
      // A tokenizer the text path cannot run (e.g. the WordLevel vocabulary of the tiny V4.1
      // checkpoints, which the model itself reads for its Engram map): ids only.
      std::fprintf(stderr, "note: no text output: %s\n", tok.status().message().c_str());
    } else {
      return fail(1, tok.status().message());
    }
  }

  if (args.json_output) {
    nlohmann::json j;
    j["token_ids"] = out_ids;
    j["finish_reason"] = finish;
    if (has_text) j["text"] = text;
    if (args.stats) {
      // The first generated token comes from the prefill; each later one from a decode step.
      const int64_t decode_steps = out_ids.empty() ? 0 : static_cast<int64_t>(out_ids.size()) - 1;
      const auto rate = [](double n, double s) { return s > 0.0 ? n / s : 0.0; };
      j["stats"] = {
          {"prompt_tokens", ids->size()},
          {"generated_tokens", out_ids.size()},
          {"decode_steps", decode_steps},
          {"threads", threads},
          {"load_s", load_s},
          {"prefill_s", prefill_s},
          {"decode_s", decode_s},
          {"prefill_tokens_per_s", rate(static_cast<double>(ids->size()), prefill_s)},
          {"decode_tokens_per_s", rate(static_cast<double>(decode_steps), decode_s)},
          {"rss_after_load_bytes", rss_after_load},
          {"peak_rss_after_load_bytes", peak_after_load},
          {"peak_rss_bytes", peak_rss_bytes()},
      };
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (size_t i = 0; i < out_ids.size(); ++i) std::printf(i ? " %d" : "%d", out_ids[i]);
    std::printf("\n");
    if (has_text) std::printf("%s\n", text.c_str());
    if (args.stats) {
      const int64_t n = static_cast<int64_t>(out_ids.size());
      std::printf(
          "prompt %zu tokens: prefill %.4f s (%.1f tok/s); decode %lld tokens %.4f s "
          "(%.1f tok/s); load %.3f s; peak RSS %.1f MiB\n",
          ids->size(), prefill_s,
          prefill_s > 0 ? static_cast<double>(ids->size()) / prefill_s : 0.0,
          static_cast<long long>(n > 0 ? n - 1 : 0), decode_s,
          decode_s > 0 ? static_cast<double>(n > 0 ? n - 1 : 0) / decode_s : 0.0, load_s,
          static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0));
    }
  }
  std::fflush(stdout);  // also when run inside the Python extension
  return 0;
}

}  // namespace

void register_generate_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text (or token ids) with a DeepSeek-V4 or V4.1 model");
  cmd->add_option("--model", args->model_dir, "model directory (config.json + safetensors)")
      ->required();
  CLI::Option* ids_option = cmd->add_option("--prompt-ids", args->prompt_ids,
                                            "comma-separated prompt token ids, e.g. 5,17,42");
  cmd->add_option("--prompt", args->engine.prompts,
                  "a text prompt (repeatable; - reads stdin); prompts run batched");
  cmd->add_option("--prompts-file", args->engine.prompts_file, "text prompts, one per line");
  cmd->add_option("--top-p", args->engine.top_p, "nucleus sampling mass (default 1)");
  cmd->add_option("--top-k", args->engine.top_k, "top-k sampling (0 or -1: off)");
  cmd->add_option("--min-p", args->engine.min_p, "min-p sampling (default 0)");
  cmd->add_option("--seed", args->engine.seed, "seq_seed: same seed, same tokens");
  cmd->add_option("--stop", args->engine.stop,
                  "stop string (repeatable), excluded from the output");
  cmd->add_flag(
      "--no-stream", [args](int64_t) { args->engine.stream = false; },
      "print a single prompt's text at the end instead of streaming it");
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate (default 16)");
  cmd->add_option("--temperature", args->temperature,
                  "0 = greedy (default); > 0 samples through the engine");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating after an end-of-sequence token");
  cmd->add_flag("--json", args->json_output,
                "print {\"token_ids\": [...], \"finish_reason\": ..., \"text\": ...}");
  cmd->add_flag("--sync-scheduling", args->engine.sync_scheduling,
                "engine path: run each step start to end on one thread (no asynchronous "
                "scheduling; for measuring the gap it hides)");
  cmd->add_flag("--warmup", args->engine.warmup,
                "engine path: run the same requests once, untimed and unprinted, before the timed "
                "run (CUDA graphs captured, pools grown), so that configurations compare warm");
  cmd->add_option("--speculative-method", args->engine.speculative_method,
                  "speculative decoding drafter: off (default), auto (the checkpoint's MTP or "
                  "DSpark block), mtp, dspark or ngram (prompt lookup); outputs are identical");
  cmd->add_option("--num-speculative-tokens", args->engine.num_speculative_tokens,
                  "draft tokens per step (default DEEPINFER_USE_NEXTN_DECODE, 5; 0 = off)");
  cmd->add_option("--speculative-acceptance", args->engine.speculative_acceptance,
                  "how drafts are judged: identical (default; outputs bitwise those without "
                  "speculation), residual (DSpark drafts sampled from the drafter and judged by "
                  "rejection sampling: same distribution, more accepted; unseeded requests) or "
                  "residual-always");
  cmd->add_flag("--stats", args->stats,
                "add timings (load/prefill/decode, tokens/s) and memory (peak RSS) to the output "
                "(JSON: a \"stats\" object)");
  cmd->add_option("--backend", args->backend,
                  "opt (threaded CPU), ref (the slow FP32 oracle, for debugging) or cuda (NVIDIA "
                  "GPU); default: DEEPINFER_ACCELERATOR (nvidia = cuda, else opt)");
  add_load_format_option(*cmd, args->engine.load_format);
  add_parallel_options(*cmd, args->engine.parallel);
  cmd->callback([args, ids_option, &action] {
    args->prompt_ids_given = ids_option->count() > 0;
    action = [args] { return run(*args); };
  });
}

}  // namespace deepinfer::cli
