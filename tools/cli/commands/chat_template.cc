// `deepinfer chat-template`: renders an OpenAI-style messages array (file or stdin) into the exact
// DeepSeek-V4 prompt text, the way the engine will tokenize it. Useful to inspect what the model
// sees and to diff against the official encoding_dsv4.py.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "commands.h"
#include "deepinfer/chat.h"

namespace deepinfer::cli {
namespace {

struct ChatTemplateArgs {
  std::string messages_path = "-";
  std::string tools_path;
  bool thinking = false;
  std::string reasoning_effort;
  std::string effort_profile = "preview";
  bool no_generation_prompt = false;
  bool no_bos = false;
  bool keep_reasoning = false;
  bool continue_final_message = false;
};

Expected<std::string> read_input(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '" + path + "'");
  ss << in.rdbuf();
  return ss.str();
}

Expected<std::string> render(const ChatTemplateArgs& a) {
  DI_ASSIGN_OR_RETURN(std::string text, read_input(a.messages_path));
  auto conversation = ChatConversation::from_json(text);
  if (!conversation.ok())
    return conversation.status().with_context(a.messages_path == "-" ? "stdin" : a.messages_path);
  if (!a.tools_path.empty()) {
    DI_ASSIGN_OR_RETURN(std::string tools_text, read_input(a.tools_path));
    if (Status s = conversation->set_tools_json(tools_text); !s.ok())
      return s.with_context(a.tools_path);
  }
  ChatRenderOptions opt;
  opt.thinking = a.thinking;
  opt.reasoning_effort = a.reasoning_effort;
  opt.effort_profile = a.effort_profile;
  opt.add_generation_prompt = !a.no_generation_prompt;
  opt.add_bos = !a.no_bos;
  opt.drop_thinking = !a.keep_reasoning;
  opt.continue_final_message = a.continue_final_message;
  return conversation->render(opt);
}

}  // namespace

void register_chat_template_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<ChatTemplateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat-template", "Render chat messages (OpenAI JSON) into the DeepSeek-V4 prompt text");
  cmd->add_option("--messages", args->messages_path,
                  "JSON file with a messages array, or an object with \"messages\" (and "
                  "\"tools\"); - for stdin")
      ->capture_default_str();
  cmd->add_option("--tools", args->tools_path, "JSON file with an array of OpenAI function tools");
  cmd->add_flag("--thinking", args->thinking, "thinking mode: the prompt ends with <think>");
  cmd->add_option("--reasoning-effort", args->reasoning_effort,
                  "high or max (low too with --effort-profile 0731); thinking mode only")
      ->check(CLI::IsMember({"", "none", "low", "high", "max"}));
  cmd->add_option("--effort-profile", args->effort_profile,
                  "the checkpoint's reasoning-effort prompts: preview (V4-Flash/Pro first release) "
                  "or 0731 (V4-Flash-0731)")
      ->check(CLI::IsMember({"preview", "0731"}))
      ->capture_default_str();
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt,
                "do not append <｜Assistant｜> and the think token after a final user message");
  cmd->add_flag("--no-bos", args->no_bos, "do not start with <｜begin▁of▁sentence｜>");
  cmd->add_flag("--keep-reasoning", args->keep_reasoning,
                "keep earlier turns' reasoning in thinking mode (official drop_thinking=False)");
  cmd->add_flag("--continue-final-message", args->continue_final_message,
                "leave a final assistant message open (no EOS) for continuation");
  cmd->callback([args, &action] {
    action = [args] {
      auto prompt = render(*args);
      if (!prompt.ok()) {
        std::fprintf(stderr, "deepinfer chat-template: error: %s\n",
                     prompt.status().message().c_str());
        return 1;
      }
      std::fwrite(prompt->data(), 1, prompt->size(), stdout);
      std::fflush(stdout);
      return 0;
    };
  });
}

}  // namespace deepinfer::cli
