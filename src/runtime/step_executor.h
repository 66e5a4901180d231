// StepExecutor: where the engine's device work (model forward + sampling of one step) runs.
//
// Two forms behind one interface, so the engine loop has one code path:
//   * inline (synchronous scheduling): launch() runs the job on the calling thread;
//   * threaded (asynchronous scheduling): one dedicated worker thread runs the jobs, one at a
//     time, in launch order, while the engine thread plans the next step. A CUDA backend would
//     put a stream here instead; the contract is the same: jobs run in order, never two at once,
//     and wait() returns once the launched job is complete and its results are visible.
// At most one job is outstanding: launch() after launch() without wait() is a caller bug.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace deepinfer::runtime {

class StepExecutor {
 public:
  explicit StepExecutor(bool threaded);
  ~StepExecutor();  // waits for the outstanding job, then stops the worker
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  bool threaded() const { return worker_.joinable(); }
  void launch(std::function<void()> job);
  // Blocks until the launched job finished; returns at once when none is outstanding.
  void wait();
  bool busy() const;

 private:
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;  // a job was launched and has not finished
  bool stop_ = false;
  std::thread worker_;  // last: started after the state above exists
};

}  // namespace deepinfer::runtime
