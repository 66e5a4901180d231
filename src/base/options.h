// The typed DEEPINFER_* options are public (include/deepinfer/options.h: the front ends print and
// use them); base/options.cc reads them. This header keeps the modules' include.
#pragma once

#include "deepinfer/options.h"  // IWYU pragma: export
