// One registration function per subcommand, each in its own file under commands/.
//
// A command stores its action in `action`; cli_main runs the action of the subcommand that was
// parsed. Actions return the exit code and print user errors as "deepinfer <cmd>: error: ...".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/params.h"

namespace CLI {
class App;
}

namespace deepinfer::cli {

using CommandAction = std::function<int()>;

void register_tokenize_commands(CLI::App& app, CommandAction& action);      // tokenize, detokenize
void register_inspect_command(CLI::App& app, CommandAction& action);        // inspect MODEL_DIR
void register_chat_template_command(CLI::App& app, CommandAction& action);  // render a chat prompt
void register_generate_command(CLI::App& app, CommandAction& action);    // greedy generation (CPU)
void register_chat_command(CLI::App& app, CommandAction& action);        // interactive chat
void register_perplexity_command(CLI::App& app, CommandAction& action);  // validation perplexity
void register_serve_command(CLI::App& app, CommandAction& action);       // the HTTP server

// --load-format auto|dummy into `load_format` (EngineOptions::load_format): generate, serve.
void add_load_format_option(CLI::App& cmd, std::string& load_format);

// Ranks (EngineOptions::data_parallel_size, enable_expert_parallel, tensor_parallel_size).
struct ParallelArgs {
  int data_parallel_size = 1;
  bool enable_expert_parallel = false;
  int tensor_parallel_size = 1;
  int context_parallel_size = 1;
  // EPLB (EngineOptions::enable_eplb and the three after it; defaults as there).
  bool enable_eplb = false;
  int num_redundant_experts = 0;
  int eplb_step_interval = 3000;
  int eplb_window_size = 1000;
  std::vector<int32_t> cuda_devices;  // EngineOptions::cuda_devices (--cuda-devices 0,1)
  bool any() const {
    return data_parallel_size != 1 || enable_expert_parallel || tensor_parallel_size != 1 ||
           context_parallel_size != 1 || enable_eplb || num_redundant_experts != 0 ||
           !cuda_devices.empty();
  }
  // Copies every rank and EPLB option into `o`.
  void apply(EngineOptions& o) const;
};
// --data-parallel-size, --enable-expert-parallel, --tensor-parallel-size and the EPLB flags
// (--enable-eplb, --num-redundant-experts, --eplb-step-interval, --eplb-window-size): generate,
// serve.
void add_parallel_options(CLI::App& cmd, ParallelArgs& args);

}  // namespace deepinfer::cli
