// StepExecutor: the inline and the one-worker-thread executor (see step_executor.h).
#include "runtime/step_executor.h"

#include <utility>

#include "base/check.h"

namespace deepinfer::runtime {

StepExecutor::StepExecutor(bool threaded) {
  if (threaded) worker_ = std::thread([this] { loop(); });
}

StepExecutor::~StepExecutor() {
  if (!worker_.joinable()) return;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !pending_; });
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void StepExecutor::launch(std::function<void()> job) {
  if (!worker_.joinable()) {
    job();
    return;
  }
  {
    std::lock_guard lock(mu_);
    DI_CHECK(!pending_);  // one job at a time: wait() before launching the next
    job_ = std::move(job);
    pending_ = true;
  }
  cv_.notify_all();
}

void StepExecutor::wait() {
  if (!worker_.joinable()) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !pending_; });
}

bool StepExecutor::busy() const {
  std::lock_guard lock(mu_);
  return pending_;
}

void StepExecutor::loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (pending_ && job_); });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    job();  // the mutex's release/acquire publishes the job's writes to wait()'s caller
    job = nullptr;
    lock.lock();
    pending_ = false;
    cv_.notify_all();
  }
}

}  // namespace deepinfer::runtime
