// Scaffold, replaced by the module's owner.
#include "bindings.h"
namespace deepinfer::python {
void bind_chat(nanobind::module_&) {}
}  // namespace deepinfer::python
