// `deepinfer serve [--model DIR] [--host 127.0.0.1] [--port 8000] [--backend cpu|opt|ref|cuda]
// [--api-key KEY] [--served-model-name N ...] [--max-num-seqs N] ...`: the OpenAI- and
// Anthropic-compatible HTTP server (tools/server, docs/server.md).
//
// The model, when --model is not given: DEEPINFER_HF_MODEL_DIR, else the embedded default model
// (models/default beside or above the executable; the Python console script passes the
// installed package's copy, or the Hugging Face cache's, as --model). The API key: --api-key,
// else DEEPINFER_API_KEY (read with the other knobs in src/base/options.cc).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "deepinfer/options.h"
#include "server.h"

namespace deepinfer::cli {
namespace {

std::string find_default_model() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (std::filesystem::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
    for (const char* rel : {"models/default", "deepinfer/models/default"}) {
      const auto cand = p / rel;
      if (std::filesystem::exists(cand / "config.json", ec)) return cand.string();
    }
    if (p == p.root_path()) break;
  }
  return {};
}

}  // namespace

void register_serve_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<server::ServeArgs>();
  auto backend = std::make_shared<std::string>();
  auto no_prefix = std::make_shared<bool>(false);
  auto sync = std::make_shared<bool>(false);
  auto parallel = std::make_shared<ParallelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "OpenAI- and Anthropic-compatible HTTP server (chat, completions, messages)");
  cmd->add_option("--model", args->engine.model_dir,
                  "model directory (default: DEEPINFER_HF_MODEL_DIR, else the embedded default "
                  "model)");
  cmd->add_option("--tokenizer", args->engine.tokenizer_path,
                  "tokenizer.json or its directory (default: the model's)");
  cmd->add_option("--host", args->server.host, "address to bind (default 127.0.0.1: local only)");
  cmd->add_option("--port", args->server.port, "port (default 8000; 0 = any free port)");
  cmd->add_option("--backend", *backend,
                  "cpu (= opt), opt, ref or cuda; default: DEEPINFER_ACCELERATOR");
  add_load_format_option(*cmd, args->engine.load_format);
  add_parallel_options(*cmd, *parallel);
  cmd->add_option("--api-key", args->server.api_key,
                  "require this key (Authorization: Bearer KEY, or x-api-key); default: "
                  "DEEPINFER_API_KEY");
  cmd->add_option("--served-model-name", args->server.served_model_names,
                  "model name(s) clients use (default: the model directory's name)");
  cmd->add_option("--max-num-seqs", args->engine.max_num_seqs,
                  "sequences running at once (default 64)");
  cmd->add_option("--max-num-batched-tokens", args->engine.max_num_batched_tokens,
                  "tokens per engine step (default 2048)");
  cmd->add_option("--max-model-len", args->engine.max_model_len,
                  "context length (default: the model's, at most 8192)");
  cmd->add_option("--num-kv-blocks", args->engine.num_kv_blocks,
                  "KV blocks (default: enough "
                  "for max-num-seqs sequences of max-model-len tokens)");
  cmd->add_option("--kv-block-size", args->engine.kv_block_size, "KV block size in tokens");
  cmd->add_flag("--no-enable-prefix-caching", *no_prefix, "turn prefix caching off");
  cmd->add_option("--prefix-cache-bytes", args->engine.prefix_cache_bytes,
                  "bytes of sequence-state snapshots kept for prefix hits (default 0 = 1 GiB)");
  cmd->add_flag("--sync-scheduling", *sync, "no asynchronous scheduling");
  cmd->add_option("--speculative-method", args->engine.speculative_method,
                  "speculative decoding drafter: off (default), auto (the checkpoint's MTP or "
                  "DSpark block), mtp, dspark or ngram; outputs are identical either way");
  cmd->add_option("--num-speculative-tokens", args->engine.num_speculative_tokens,
                  "draft tokens per step (default DEEPINFER_USE_NEXTN_DECODE, 5; 0 = off)");
  cmd->add_option("--speculative-acceptance", args->engine.speculative_acceptance,
                  "how drafts are judged: identical (default; outputs bitwise those without "
                  "speculation), residual (DSpark drafts sampled from the drafter and judged by "
                  "rejection sampling: same distribution, more accepted; unseeded requests) or "
                  "residual-always");
  cmd->add_option("--max-waiting", args->loop.max_waiting,
                  "requests waiting beyond which new ones get 503 + Retry-After (default 4 x "
                  "max-num-seqs, at least 64)");
  cmd->add_option("--io-threads", args->server.io_threads,
                  "HTTP I/O threads (default min(4, "
                  "cores))");
  cmd->add_option("--max-body-bytes", args->server.max_body_bytes,
                  "largest request body (default 32 MiB; larger: 413)");
  cmd->add_option("--keep-alive-timeout", args->server.keep_alive_seconds,
                  "seconds an idle connection stays open (default 600)");
  cmd->add_option("--effort-profile", args->server.effort_profile,
                  "reasoning-effort prompts of the checkpoint: preview (default) or 0731");
  cmd->add_option("--default-max-tokens", args->server.default_max_tokens,
                  "max_tokens when a request gives none (default: chat up to the context "
                  "limit, completions 16)");
  cmd->add_flag("--log-requests", args->server.log_requests, "log refused requests to stderr");
  cmd->callback([args, backend, no_prefix, sync, parallel, &action] {
    action = [args, backend, no_prefix, sync, parallel] {
      server::ServeArgs a = *args;
      a.engine.backend = *backend == "cpu" ? "opt" : *backend;
      parallel->apply(a.engine);
      a.engine.enable_prefix_caching = !*no_prefix;
      a.engine.async_scheduling = !*sync;
      const auto& env = env_options();
      if (a.server.api_key.empty() && env.ok() && env->api_key) a.server.api_key = *env->api_key;
      if (a.engine.model_dir.empty() && env.ok() && env->hf_model_dir) {
        a.engine.model_dir = *env->hf_model_dir;
      }
      if (a.engine.model_dir.empty()) {
        a.engine.model_dir = find_default_model();
        if (a.engine.model_dir.empty()) {
          std::fprintf(stderr,
                       "deepinfer serve: error: no model: give --model DIR or set "
                       "DEEPINFER_HF_MODEL_DIR\n");
          return 2;
        }
        std::fprintf(stderr,
                     "deepinfer serve: no model given; using the embedded default model "
                     "at %s\n",
                     a.engine.model_dir.c_str());
      }
      return server::run_serve(a);
    };
  });
}

}  // namespace deepinfer::cli
