// Opening a CUDA library at run time (cuBLAS, cuBLASLt): a CPU-only user of a CUDA-enabled build
// never maps it, and a machine without it keeps the paths that do not need it.
#pragma once

#include <dlfcn.h>

#include <initializer_list>

namespace deepinfer::backend::cuda {

// The first of `names` that dlopen finds (symbols resolved now, kept local), or null.
inline void* open_first_library(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
  }
  return nullptr;
}

// f = `name` of `lib` (null when absent).
template <typename F>
void resolve_symbol(void* lib, const char* name, F*& f) {
  f = reinterpret_cast<F*>(dlsym(lib, name));
}

}  // namespace deepinfer::backend::cuda
