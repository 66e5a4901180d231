// One bind_* function per front end, each in its own file; module.cc calls them all.
#pragma once

#include <nanobind/nanobind.h>

namespace deepinfer::python {

void bind_cli(nanobind::module_& m);
void bind_tokenizer(nanobind::module_& m);
void bind_chat(nanobind::module_& m);
void bind_io(nanobind::module_& m);
void bind_engine(nanobind::module_& m);

}  // namespace deepinfer::python
