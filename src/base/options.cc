// Reading and validating the DEEPINFER_* environment variables (see options.h).
#include "base/options.h"

#include <cstdlib>
#include <charconv>

namespace deepinfer {
namespace {

std::optional<std::string> process_env(const char* name, void*) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Expected<bool> parse_bool(const char* name, const std::string& v) {
  if (v == "1" || v == "true" || v == "TRUE" || v == "True" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "FALSE" || v == "False" || v == "off" || v == "no" || v.empty()) return false;
  return invalid_argument(std::string(name) + "='" + v + "' is not a boolean: use 1 or 0");
}

Expected<int> parse_int(const char* name, const std::string& v, int lo, int hi) {
  int out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || out < lo || out > hi) {
    return invalid_argument(std::string(name) + "='" + v + "' is not an integer in [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return out;
}

}  // namespace

const char* accelerator_name(Accelerator a) {
  switch (a) {
    case Accelerator::kAuto: return "auto";
    case Accelerator::kCpu: return "cpu";
    case Accelerator::kNvidia: return "nvidia";
    case Accelerator::kAscend: return "ascend";
  }
  return "?";
}

Expected<EnvOptions> parse_env_options(EnvLookup lookup, void* ctx) {
  EnvOptions o;
  if (auto v = lookup("DEEPINFER_ACCELERATOR", ctx); v && !v->empty()) {
    if (*v == "cpu") o.accelerator = Accelerator::kCpu;
    else if (*v == "nvidia") o.accelerator = Accelerator::kNvidia;
    else if (*v == "ascend") o.accelerator = Accelerator::kAscend;
    else return invalid_argument("DEEPINFER_ACCELERATOR='" + *v + "' is unknown: use cpu, nvidia or ascend");
  }
  if (auto v = lookup("DEEPINFER_HF_MODEL_DIR", ctx); v && !v->empty()) o.hf_model_dir = *v;
  if (auto v = lookup("DEEPINFER_BATCH_INVARIANT", ctx)) {
    DI_ASSIGN_OR_RETURN(o.batch_invariant, parse_bool("DEEPINFER_BATCH_INVARIANT", *v));
  }
  if (auto v = lookup("DEEPINFER_ENABLE_MTP_VARLEN", ctx)) {
    DI_ASSIGN_OR_RETURN(o.enable_mtp_varlen, parse_bool("DEEPINFER_ENABLE_MTP_VARLEN", *v));
  }
  if (auto v = lookup("DEEPINFER_USE_NEXTN_DECODE", ctx); v && !v->empty()) {
    DI_ASSIGN_OR_RETURN(o.use_nextn_decode, parse_int("DEEPINFER_USE_NEXTN_DECODE", *v, 0, 16));
  }
  if (auto v = lookup("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", ctx); v && !v->empty()) {
    if (*v != "compact" && *v != "none") {
      return invalid_argument("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE='" + *v +
                              "' is unknown: use compact, or leave it unset");
    }
    o.yoco_prefill_truncation_mode = *v == "none" ? "" : *v;
  }
  if (auto v = lookup("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", ctx); v && !v->empty()) {
    DI_ASSIGN_OR_RETURN(o.yoco_prefill_keep_tokens,
                        parse_int("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", *v, 1, 1 << 20));
  }
  if (auto v = lookup("DEEPINFER_NUM_THREADS", ctx); v && !v->empty()) {
    DI_ASSIGN_OR_RETURN(o.num_threads, parse_int("DEEPINFER_NUM_THREADS", *v, 0, 4096));
  }
  if (auto v = lookup("DEEPINFER_CUDA_GRAPH_MAX_ROWS", ctx); v && !v->empty()) {
    DI_ASSIGN_OR_RETURN(o.cuda_graph_max_rows,
                        parse_int("DEEPINFER_CUDA_GRAPH_MAX_ROWS", *v, 0, 8192));
  }
  if (auto v = lookup("DEEPINFER_CUDA_PDL", ctx); v && !v->empty()) {
    DI_ASSIGN_OR_RETURN(o.cuda_pdl, parse_bool("DEEPINFER_CUDA_PDL", *v));
  }
  if (auto v = lookup("DEEPINFER_API_KEY", ctx); v && !v->empty()) o.api_key = *v;
  if (auto v = lookup("DEEPINFER_VARLEN_TRACE", ctx); v && !v->empty()) o.varlen_trace = *v;
  return o;
}

const Expected<EnvOptions>& env_options() {
  static const Expected<EnvOptions> kOptions = parse_env_options(&process_env, nullptr);
  return kOptions;
}

std::vector<std::string> describe_env_options(const EnvOptions& o) {
  const EnvOptions d;
  auto mark = [](bool is_default) { return is_default ? " (default)" : " (set)"; };
  std::vector<std::string> lines;
  lines.push_back(std::string("DEEPINFER_ACCELERATOR=") + accelerator_name(o.accelerator) +
                  mark(o.accelerator == d.accelerator));
  lines.push_back("DEEPINFER_HF_MODEL_DIR=" + o.hf_model_dir.value_or("") + mark(!o.hf_model_dir));
  lines.push_back(std::string("DEEPINFER_BATCH_INVARIANT=") + (o.batch_invariant ? "1" : "0") +
                  mark(o.batch_invariant == d.batch_invariant));
  lines.push_back(std::string("DEEPINFER_ENABLE_MTP_VARLEN=") + (o.enable_mtp_varlen ? "1" : "0") +
                  mark(o.enable_mtp_varlen == d.enable_mtp_varlen));
  lines.push_back("DEEPINFER_USE_NEXTN_DECODE=" + std::to_string(o.use_nextn_decode) +
                  mark(o.use_nextn_decode == d.use_nextn_decode));
  lines.push_back("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=" + o.yoco_prefill_truncation_mode +
                  mark(o.yoco_prefill_truncation_mode == d.yoco_prefill_truncation_mode));
  lines.push_back("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS=" + std::to_string(o.yoco_prefill_keep_tokens) +
                  mark(o.yoco_prefill_keep_tokens == d.yoco_prefill_keep_tokens));
  lines.push_back("DEEPINFER_NUM_THREADS=" + std::to_string(o.num_threads) +
                  mark(o.num_threads == d.num_threads));
  lines.push_back("DEEPINFER_CUDA_GRAPH_MAX_ROWS=" + std::to_string(o.cuda_graph_max_rows) +
                  mark(o.cuda_graph_max_rows == d.cuda_graph_max_rows));
  lines.push_back(std::string("DEEPINFER_CUDA_PDL=") + (o.cuda_pdl ? "1" : "0") +
                  mark(o.cuda_pdl == d.cuda_pdl));
  lines.push_back(std::string("DEEPINFER_API_KEY=") + (o.api_key ? "(set, hidden)" : "") +
                  mark(!o.api_key));
  lines.push_back("DEEPINFER_VARLEN_TRACE=" + o.varlen_trace.value_or("") + mark(!o.varlen_trace));
  return lines;
}

}  // namespace deepinfer
