// The shared limit helpers are public (include/deepinfer/input_limits.h: the server words its
// limit errors with them); base/input_limits.cc implements them. This header keeps the modules'
// include.
#pragma once

#include "deepinfer/input_limits.h"  // IWYU pragma: export
