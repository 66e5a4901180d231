// `deepinfer chat --model DIR [--thinking] [--system TEXT] [sampling options]`: an interactive
// conversation in the DeepSeek-V4 chat format. Each line read from stdin is a user turn; the
// conversation so far is rendered with the official rules (ChatConversation::render: earlier
// reasoning dropped, BOS, role tags), generated through the engine with the reply streamed as it
// becomes final, then parsed (reasoning vs content) and kept in the history. `/reset` clears the
// history, `/exit` (or end of input) quits. Works the same when stdin is a pipe (one turn per
// line), which is how the tests drive it.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "deepinfer/chat.h"
#include "deepinfer/engine.h"

namespace deepinfer::cli {
namespace {

struct ChatArgs {
  std::string model_dir;
  std::string system;
  bool thinking = false;
  int max_tokens = 256;
  double temperature = 0.7;
  double top_p = 0.95;
  long long seed = -1;
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "deepinfer chat: error: %s\n", message.c_str());
  return code;
}

int run_chat(const ChatArgs& a) {
  SamplingParams params;
  params.temperature = static_cast<float>(a.temperature);
  params.top_p = static_cast<float>(a.top_p);
  params.max_tokens = a.max_tokens;
  if (a.seed >= 0) params.seq_seed = static_cast<uint64_t>(a.seed);
  if (Status s = params.validate(); !s.ok()) return fail(2, s.message());

  EngineOptions options;
  options.model_dir = a.model_dir;
  auto engine = Engine::create(options);
  if (!engine.ok()) return fail(1, engine.status().message());
  if (!(*engine)->has_tokenizer()) return fail(1, a.model_dir + " has no tokenizer.json");

  const bool interactive = isatty(STDIN_FILENO) != 0;
  ChatConversation history;
  auto reset = [&] {
    history.clear();
    if (!a.system.empty()) (void)history.add_message("system", a.system);
  };
  reset();
  ChatRenderOptions render;
  render.thinking = a.thinking;
  if (interactive) std::fprintf(stderr, "deepinfer chat: /reset clears the history, /exit quits\n");

  std::string line;
  int64_t turn = 0;
  while (true) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit") break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line.empty()) continue;
    (void)history.add_message("user", line);
    auto prompt = history.render(render);
    if (!prompt.ok()) return fail(1, prompt.status().message());

    // Stream the reply; in thinking mode the reasoning is streamed too (it ends at </think>).
    SamplingParams p = params;
    if (p.seq_seed) p.seq_seed = *p.seq_seed + static_cast<uint64_t>(turn);
    auto handle = (*engine)->submit_text(*prompt, p, [](const StreamDelta& d) {
      std::fwrite(d.text.data(), 1, d.text.size(), stdout);
      std::fflush(stdout);
    });
    if (!handle.ok()) return fail(1, handle.status().message());
    std::vector<RequestOutput> outs = (*engine)->run_until_done();
    std::printf("\n");
    std::fflush(stdout);
    if (outs.empty() || outs[0].outputs.empty()) return fail(1, "the engine returned no output");
    const CompletionOutput& reply = outs[0].outputs[0];
    if (reply.finish_reason == "error") return fail(1, reply.error);

    auto parsed = parse_chat_output(reply.text, a.thinking);
    if (parsed.ok()) {
      (void)history.add_message("assistant", parsed->content, parsed->reasoning_content);
    } else {
      (void)history.add_message("assistant", reply.text);  // malformed tool-call markup: raw
    }
    ++turn;
  }
  return 0;
}

}  // namespace

void register_chat_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "Interactive chat in the DeepSeek-V4 chat format (one user turn per input line)");
  cmd->add_option("--model", args->model_dir, "model directory with tokenizer.json")->required();
  cmd->add_option("--system", args->system, "system prompt");
  cmd->add_flag("--thinking", args->thinking,
                "thinking mode (<think> ... </think> before answers)");
  cmd->add_option("--max-tokens", args->max_tokens, "tokens per reply (default 256)");
  cmd->add_option("--temperature", args->temperature,
                  "sampling temperature (default 0.7; 0 = greedy)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass (default 0.95)");
  cmd->add_option("--seed", args->seed, "seq_seed of the first reply (later replies: seed + turn)");
  cmd->callback([args, &action] { action = [args] { return run_chat(*args); }; });
}

}  // namespace deepinfer::cli
