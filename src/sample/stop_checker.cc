// StopChecker (rules and streaming contract in stop_checker.h).
//
// Every append() searches held_ + delta. held_ never contains a whole stop string (it is only
// a proper prefix of one), so any match ends inside the new delta; the buffer searched is
// therefore at most (longest stop string - 1) + delta bytes.
#include "sample/stop_checker.h"

#include <algorithm>

namespace deepinfer::sample {


StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids)
    : stops_(params.stop),
      stop_ids_(params.stop_token_ids),
      max_tokens_(params.max_tokens),
      min_tokens_(params.min_tokens),
      include_stop_(params.include_stop_str_in_output) {
  if (!params.ignore_eos)
    stop_ids_.insert(stop_ids_.end(), eos_token_ids.begin(), eos_token_ids.end());
}

bool StopChecker::is_stop_token(int32_t token) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
}

size_t StopChecker::hold_length(std::string_view text) const {
  size_t best = 0;
  for (const std::string& s : stops_) {
    const size_t longest = std::min(s.size() - 1, text.size());
    for (size_t k = longest; k > best; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

StopUpdate StopChecker::append(int32_t token, std::string_view delta) {
  StopUpdate up;
  if (finished_) return up;
  ++num_tokens_;
  const bool stops_allowed = num_tokens_ > min_tokens_;  // output position >= min_tokens

  if (stops_allowed && is_stop_token(token)) {
    up.finish = FinishReason::kStop;
    up.stop_token = token;
    up.text = std::move(held_);
    if (include_stop_) up.text.append(delta);
    held_.clear();
    finished_ = true;
    return up;
  }

  std::string buf = std::move(held_);
  held_.clear();
  buf.append(delta);

  if (stops_allowed) {
    size_t best_pos = std::string::npos;
    for (size_t i = 0; i < stops_.size(); ++i) {
      const size_t pos = buf.find(stops_[i]);
      if (pos < best_pos) {  // strict: an equal start keeps the earlier list entry
        best_pos = pos;
        up.stop_string = i;
      }
    }
    if (best_pos != std::string::npos) {
      const size_t end = include_stop_ ? best_pos + stops_[*up.stop_string].size() : best_pos;
      buf.resize(end);
      up.text = std::move(buf);
      up.finish = FinishReason::kStop;
      finished_ = true;
      return up;
    }
  }

  if (max_tokens_ && num_tokens_ >= *max_tokens_) {
    up.text = std::move(buf);
    up.finish = FinishReason::kLength;
    finished_ = true;
    return up;
  }

  const size_t hold = hold_length(buf);
  held_.assign(buf, buf.size() - hold, hold);
  buf.resize(buf.size() - hold);
  up.text = std::move(buf);
  return up;
}

std::string StopChecker::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace deepinfer::sample
