// The threads that complete works: mark a work's future done (which runs its
// .then() callbacks) and wake its waiters.
//
// Completing on the worker thread would run user callbacks there. A callback
// that issues a collective and waits for it (PowerSGD's DDP comm hook does)
// would then wait for the worker it is blocking: a hang. So the worker hands
// each completion to this pool and goes on with the next operation.
//
// A callback may block for as long as it likes, even on the completion of a
// later work: when no thread of the pool is idle, submit() starts another.
// Completions are therefore not serialised; each work's own future and
// waiters still see one completion. The pool keeps the threads it started
// until stop(): as many as callbacks were ever blocked at once, plus one.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace coil_torch {

class CompletionPool {
 public:
  CompletionPool();
  /// As stop().
  ~CompletionPool();
  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;

  /// Runs `completion` on a pool thread, soon; never blocks on one. After
  /// stop() it runs on the calling thread.
  void submit(std::function<void()> completion);

  /// Runs what was submitted, then joins the threads (releasing the GIL
  /// while it waits). Called from a pool thread (a callback dropped the last
  /// reference to the backend), that thread is left to finish on its own.
  /// Idempotent.
  void stop();

 private:
  // Shared with the threads, so one that detaches itself never touches a
  // destroyed pool.
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    int idle = 0;  // threads waiting for a completion
    bool stopping = false;
  };
  static void loop(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::mutex threadsMutex_;
  std::vector<std::thread> threads_;
};

}  // namespace coil_torch
