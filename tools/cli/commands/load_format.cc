// --load-format (EngineOptions::load_format), the one spelling `generate` and `serve` share.
#include <CLI/CLI.hpp>
#include <string>

#include "commands.h"

namespace deepinfer::cli {

void add_load_format_option(CLI::App& cmd, std::string& load_format) {
  cmd.add_option("--load-format", load_format,
                 "where the weights come from: auto (default: the model directory's "
                 "safetensors) or dummy (random weights generated on the backend from "
                 "config.json alone, vLLM's name: a full-size layer stack to time without a "
                 "checkpoint; text prompts still need a tokenizer.json, else use --prompt-ids)")
      ->check(CLI::IsMember({"auto", "dummy"}));
}

}  // namespace deepinfer::cli
