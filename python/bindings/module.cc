// deepinfer._core: the native half of the Python package.
#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "DeepInfer native core";
  deepinfer::python::bind_cli(m);
  deepinfer::python::bind_tokenizer(m);
  deepinfer::python::bind_chat(m);
  deepinfer::python::bind_io(m);
  deepinfer::python::bind_engine(m);
}
