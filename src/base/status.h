// Status and Expected<T> are the public API's error types (include/deepinfer/status.h): one type
// for the engine's errors and what the front ends see. This header keeps the modules' include.
#pragma once

#include "deepinfer/status.h"  // IWYU pragma: export
