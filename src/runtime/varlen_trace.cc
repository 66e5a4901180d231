// VarlenTrace (varlen_trace.h).
#include "runtime/varlen_trace.h"

#include <cerrno>
#include <cstring>

namespace deepinfer::runtime {

namespace {
constexpr const char* kHeader =
    "engine,kind,plan_step,decodes,fed_tokens,forwards,forward_ms,sample_ms,draft_ms,curve_ms,"
    "tokens,drafts_verified,drafts_proposed,recording_setup,draft_context,draft_depth,asleep,"
    "window_steps,decision_ratio,decision_steps\n";
}  // namespace

Expected<std::unique_ptr<VarlenTrace>> VarlenTrace::open(const std::string& path, int engine) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return invalid_argument("the varlen trace '" + path + "' (DEEPINFER_VARLEN_TRACE or " +
                            "speculative_trace) cannot be opened for appending: " +
                            std::strerror(errno) + "; give a writable path, or unset it");
  }
  std::unique_ptr<VarlenTrace> t(new VarlenTrace(f, engine));
  if (std::ftell(f) == 0) t->write(kHeader);
  return t;
}

void VarlenTrace::write(const std::string& line) {
  // One fputs of a whole line, flushed: lines of engines appending at once stay whole.
  std::fputs(line.c_str(), file_.get());
  std::fflush(file_.get());
}

void VarlenTrace::step(const Step& s) {
  char buf[512];
  char decision[64] = "";
  if (s.decision_ratio >= 0) {
    std::snprintf(decision, sizeof decision, "%.4f,%lld", s.decision_ratio,
                  static_cast<long long>(s.decision_steps));
  } else {
    std::snprintf(decision, sizeof decision, ",");
  }
  std::snprintf(
      buf, sizeof buf,
      "%d,step,%lld,%lld,%lld,%lld,%.4f,%.4f,%.4f,%.4f,%lld,%lld,%lld,%d,%d,%d,%d,%lld,%s\n",
      engine_, static_cast<long long>(s.plan_step), static_cast<long long>(s.decodes),
      static_cast<long long>(s.fed_tokens), static_cast<long long>(s.forwards),
      1e3 * s.forward_seconds, 1e3 * s.sample_seconds, 1e3 * s.draft_seconds, 1e3 * s.curve_seconds,
      static_cast<long long>(s.tokens), static_cast<long long>(s.drafts_verified),
      static_cast<long long>(s.drafts_proposed), s.recording_setup ? 1 : 0, s.draft_context ? 1 : 0,
      s.draft_depth, s.asleep ? 1 : 0, static_cast<long long>(s.window_steps), decision);
  write(buf);
}

void VarlenTrace::predicted(int64_t plan_step, int64_t decodes, double ratio,
                            double draft_cost_seconds) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d,predicted,%lld,%lld,,,,,%.4f,,,,,,,,,,%.4f,0\n", engine_,
                static_cast<long long>(plan_step), static_cast<long long>(decodes),
                1e3 * draft_cost_seconds, ratio);
  write(buf);
}

}  // namespace deepinfer::runtime
