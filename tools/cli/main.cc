// The native `deepinfer` binary (the Python package installs the same CLI as a console script).
#include <string>
#include <vector>

#include "cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return deepinfer::cli::cli_main(args);
}
