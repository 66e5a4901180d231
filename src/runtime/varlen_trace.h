// VarlenTrace: the CSV that confidence-scheduled verification appends a line to per engine step
// (DEEPINFER_VARLEN_TRACE / EngineOptions::speculative_trace), to see why the controller decided
// what it did: `--stats` keeps only its last eight decisions, and a pause that reaches from a
// warm-up run into the timed one (stop 40, H100: MTP at 64 requests) was decided by steps it
// does not show. Several engines (data-parallel ranks) may append to one file: each line is one
// write to a file opened for appending, and carries the engine's number (engines numbered in
// the order the process made them).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "base/status.h"

namespace deepinfer::runtime {

class VarlenTrace {
 public:
  // Opens `path` for appending; writes the header when the file is empty. A path that cannot be
  // opened is an error naming it.
  static Expected<std::unique_ptr<VarlenTrace>> open(const std::string& path, int engine);

  // One engine step as the controller saw it (times in seconds; curve_seconds: the plain
  // estimate for its decodes; decision_ratio < 0: no decision at this step).
  struct Step {
    int64_t plan_step = 0, decodes = 0, fed_tokens = 0, forwards = 0;
    double forward_seconds = 0, sample_seconds = 0, draft_seconds = 0, curve_seconds = 0;
    int64_t tokens = 0, drafts_verified = 0, drafts_proposed = 0;
    bool recording_setup = false, draft_context = false;
    int32_t draft_depth = 0;
    bool asleep = false;
    int64_t window_steps = 0;  // the bucket's probe window after this step
    double decision_ratio = -1;
    int64_t decision_steps = 0;
  };
  void step(const Step& s);
  // A loss the budget predicted at plan time (the batch pauses without a probe).
  void predicted(int64_t plan_step, int64_t decodes, double ratio, double draft_cost_seconds);

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  VarlenTrace(std::FILE* f, int engine) : file_(f), engine_(engine) {}
  void write(const std::string& line);
  std::unique_ptr<std::FILE, Close> file_;
  int engine_;
};

}  // namespace deepinfer::runtime
