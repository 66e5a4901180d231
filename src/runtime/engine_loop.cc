// EngineLoop (include/deepinfer/engine_loop.h): one thread owns the Engine; other threads talk
// to it through an inbox (submissions, aborts) under one mutex.
//
// Why this shape: Engine is single-threaded by design (the scheduler, the model and the
// detokenizers have one owner), so the loop serialises every touch of it and front ends never
// lock anything of the engine's. The loop holds the mutex only to swap the inbox out and to
// publish stats, never across a step, so submit() and abort() return in microseconds however
// long a step takes. Synchronous checks (sampling values, prompt length and ids, overload) run
// on the caller's thread against immutable facts of the engine (vocabulary, max_model_len), so
// a bad request is refused before it is queued.
#include "deepinfer/engine_loop.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace deepinfer {
namespace runtime {

class EngineLoopImpl {
 public:
  EngineLoopImpl(std::unique_ptr<Engine> engine, const EngineOptions& options,
                 const EngineLoopOptions& loop_options)
      : engine_(std::move(engine)) {
    // Data-parallel ranks each run max_num_seqs sequences: the engine's capacity is their sum.
    max_num_seqs_ = options.max_num_seqs * std::max(1, options.data_parallel_size);
    max_waiting_ = loop_options.max_waiting > 0
                       ? loop_options.max_waiting
                       : std::max<int64_t>(64, 4 * static_cast<int64_t>(max_num_seqs_));
    vocab_ = engine_->vocab_size();
    max_model_len_ = engine_->max_model_len();
    stats_ = engine_->stats();
    describe_ = engine_->describe();
    thread_ = std::thread([this] { run(); });
  }

  ~EngineLoopImpl() {
    shutdown(/*drain=*/false);
    if (thread_.joinable()) thread_.join();
  }

  Expected<RequestHandle> submit(std::vector<int32_t> ids, const SamplingParams& params,
                                 EngineLoop::EventCallback cb, std::string text) {
    DI_TRY(params.validate(vocab_));
    if (params.truncate_prompt_tokens &&
        ids.size() > static_cast<size_t>(*params.truncate_prompt_tokens)) {
      ids.erase(ids.begin(),
                ids.end() - static_cast<std::ptrdiff_t>(*params.truncate_prompt_tokens));
    }
    if (ids.empty()) return invalid_argument("the prompt is empty: give at least one token");
    if (static_cast<int64_t>(ids.size()) >= max_model_len_) {
      return invalid_argument("the prompt has " + std::to_string(ids.size()) +
                              " tokens; this model's maximum context length is " +
                              std::to_string(max_model_len_) +
                              " tokens, which must also leave room for at least one generated "
                              "token. Shorten the prompt");
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab_) {
        return invalid_argument("prompt token " + std::to_string(i) + " is id " +
                                std::to_string(ids[i]) + ", outside the model's vocabulary [0, " +
                                std::to_string(vocab_) + ")");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return failed_precondition("the engine is shutting down: no new requests");
    if (pending_ - running_ >= max_waiting_) {
      ++counters_.refused_overload;
      return resource_exhausted("the server is overloaded: " + std::to_string(pending_ - running_) +
                                " requests are waiting; retry later");
    }
    const RequestHandle h = next_handle_++;
    inbox_.push_back(Submission{h, std::move(ids), params, std::move(cb), std::move(text)});
    ++pending_;
    ++counters_.submitted;
    live_.emplace(h, 0);
    cv_.notify_all();
    return h;
  }

  Status abort(RequestHandle h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.find(h) == live_.end()) {
      return not_found("abort: request " + std::to_string(h) + " is unknown or has already ended");
    }
    aborts_.push_back(h);
    cv_.notify_all();
    return Status::ok_status();
  }

  // Engine::rebalance_experts on the loop's thread, between two of its steps; waits for it.
  Status rebalance_experts() {
    std::future<Status> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return failed_precondition("rebalance_experts: the engine is shutting down");
      rebalances_.emplace_back();
      done = rebalances_.back().get_future();
      cv_.notify_all();
    }
    return done.get();
  }

  void shutdown(bool drain) {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    if (!drain) {
      for (const auto& [h, unused] : live_) aborts_.push_back(h);
    }
    exit_when_idle_ = true;
    cv_.notify_all();
    idle_cv_.wait(lock, [&] { return pending_ == 0; });
  }

  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_cv_.wait_for(lock, timeout, [&] { return pending_ == 0; });
  }

  EngineStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  EngineLoopCounters counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    EngineLoopCounters c = counters_;
    c.pending = pending_;
    return c;
  }

  const Engine& engine() const { return *engine_; }
  int64_t vocab() const { return vocab_; }
  int64_t max_model_len() const { return max_model_len_; }
  int32_t max_num_seqs() const { return max_num_seqs_; }
  const std::string& describe() const { return describe_; }

 private:
  struct Submission {
    RequestHandle handle;
    std::vector<int32_t> ids;
    SamplingParams params;
    EngineLoop::EventCallback cb;
    std::string text;
  };
  struct Live {
    EngineLoop::EventCallback cb;
    RequestHandle loop_handle = 0;
  };

  void finish(RequestHandle h, RequestEvent&& ev, const EngineLoop::EventCallback& cb) {
    ev.id = h;
    ev.done = true;
    if (cb) cb(std::move(ev));
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(h);
    --pending_;
    ++counters_.finished;
    if (pending_ == 0) idle_cv_.notify_all();
  }

  void run() {
    std::unordered_map<RequestHandle, Live> by_engine;           // engine handle -> request
    std::unordered_map<RequestHandle, RequestHandle> to_engine;  // loop handle -> engine handle
    for (;;) {
      std::deque<Submission> inbox;
      std::vector<RequestHandle> aborts;
      std::vector<std::promise<Status>> rebalances;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
          return !inbox_.empty() || !aborts_.empty() || !rebalances_.empty() ||
                 engine_->has_unfinished() || (exit_when_idle_ && pending_ == 0);
        });
        if (exit_when_idle_ && pending_ == 0 && inbox_.empty() && rebalances_.empty() &&
            !engine_->has_unfinished()) {
          return;
        }
        inbox.swap(inbox_);
        aborts.swap(aborts_);
        rebalances.swap(rebalances_);
      }
      if (!rebalances.empty()) {  // a step boundary: the engine's last step() has returned
        const Status st = engine_->rebalance_experts();
        {
          std::lock_guard<std::mutex> lock(mu_);
          stats_ = engine_->stats();
        }
        for (std::promise<Status>& p : rebalances) p.set_value(st);
      }
      for (Submission& s : inbox) {
        const bool aborted_early =
            std::find(aborts.begin(), aborts.end(), s.handle) != aborts.end();
        if (aborted_early) {
          RequestEvent ev;
          ev.output.id = s.handle;
          ev.output.finished = true;
          ev.output.prompt_token_ids = s.ids;
          ev.output.outputs.resize(static_cast<size_t>(s.params.n));
          for (size_t i = 0; i < ev.output.outputs.size(); ++i) {
            ev.output.outputs[i].index = static_cast<int32_t>(i);
            ev.output.outputs[i].finish_reason = "abort";
          }
          ev.usage.prompt_tokens = static_cast<int64_t>(s.ids.size());
          {
            std::lock_guard<std::mutex> lock(mu_);
            ++counters_.aborted;
          }
          finish(s.handle, std::move(ev), s.cb);
          continue;
        }
        const RequestHandle loop_h = s.handle;
        EngineLoop::EventCallback cb = s.cb;
        Engine::StreamCallback on_delta;
        if (cb) {
          on_delta = [cb, loop_h](const StreamDelta& d) {
            RequestEvent ev;
            ev.id = loop_h;
            ev.delta = d;
            ev.delta.id = loop_h;
            cb(std::move(ev));
          };
        }
        auto eh = engine_->submit(s.ids, s.params, std::move(on_delta));
        if (!eh.ok()) {
          RequestEvent ev;
          ev.rejected = true;
          ev.output.id = loop_h;
          ev.output.finished = true;
          ev.output.error = eh.status().message();
          ev.output.prompt_token_ids = std::move(s.ids);
          {
            std::lock_guard<std::mutex> lock(mu_);
            ++counters_.rejected;
          }
          finish(loop_h, std::move(ev), cb);
          continue;
        }
        by_engine.emplace(*eh, Live{std::move(cb), loop_h});
        to_engine.emplace(loop_h, *eh);
        if (!s.text.empty()) prompt_text_.emplace(*eh, std::move(s.text));
      }
      for (RequestHandle h : aborts) {
        const auto it = to_engine.find(h);
        if (it != to_engine.end()) (void)engine_->abort(it->second);
      }
      if (!engine_->has_unfinished()) continue;
      std::vector<RequestOutput> done = engine_->step();
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_ = engine_->stats();
        running_ = stats_.num_running;
      }
      for (RequestOutput& o : done) {
        const auto it = by_engine.find(o.id);
        if (it == by_engine.end()) continue;
        Live live = std::move(it->second);
        by_engine.erase(it);
        to_engine.erase(live.loop_handle);
        RequestEvent ev;
        ev.usage.prompt_tokens = static_cast<int64_t>(o.prompt_token_ids.size());
        ev.usage.cached_tokens = o.num_cached_tokens;
        bool aborted = false;
        for (const CompletionOutput& c : o.outputs) {
          ev.usage.completion_tokens += static_cast<int64_t>(c.token_ids.size());
          aborted = aborted || c.finish_reason == "abort";
        }
        if (const auto pt = prompt_text_.find(o.id); pt != prompt_text_.end()) {
          o.prompt = std::move(pt->second);
          prompt_text_.erase(pt);
        }
        o.id = live.loop_handle;
        ev.output = std::move(o);
        if (aborted) {
          std::lock_guard<std::mutex> lock(mu_);
          ++counters_.aborted;
        }
        finish(live.loop_handle, std::move(ev), live.cb);
      }
    }
  }

  std::unique_ptr<Engine> engine_;
  int64_t vocab_ = 0, max_model_len_ = 0, max_waiting_ = 0;
  int32_t max_num_seqs_ = 0;
  std::string describe_;

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Submission> inbox_;
  std::vector<RequestHandle> aborts_;
  std::vector<std::promise<Status>> rebalances_;  // rebalance_experts() callers waiting
  std::unordered_map<RequestHandle, int> live_;  // accepted, final event not yet sent
  RequestHandle next_handle_ = 1;
  int64_t pending_ = 0, running_ = 0;
  bool stopping_ = false, exit_when_idle_ = false;
  EngineStats stats_;
  EngineLoopCounters counters_;
  std::unordered_map<RequestHandle, std::string> prompt_text_;  // loop thread only

  std::thread thread_;  // last: started once everything above exists
};

namespace {

// RequestStream over a mutex-protected queue filled by the loop's callback.
class QueueStream final : public RequestStream {
 public:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<RequestEvent> events;
    bool final_queued = false;
  };
  QueueStream(RequestHandle id, std::shared_ptr<State> st) : id_(id), st_(std::move(st)) {}

  RequestHandle id() const override { return id_; }

  std::optional<RequestEvent> next(std::optional<std::chrono::milliseconds> timeout) override {
    std::unique_lock<std::mutex> lock(st_->mu);
    if (returned_final_) return std::nullopt;
    const auto ready = [&] { return !st_->events.empty(); };
    if (timeout) {
      if (!st_->cv.wait_for(lock, *timeout, ready)) return std::nullopt;
    } else {
      st_->cv.wait(lock, ready);
    }
    RequestEvent ev = std::move(st_->events.front());
    st_->events.pop_front();
    if (ev.done) returned_final_ = true;
    return ev;
  }

  std::vector<RequestEvent> poll() override {
    std::lock_guard<std::mutex> lock(st_->mu);
    std::vector<RequestEvent> out;
    while (!st_->events.empty() && !returned_final_) {
      out.push_back(std::move(st_->events.front()));
      st_->events.pop_front();
      if (out.back().done) returned_final_ = true;
    }
    return out;
  }

  bool done() const override {
    std::lock_guard<std::mutex> lock(st_->mu);
    return returned_final_;
  }

 private:
  RequestHandle id_;
  std::shared_ptr<State> st_;
  bool returned_final_ = false;
};

}  // namespace
}  // namespace runtime

Expected<std::unique_ptr<EngineLoop>> EngineLoop::create(const EngineOptions& options,
                                                         const EngineLoopOptions& loop_options) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(options));
  return std::unique_ptr<EngineLoop>(new EngineLoop(
      std::make_unique<runtime::EngineLoopImpl>(std::move(engine), options, loop_options)));
}

EngineLoop::EngineLoop(std::unique_ptr<runtime::EngineLoopImpl> impl) : impl_(std::move(impl)) {}
EngineLoop::~EngineLoop() = default;

Expected<RequestHandle> EngineLoop::submit(std::vector<int32_t> prompt_ids,
                                           const SamplingParams& params, EventCallback on_event,
                                           std::string prompt_text) {
  return impl_->submit(std::move(prompt_ids), params, std::move(on_event), std::move(prompt_text));
}

Expected<std::unique_ptr<RequestStream>> EngineLoop::submit_stream(std::vector<int32_t> prompt_ids,
                                                                   const SamplingParams& params,
                                                                   std::string prompt_text) {
  auto st = std::make_shared<runtime::QueueStream::State>();
  auto cb = [st](RequestEvent&& ev) {
    std::lock_guard<std::mutex> lock(st->mu);
    st->events.push_back(std::move(ev));
    st->cv.notify_all();
  };
  DI_ASSIGN_OR_RETURN(RequestHandle h, impl_->submit(std::move(prompt_ids), params, std::move(cb),
                                                     std::move(prompt_text)));
  return std::unique_ptr<RequestStream>(new runtime::QueueStream(h, std::move(st)));
}

Status EngineLoop::abort(RequestHandle id) { return impl_->abort(id); }
Status EngineLoop::rebalance_experts() { return impl_->rebalance_experts(); }
void EngineLoop::shutdown(bool drain) { impl_->shutdown(drain); }
bool EngineLoop::wait_idle(std::chrono::milliseconds timeout) { return impl_->wait_idle(timeout); }
EngineStats EngineLoop::stats() const { return impl_->stats(); }
EngineLoopCounters EngineLoop::counters() const { return impl_->counters(); }
int64_t EngineLoop::vocab_size() const { return impl_->vocab(); }
int64_t EngineLoop::max_model_len() const { return impl_->max_model_len(); }
int32_t EngineLoop::max_num_seqs() const { return impl_->max_num_seqs(); }
bool EngineLoop::has_tokenizer() const { return impl_->engine().has_tokenizer(); }
std::string EngineLoop::no_tokenizer_reason() const {
  return impl_->engine().no_tokenizer_reason();
}
std::vector<int32_t> EngineLoop::encode(std::string_view text) const {
  return impl_->engine().encode(text);
}
std::string EngineLoop::decode(std::span<const int32_t> ids) const {
  return impl_->engine().decode(ids);
}
std::string EngineLoop::token_text(int32_t id) const {
  const int32_t one[1] = {id};
  return impl_->engine().decode(std::span<const int32_t>(one, 1), /*skip_special=*/false);
}
std::string EngineLoop::token_bytes(int32_t id) const { return impl_->engine().token_bytes(id); }
std::string EngineLoop::describe() const { return impl_->describe(); }

}  // namespace deepinfer
