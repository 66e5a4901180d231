// The monotonic clock the engine times itself with, and the one helper every timer needs.
#pragma once

#include <chrono>

namespace deepinfer {

using SteadyClock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace deepinfer
