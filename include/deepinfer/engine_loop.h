// deepinfer::EngineLoop: the engine on its own thread behind a thread-safe API, for front ends
// that serve many callers at once (the HTTP server, Python's streaming generator, benchmarks).
//
//   DI_ASSIGN_OR_RETURN(auto loop, EngineLoop::create({.model_dir = "/models/v4"}));
//   auto stream = loop->submit_stream(loop->encode("Hello"), params);   // any thread
//   while (auto ev = stream->next()) { ... ev->delta.text ... if (ev->done) break; }
//
// Any thread submits, aborts and reads. One thread (the loop's) owns the Engine: it takes the
// submissions and aborts queued since its last step, runs one Engine::step(), hands each
// request's deltas to that request's callback, and sleeps when nothing is left to do.
//
// Every accepted request gets exactly one final event (`done`), after all its deltas, with
// its whole RequestOutput and its usage; a request the engine refuses after acceptance (a bad
// structured-output schema) gets only that final event, with `rejected` set. Callbacks run on
// the loop thread: they must be quick and must not call back into the loop synchronously
// (post the event elsewhere; abort() from a callback is allowed, it only queues).
//
// What submit() refuses at once (nothing reaches the engine): invalid sampling values, an
// empty prompt, a prompt with max_model_len tokens or more, a token id outside the vocabulary
// (InvalidArgument); a full waiting queue (ResourceExhausted: overload, retry later); a loop
// that is shutting down (FailedPrecondition).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/engine.h"
#include "deepinfer/params.h"
#include "deepinfer/status.h"

namespace deepinfer {

namespace runtime {
class EngineLoopImpl;
}

struct EngineLoopOptions {
  // Requests accepted but not yet running (queued here or waiting in the scheduler) beyond
  // which submit() answers ResourceExhausted; 0: 4 x max_num_seqs (x data_parallel_size), at
  // least 64.
  int64_t max_waiting = 0;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // every sample's generated tokens
  int64_t cached_tokens = 0;      // prompt tokens taken from the prefix cache
};

struct RequestEvent {
  RequestHandle id = 0;
  // Not done: one sample's delta (text, token ids, logprobs; finished and finish_reason when
  // that sample ended). Done: empty.
  StreamDelta delta;
  bool done = false;
  bool rejected = false;  // done before running: `output.error` says why
  RequestOutput output;   // done: the whole result
  Usage usage;            // done
};

// The events of one request, for a thread that pulls them (Python, simple callers).
class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual RequestHandle id() const = 0;
  // The next event, waiting for it; nullopt after the final event was returned, or on timeout.
  virtual std::optional<RequestEvent> next(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt) = 0;
  // Every event available now, without waiting (possibly none).
  virtual std::vector<RequestEvent> poll() = 0;
  virtual bool done() const = 0;
};

struct EngineLoopCounters {
  int64_t submitted = 0;         // accepted by submit()
  int64_t finished = 0;          // final events sent (aborted and rejected included)
  int64_t aborted = 0;           // ended with finish_reason "abort"
  int64_t rejected = 0;          // refused by the engine after acceptance
  int64_t refused_overload = 0;  // submit() answered ResourceExhausted
  int64_t pending = 0;           // accepted and not finished
};

class EngineLoop {
 public:
  using EventCallback = std::function<void(RequestEvent&& event)>;

  static Expected<std::unique_ptr<EngineLoop>> create(const EngineOptions& options,
                                                      const EngineLoopOptions& loop_options = {});
  // Stops the thread; requests still live end as aborted first (their callbacks still run).
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  Expected<RequestHandle> submit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                 EventCallback on_event, std::string prompt_text = {});
  Expected<std::unique_ptr<RequestStream>> submit_stream(std::vector<int32_t> prompt_ids,
                                                         const SamplingParams& params,
                                                         std::string prompt_text = {});
  // Ends a live request (queued here, waiting or running); its final event follows with
  // finish_reason "abort". NotFound for unknown or finished handles.
  Status abort(RequestHandle id);
  // Engine::rebalance_experts (EPLB), run by the loop's thread between two steps; returns its
  // result once done. Requests go on meanwhile, their outputs unchanged.
  Status rebalance_experts();

  // No new requests from now on (submit answers FailedPrecondition); with `drain`, waits until
  // every accepted request has ended, else aborts them. The thread stops afterwards.
  void shutdown(bool drain);
  // Waits until no request is pending (or the timeout passes); true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);

  // Thread-safe reads.
  EngineStats stats() const;  // as of the end of the loop's last step
  EngineLoopCounters counters() const;
  int64_t vocab_size() const;
  int64_t max_model_len() const;
  int32_t max_num_seqs() const;
  bool has_tokenizer() const;
  std::string no_tokenizer_reason() const;  // Engine::no_tokenizer_reason
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const;
  // The text of one token id as the detokenizer writes it (special tokens kept).
  std::string token_text(int32_t id) const;
  std::string token_bytes(int32_t id) const;  // the raw bytes of one token id
  std::string describe() const;

 private:
  explicit EngineLoop(std::unique_ptr<runtime::EngineLoopImpl> impl);
  std::unique_ptr<runtime::EngineLoopImpl> impl_;
};

}  // namespace deepinfer
