// Work objects and the one worker thread that runs them in order.
//
// Every rank queues its operations in program order and one thread per
// backend drains the queue, so every rank issues coil calls in the same
// order (coil matches collectives by order, like NCCL). The caller gets a
// CoilWork at once; wait() blocks until the worker has run it.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace coil_torch {

/// One queued operation. Completion behaves like gloo's work: wait() rethrows
/// the error, isCompleted() polls, and getFuture() completes with the output
/// tensors (a list) or with the error.
class CoilWork : public c10d::Work {
 public:
  /// What the worker runs; throws on failure. May be empty for a work that is
  /// completed by someone else (a member of a coalesced batch).
  using Body = std::function<void()>;

  CoilWork(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
           Body body);

  /// Runs the body on the calling (worker) thread, then completes the work:
  /// success with the outputs, or the body's exception. Never throws.
  void run() noexcept;

  /// Completes the work without running the body; `error` null means success.
  void complete(std::exception_ptr error) noexcept;

  /// Makes this a posted work (a send or receive): the worker runs
  /// `post(this)`, which hands the work to whoever completes it later, and
  /// does not complete it. `demand` is called when someone waits on the work
  /// or looks at it (wait, isCompleted, getFuture) before it is complete.
  using Post = std::function<void(const c10::intrusive_ptr<CoilWork>&)>;
  void setPosted(Post post, std::function<void()> demand);
  bool isPosted() const { return static_cast<bool>(post_); }
  /// Runs the post function (worker thread); a throw completes the work with it.
  void runPost(const c10::intrusive_ptr<CoilWork>& self) noexcept;

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  void demand();

  const uint64_t seq_;
  std::vector<at::Tensor> outputs_;
  Body body_;
  Post post_;
  std::function<void()> demand_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/// A FIFO of CoilWork drained by one thread. A posted work (isPosted) is
/// only posted when its turn comes; `flush` (run on the thread) must then
/// complete what was posted: it runs before every other work, when
/// requestFlush() was called and the queue is empty, and before the thread
/// ends.
class WorkQueue {
 public:
  explicit WorkQueue(std::function<void()> flush = nullptr);
  /// Stops the thread (as stop()); queued work completes first.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  /// Queues `work`; it runs after everything queued before it. Throws
  /// c10::Error once the queue is stopped.
  void push(c10::intrusive_ptr<CoilWork> work);

  /// Lets the queued work run to completion, then joins the thread.
  /// Idempotent. Releases the Python GIL while it waits if the caller holds
  /// it, since a future's Python callback on the worker may need it.
  void stop();

  /// Refuses new work and completes every queued, not yet started, work
  /// with `error`, without waiting for the running one; stop() then joins.
  void failPending(std::exception_ptr error);

  /// Asks the thread to run `flush` once the works queued so far are taken.
  /// Any thread; cheap; never blocks on the worker.
  void requestFlush();
  /// requestFlush as a function that stays safe to call after the queue is gone.
  std::function<void()> flushRequester() const;

 private:
  // Shared with the thread, so a thread that has to detach itself (see
  // join()) never touches a destroyed queue.
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<CoilWork>> queue;
    bool stopping = false;
    bool flushRequested = false;
    std::function<void()> flush;
  };
  static void loop(const std::shared_ptr<State>& state);
  void join();

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace coil_torch
