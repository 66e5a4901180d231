// What a step launches, kernel by kernel: the lines decode_bench and draft_bench print under
// "launches per step by kernel" (issue 19's launch budget), from kernels::cuda's histogram.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::bench {

// Runs `run` once with the launch histogram on (eagerly: a graph's replay launches nothing
// countable) and returns "  <launches per step>  <kernel>" lines, `run` making `steps` steps:
// most launched first, the top `top` kernels, one line for the rest and the total.
std::vector<std::string> launches_by_kernel(const std::function<void()>& run, int steps, int top);

}  // namespace deepinfer::bench
