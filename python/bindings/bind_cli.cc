// cli_main(argv) for the `deepinfer` console script.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <iostream>

#include "bindings.h"
#include "cli.h"

namespace nb = nanobind;

namespace deepinfer::python {

void bind_cli(nb::module_& m) {
  m.def(
      "cli_main",
      [](const std::vector<std::string>& argv) {
        int rc;
        {
          // The CLI may run for a long time (generation); let other Python threads run.
          nb::gil_scoped_release release;
          rc = cli::cli_main(argv);
          std::cout.flush();
          std::fflush(stdout);
          std::fflush(stderr);
        }
        return rc;
      },
      nb::arg("argv"), "Run the deepinfer command line with argv (argv[0] = program name).");
}

}  // namespace deepinfer::python
