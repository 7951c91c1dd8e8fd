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
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "completion_pool.h"
#include "cuda_op.h"

namespace coil_torch {

/// One queued operation. Completion behaves like gloo's work: wait() rethrows
/// the error, isCompleted() polls, and getFuture() completes with the output
/// tensors (a list) or with the error. With a CompletionPool, completing a
/// work whose future was handed out happens on one of its threads, never on
/// the caller of complete() (the worker, a point-to-point thread), so future
/// callbacks may wait for later operations.
class CoilWork : public c10d::Work {
 public:
  /// What the worker runs; throws on failure. May be empty for a work that is
  /// completed by someone else (a member of a coalesced batch).
  using Body = std::function<void()>;

  CoilWork(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
           Body body, std::shared_ptr<CompletionPool> completions);

  /// Runs the body on the calling (worker) thread, then completes the work:
  /// success with the outputs, or the body's exception. Never throws.
  void run() noexcept;

  /// Completes the work without running the body; `error` null means success.
  /// Returns at once; the completion itself runs on the pool (if any).
  void complete(std::exception_ptr error) noexcept;

  /// A wait without a timeout gives up after `limit`: it calls `onTimeout`,
  /// which may complete the work (a receive taken back) and returns the
  /// error to raise, or null to keep waiting (the message is arriving).
  /// Point-to-point works use it, so that every wait has a deadline.
  void setWaitLimit(std::chrono::milliseconds limit,
                    std::function<std::exception_ptr()> onTimeout);
  /// Called once the work has completed, with its error (null: success), on
  /// the completing thread. Set before the work can complete.
  void setOnComplete(std::function<void(std::exception_ptr)> onComplete);
  /// Makes this a work on CUDA tensors (cuda_op.h): the body runs on the
  /// op's side stream, wait() makes the caller's stream wait for it instead
  /// of the host, and the future is CUDA-aware. `inputs`: the tensors the
  /// body reads besides the outputs. Before the work is queued.
  void setCudaOp(std::shared_ptr<CudaOp> op, std::vector<at::Tensor> inputs);
  /// The op of a work on CUDA tensors, else null.
  const std::shared_ptr<CudaOp>& cudaOp() const { return cuda_; }
  /// Marks a member of a coalesced batch while the batch is open: wait()
  /// then fails naming it, since the member runs only once the batch ends
  /// (a blocking call inside startCoalescing would otherwise wait forever).
  void setInOpenBatch(bool open) { inOpenBatch_ = open; }
  /// The rank a receive's message came from (recv from any source).
  void setSourceRank(int rank) { sourceRank_ = rank; }
  int sourceRank() const override { return sourceRank_; }

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// Host works: the body has run. CUDA works: and the GPU has run it.
  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  /// Marks the future and wakes waiters, on this thread.
  void completeHere(std::exception_ptr error) noexcept;

  const uint64_t seq_;
  const std::shared_ptr<CompletionPool> completions_;
  std::vector<at::Tensor> outputs_;
  Body body_;
  std::chrono::milliseconds waitLimit_{0};
  std::function<std::exception_ptr()> onWaitTimeout_;
  std::function<void(std::exception_ptr)> onComplete_;
  std::atomic<int> sourceRank_{-1};
  std::atomic<bool> inOpenBatch_{false};
  std::shared_ptr<CudaOp> cuda_;
  std::vector<at::Tensor> cudaInputs_;
  // Whether the future may have callbacks, decided once: until getFuture()
  // hands it out nobody can add one, so complete() finishes on its own
  // thread, saving the hop to the pool (a blocking dist.send or all_reduce
  // never asks for the future).
  enum FutureState : int { kNotHandedOut, kHandedOut, kCompletingHere };
  std::atomic<int> futureState_{kNotHandedOut};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/// Completes a work made of parts (a coalesced batch) once every part has
/// arrived, with the first part's error if any. Any thread.
class CompletionLatch {
 public:
  /// `beforeComplete`, if set, runs on the last part's thread just before
  /// the work completes (a CUDA batch records its end on the side stream).
  CompletionLatch(c10::intrusive_ptr<CoilWork> work, size_t parts,
                  std::function<void()> beforeComplete = nullptr)
      : work_(std::move(work)), remaining_(parts), beforeComplete_(std::move(beforeComplete)) {}
  void arrive(std::exception_ptr error);

 private:
  std::mutex mutex_;
  c10::intrusive_ptr<CoilWork> work_;
  size_t remaining_;
  std::function<void()> beforeComplete_;
  std::exception_ptr firstError_;
};

/// A FIFO of CoilWork drained by one thread.
class WorkQueue {
 public:
  WorkQueue();
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

 private:
  // Shared with the thread, so a thread that has to detach itself (see
  // join()) never touches a destroyed queue.
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<CoilWork>> queue;
    bool stopping = false;
  };
  static void loop(const std::shared_ptr<State>& state);
  void join();

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace coil_torch
