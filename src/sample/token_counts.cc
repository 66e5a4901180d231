// TokenCounts: a flat vector of entries plus an id -> slot map (see token_counts.h).
#include "sample/token_counts.h"

namespace deepinfer::sample {

TokenCounts::Entry& TokenCounts::entry(int32_t id) {
  auto [it, inserted] = index_.try_emplace(id, static_cast<uint32_t>(entries_.size()));
  if (inserted) entries_.push_back(Entry{id, false, 0});
  return entries_[it->second];
}

void TokenCounts::add_prompt(std::span<const int32_t> ids) {
  for (int32_t id : ids) entry(id).in_prompt = true;
}

void TokenCounts::add_output(int32_t id) {
  ++entry(id).output_count;
  ++num_output_;
}

bool TokenCounts::remove_output(int32_t id) {
  auto it = index_.find(id);
  if (it == index_.end() || entries_[it->second].output_count == 0) return false;
  --entries_[it->second].output_count;
  --num_output_;
  return true;
}

}  // namespace deepinfer::sample
