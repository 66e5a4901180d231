// deepinfer._core io functions: checkpoint inspection and config parsing, returned as JSON text
// (python/deepinfer/checkpoint.py turns it into dicts). Errors become Python exceptions carrying
// the message: FileNotFoundError for a missing file or directory, ValueError otherwise.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <string>
#include <utility>

#include "bindings.h"
#include "deepinfer/inspect.h"

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
          auto report = inspect_model_json(model_dir, config_only);
          if (report.ok())
            text = std::move(*report);
          else
            error = report.status();
        }
        if (!error.ok()) raise(error);
        return text;
      },
      nb::arg("model_dir"), nb::arg("config_only") = false,
      "Validate a model directory and describe it (the JSON of `deepinfer inspect --json`).");
  m.def(
      "load_config_json",
      [](const std::string& path) {
        auto config = model_config_json(path);
        if (!config.ok()) raise(config.status());
        return std::move(*config);
      },
      nb::arg("path"),
      "Parse config.json (a file or a model directory) into the typed ModelConfig, as JSON.");
}

}  // namespace deepinfer::python
