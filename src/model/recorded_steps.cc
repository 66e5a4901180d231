// RecordedSteps (see recorded_steps.h).
#include "model/recorded_steps.h"

#include <algorithm>
#include <atomic>

namespace deepinfer::model {

namespace {
uint64_t next_model_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

RecordedSteps::RecordedSteps(backend::Ops& ops) : ops_(&ops), id_(next_model_id()) {}

RecordedSteps::~RecordedSteps() {
  if (!print_.empty()) ops_->drop_recordings();
}

int64_t RecordedSteps::bucket(int64_t M, int64_t max_rows) {
  if (M <= 0 || M > max_rows) return 0;
  int64_t b = 1;
  while (b < M && b < 8) b *= 2;
  if (b < M) b = (M + 7) / 8 * 8;       // 8-row steps up to 64
  if (b > 64) b = (M + 31) / 32 * 32;   // then 32
  if (b > 512) b = (M + 63) / 64 * 64;  // then 64
  return std::min(b, max_rows);
}

std::vector<int64_t> RecordedSteps::buckets(int64_t rows, int64_t max_rows) {
  std::vector<int64_t> out;
  for (int64_t M = 1; M <= std::min(rows, max_rows); ++M) {
    const int64_t b = bucket(M, max_rows);
    if (out.empty() || out.back() != b) out.push_back(b);
  }
  return out;
}

std::span<const int32_t> RecordedSteps::padded(std::span<const int32_t> rows, int64_t to,
                                               std::vector<int32_t>& buf) {
  if (static_cast<int64_t>(rows.size()) >= to || rows.empty()) return rows;
  buf.assign(rows.begin(), rows.end());
  buf.resize(static_cast<size_t>(to), rows.back());
  return buf;
}

void RecordedSteps::run(size_t unit, int64_t Mb, const std::function<void()>& body) {
  uint64_t key = id_ * 0x9E3779B97F4A7C15ull;
  key ^= (static_cast<uint64_t>(unit) << 32) ^ static_cast<uint64_t>(Mb) ^
         (static_cast<uint64_t>(variant_) << 24);
  ops_->run_recorded(key, body);
}

void RecordedSteps::buffers_after_step(Fingerprint print) {
  if (print == print_) return;
  if (!print_.empty()) ops_->drop_recordings();
  print_ = std::move(print);
}

}  // namespace deepinfer::model
