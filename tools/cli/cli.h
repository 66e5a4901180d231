// The `deepinfer` command line: one entry point shared by the native binary and the Python
// console script (python/deepinfer/cli.py calls it through the extension module).
#pragma once

#include <string>
#include <vector>

namespace deepinfer::cli {

// args[0] is the program name. Returns the process exit code: 0 success, 1 a runtime error
// (bad file, bad checkpoint), 2 a usage error.
int cli_main(const std::vector<std::string>& args);

}  // namespace deepinfer::cli
