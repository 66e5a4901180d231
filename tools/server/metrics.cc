// Prometheus text format for the server's metrics (metrics.h).
#include "metrics.h"

#include <cstdio>

namespace deepinfer::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void metric(std::string& out, const char* type, const std::string& name, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) +
           "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum{" + labels + "} " + num(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

// vLLM's buckets (vllm/v1/metrics/loggers.py).
Metrics::Metrics(std::string model_name)
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
           0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0}),
      e2e({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
           30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      prepare_time({0.001, 0.01, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 60.0}),
      labels_("model_name=\"" + model_name + "\"") {}

void Metrics::request_finished(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[reason.empty() ? "unknown" : reason];
}

void Metrics::http_response(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[status];
}

void Metrics::parse_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  ++parse_failures_;
}

std::string Metrics::render(const EngineStats& s, const EngineLoopCounters& c,
                            int64_t open_connections, bool draining) const {
  std::string out;
  const std::string& l = labels_;
  auto gauge = [&](const char* name, const char* help, double v) {
    metric(out, "gauge", name, help);
    sample(out, name, l, v);
  };
  auto counter = [&](const char* name, const char* help, double v) {
    metric(out, "counter", name, help);
    sample(out, name, l, v);
  };
  gauge("deepinfer:num_requests_running", "Sequences in the engine's running batch.",
        static_cast<double>(s.num_running));
  gauge("deepinfer:num_requests_waiting",
        "Requests accepted and not yet running (server queue and scheduler queue).",
        static_cast<double>(std::max<int64_t>(c.pending - s.num_running, 0)));
  gauge("deepinfer:kv_cache_usage_perc", "Fraction of the KV block pool held by live sequences.",
        s.kv_blocks_total > 0
            ? static_cast<double>(s.kv_blocks_in_use) / static_cast<double>(s.kv_blocks_total)
            : 0.0);
  gauge("deepinfer:kv_cache_blocks_in_use", "KV blocks held by live sequences.",
        static_cast<double>(s.kv_blocks_in_use));
  gauge("deepinfer:kv_cache_blocks_total", "KV blocks in the pool.",
        static_cast<double>(s.kv_blocks_total));
  gauge("deepinfer:kv_cache_bytes_in_use", "Bytes of KV pages held by sequences and snapshots.",
        static_cast<double>(s.kv_bytes_in_use));
  gauge("deepinfer:kv_cache_bytes_reserved", "Bytes of KV pages reserved from the backend.",
        static_cast<double>(s.kv_bytes_reserved));
  gauge("deepinfer:kv_cache_blocks_cached", "KV blocks published in the prefix cache.",
        static_cast<double>(s.kv_blocks_cached));
  gauge("deepinfer:prefix_cache_snapshots", "Sequence-state snapshots kept for prefix hits.",
        static_cast<double>(s.prefix_snapshots));
  gauge("deepinfer:prefix_cache_snapshot_bytes",
        "Bytes the prefix snapshots may pin (footprint, shared rows counted).",
        static_cast<double>(s.prefix_snapshot_bytes));
  gauge("deepinfer:http_open_connections", "Open client connections.",
        static_cast<double>(open_connections));
  gauge("deepinfer:server_draining", "1 while the server drains before exiting.",
        draining ? 1.0 : 0.0);
  counter("deepinfer:prompt_tokens_total", "Prefill tokens computed (recomputation included).",
          static_cast<double>(s.prompt_tokens));
  counter("deepinfer:generation_tokens_total", "Tokens generated.",
          static_cast<double>(s.generated_tokens));
  counter("deepinfer:prefix_cache_queries_total",
          "Prompt tokens looked up in the prefix cache (sequences started).",
          static_cast<double>(s.prefix_query_tokens));
  counter("deepinfer:prefix_cache_hits_total", "Prompt tokens taken from the prefix cache.",
          static_cast<double>(s.prefix_cache_hit_tokens));
  counter("deepinfer:num_preemptions_total", "Preemptions (KV freed, recomputed later).",
          static_cast<double>(s.preemptions));
  counter("deepinfer:num_requests_aborted_total",
          "Requests aborted (client disconnects, shutdown).", static_cast<double>(c.aborted));
  counter("deepinfer:num_requests_rejected_total",
          "Requests refused by the engine after parsing (e.g. a schema that does not compile).",
          static_cast<double>(c.rejected));
  counter("deepinfer:num_requests_overloaded_total",
          "Requests refused because the waiting queue was full (HTTP 503).",
          static_cast<double>(c.refused_overload));
  counter("deepinfer:engine_steps_total", "Engine steps.", static_cast<double>(s.steps));
  {
    std::lock_guard<std::mutex> lock(mu_);
    metric(out, "counter", "deepinfer:request_success_total",
           "Finished requests by finish reason.");
    for (const auto& [reason, n] : finished_) {
      sample(out, "deepinfer:request_success_total", l + ",finished_reason=\"" + reason + "\"",
             static_cast<double>(n));
    }
    metric(out, "counter", "deepinfer:http_responses_total", "HTTP responses by status code.");
    for (const auto& [status, n] : http_) {
      sample(out, "deepinfer:http_responses_total",
             l + ",status=\"" + std::to_string(status) + "\"", static_cast<double>(n));
    }
    metric(out, "counter", "deepinfer:output_parse_failures_total",
           "Samples whose tool-call markup the chat parser refused (not shown to clients).");
    sample(out, "deepinfer:output_parse_failures_total", l, static_cast<double>(parse_failures_));
  }
  metric(out, "histogram", "deepinfer:time_to_first_token_seconds",
         "Time from the HTTP request to its first generated token.");
  ttft.render(out, "deepinfer:time_to_first_token_seconds", l);
  metric(out, "histogram", "deepinfer:inter_token_latency_seconds",
         "Time between two tokens of one sample.");
  itl.render(out, "deepinfer:inter_token_latency_seconds", l);
  metric(out, "histogram", "deepinfer:e2e_request_latency_seconds",
         "Time from the HTTP request to its last event.");
  e2e.render(out, "deepinfer:e2e_request_latency_seconds", l);
  metric(out, "histogram", "deepinfer:request_prepare_time_seconds",
         "Time from the HTTP request to its submission to the engine (parsing, tokenizing).");
  prepare_time.render(out, "deepinfer:request_prepare_time_seconds", l);
  return out;
}

}  // namespace deepinfer::server
