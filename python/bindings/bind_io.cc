// deepinfer._core io functions: checkpoint inspection and config parsing, returned as JSON text
// (python/deepinfer/checkpoint.py turns it into dicts). Errors become Python exceptions carrying
// the message: FileNotFoundError for a missing file or directory, ValueError otherwise.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"
#include "io/checkpoint.h"
#include "io/inspect_report.h"

namespace nb = nanobind;

namespace deepinfer::python {
namespace {

[[noreturn]] void raise(const Status& status) {
  PyObject* type =
      status.code() == StatusCode::kNotFound ? PyExc_FileNotFoundError : PyExc_ValueError;
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

}  // namespace

void bind_io(nb::module_& m) {
  m.def(
      "inspect_model_json",
      [](const std::string& model_dir, bool config_only) {
        std::string text;
        Status error;
        {
          nb::gil_scoped_release release;
          if (config_only) {
            auto config = io::load_model_config(model_dir);
            if (config.ok())
              text = io::inspect_config(*config).dump();
            else
              error = config.status();
          } else {
            auto ck = io::Checkpoint::open(model_dir);
            if (ck.ok())
              text = io::inspect_checkpoint(*ck).dump();
            else
              error = ck.status();
          }
        }
        if (!error.ok()) raise(error);
        return text;
      },
      nb::arg("model_dir"), nb::arg("config_only") = false,
      "Validate a model directory and describe it (the JSON of `deepinfer inspect --json`).");
  m.def(
      "load_config_json",
      [](const std::string& path) {
        auto config = io::load_model_config(path);
        if (!config.ok()) raise(config.status());
        return io::model_config_to_json(*config).dump();
      },
      nb::arg("path"),
      "Parse config.json (a file or a model directory) into the typed ModelConfig, as JSON.");
}

}  // namespace deepinfer::python
