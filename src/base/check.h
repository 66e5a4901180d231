// DI_CHECK: invariants of our own code. A failed check is a bug in DeepInfer, never a user
// mistake (those return Status), so it prints where and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define DI_CHECK(cond)                                                                  \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "deepinfer: check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                              \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
