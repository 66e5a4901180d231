// Prometheus metrics of the server (GET /metrics, text exposition format 0.0.4), named after
// vLLM's under the `deepinfer:` prefix. No C++ Prometheus client is packaged in Debian, and the
// format is small: counters, gauges and fixed-bucket histograms written here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/engine_loop.h"

namespace deepinfer::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // "NAME_bucket{...,le=...} n" lines, then _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);
  Histogram ttft, itl, e2e, prepare_time;
  void request_finished(const std::string& finish_reason);  // stop, length, abort, error
  void http_response(int status);
  void parse_failure();  // model output the chat parser refused (malformed DSML)
  std::string render(const EngineStats& stats, const EngineLoopCounters& counters,
                     int64_t open_connections, bool draining) const;

 private:
  std::string labels_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;
  std::map<int, uint64_t> http_;
  uint64_t parse_failures_ = 0;
};

}  // namespace deepinfer::server
