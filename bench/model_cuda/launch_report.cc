#include "launch_report.h"

#include <cstdio>

#include "kernels/cuda/launch.h"

namespace deepinfer::bench {

std::vector<std::string> launches_by_kernel(const std::function<void()>& run, int steps, int top) {
  namespace kc = deepinfer::kernels::cuda;
  kc::reset_launch_histogram();
  kc::set_launch_histogram(true);
  run();
  kc::set_launch_histogram(false);
  const auto hist = kc::launch_histogram();
  std::vector<std::string> lines;
  double total = 0, rest = 0;
  int rest_kernels = 0;
  char buf[512];
  for (size_t i = 0; i < hist.size(); ++i) {
    const double per_run = static_cast<double>(hist[i].second) / steps;
    total += per_run;
    if (static_cast<int>(i) < top) {
      std::snprintf(buf, sizeof buf, "  %7.1f  %s", per_run, hist[i].first.c_str());
      lines.emplace_back(buf);
    } else {
      rest += per_run;
      ++rest_kernels;
    }
  }
  if (rest_kernels > 0) {
    std::snprintf(buf, sizeof buf, "  %7.1f  (%d other kernels)", rest, rest_kernels);
    lines.emplace_back(buf);
  }
  std::snprintf(buf, sizeof buf, "  %7.1f  total (%zu kernels)", total, hist.size());
  lines.emplace_back(buf);
  return lines;
}

}  // namespace deepinfer::bench
