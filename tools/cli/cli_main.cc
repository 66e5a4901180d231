// Argument parsing and dispatch for `deepinfer`. Subcommands live in commands/*.cc.
#include "cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "deepinfer/options.h"

namespace deepinfer::cli {

int cli_main(const std::vector<std::string>& args) {
  CLI::App app{"DeepInfer: inference engine for the DeepSeek-V4 model family", "deepinfer"};
  app.require_subcommand(1);
  bool print_options = false;
  app.add_flag("--print-options", print_options,
               "print the effective DEEPINFER_* options (environment) to stderr");
  app.set_version_flag("--version", std::string("deepinfer 0.1.0"));

  CommandAction action;
  register_tokenize_commands(app, action);
  register_inspect_command(app, action);
  register_chat_template_command(app, action);
  register_generate_command(app, action);
  register_perplexity_command(app, action);
  register_chat_command(app, action);
  register_serve_command(app, action);

  std::vector<std::string> rest(args.size() > 1 ? args.begin() + 1 : args.end(), args.end());
  std::reverse(rest.begin(), rest.end());  // CLI11 parses a reversed vector
  try {
    app.parse(rest);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, std::cout, std::cerr) == 0 ? 0 : 2;
  }

  const auto& env = env_options();
  if (!env.ok()) {
    std::fprintf(stderr, "deepinfer: error: %s\n", env.status().message().c_str());
    return 2;
  }
  if (print_options) {
    for (const auto& line : describe_env_options(*env)) std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (!action) {
    std::fprintf(stderr, "deepinfer: error: no command given (try --help)\n");
    return 2;
  }
  return action();
}

}  // namespace deepinfer::cli
