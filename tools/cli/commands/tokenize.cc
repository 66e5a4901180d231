// Scaffold, replaced by the module's owner.
#include <CLI/CLI.hpp>
#include "commands.h"
namespace deepinfer::cli {
void register_tokenize_commands(CLI::App&, CommandAction&) {}
}  // namespace deepinfer::cli
