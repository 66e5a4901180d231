// Scaffold, replaced by the module's owner.
#include <CLI/CLI.hpp>
#include "commands.h"
namespace deepinfer::cli {
void register_inspect_command(CLI::App&, CommandAction&) {}
}  // namespace deepinfer::cli
