// FinishReason names: see finish_reason.h.
#include "base/finish_reason.h"

namespace deepinfer {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kModelLength:
      return "model_length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "none";
}

std::string_view api_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
    case FinishReason::kModelLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    default:
      return "error";
  }
}

}  // namespace deepinfer
