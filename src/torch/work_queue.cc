#include "work_queue.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <utility>

#include "gil_release.h"

namespace coil_torch {
CoilWork::CoilWork(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
                   Body body, std::shared_ptr<CompletionPool> completions)
    : c10d::Work(rank, opType),
      seq_(seq),
      completions_(std::move(completions)),
      outputs_(std::move(outputs)),
      body_(std::move(body)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void CoilWork::run() noexcept {
  std::exception_ptr error;
  try {
    if (body_ && cuda_) {
      std::vector<at::Tensor> touched = outputs_;
      touched.insert(touched.end(), cudaInputs_.begin(), cudaInputs_.end());
      cuda_->run(body_, touched);
    } else if (body_) {
      body_();
    }
  } catch (...) {
    error = std::current_exception();
  }
  body_ = nullptr;  // drop captured tensors as soon as they are done with
  cudaInputs_.clear();  // (CUDA: marked as used on the side stream)
  complete(error);
}

void CoilWork::complete(std::exception_ptr error) noexcept {
  int notHandedOut = kNotHandedOut;
  if (!completions_ || futureState_.compare_exchange_strong(notHandedOut, kCompletingHere)) {
    completeHere(error);  // no callback can be attached yet: nothing user-defined runs here
    return;
  }
  try {
    completions_->submit(
        [self = c10::intrusive_ptr<CoilWork>::unsafe_reclaim_from_nonowning(this), error] {
          self->completeHere(error);
        });
  } catch (...) {
    completeHere(error);  // no thread could be started: complete here after all
  }
}

void CoilWork::completeHere(std::exception_ptr error) noexcept {
  // The future first, as gloo does: a thread woken by wait() may look at it.
  try {
    if (error)
      future_->setError(error);
    else if (cuda_)  // the future's events go on the side stream
      cuda_->onSideStream([&] { future_->markCompleted(c10::IValue(outputs_)); });
    else
      future_->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    // A future callback threw. The future records callback errors itself;
    // the work still completes below.
  }
  finish(error);
  if (onComplete_) onComplete_(error);
}

c10::intrusive_ptr<c10::ivalue::Future> CoilWork::getFuture() {
  int notHandedOut = kNotHandedOut;
  if (!futureState_.compare_exchange_strong(notHandedOut, kHandedOut) &&
      notHandedOut == kCompletingHere)
    future_->wait();  // being completed right now: callbacks added after run here
  return future_;
}

void CoilWork::setWaitLimit(std::chrono::milliseconds limit,
                            std::function<std::exception_ptr()> onTimeout) {
  waitLimit_ = limit;
  onWaitTimeout_ = std::move(onTimeout);
}

void CoilWork::setCudaOp(std::shared_ptr<CudaOp> op, std::vector<at::Tensor> inputs) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     std::vector<c10::Device>{op->device()});
  cuda_ = std::move(op);
  cudaInputs_ = std::move(inputs);
}

bool CoilWork::isCompleted() {
  // completeHere() completes the future a moment before the work: a caller
  // woken by the future (work.get_future().wait()) must find the work
  // completed too.
  if (!c10d::Work::isCompleted() && !future_->completed()) return false;
  return !cuda_ || cuda_->finished();
}

void CoilWork::setOnComplete(std::function<void(std::exception_ptr)> onComplete) {
  onComplete_ = std::move(onComplete);
}

bool CoilWork::wait(std::chrono::milliseconds timeout) {
  TORCH_CHECK(!inOpenBatch_.load(), "coil backend: wait() on ", c10d::opTypeToString(opType_),
              " inside an open coalesced batch: it runs only once the batch ends. Call it with "
              "async_op=True and wait on the work that endCoalescing (or torch's "
              "_coalescing_manager) returns");
  if (timeout == kNoTimeout && waitLimit_.count() > 0 && onWaitTimeout_) {
    bool done;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done = cv_.wait_for(lock, waitLimit_, [&] { return completed_; });
    }
    if (!done)
      if (std::exception_ptr error = onWaitTimeout_()) std::rethrow_exception(error);
  }
  const bool done = c10d::Work::wait(timeout);  // rethrows the body's error
  if (cuda_) cuda_->blockCurrentStream();  // the GPU work: the caller's stream waits, not the host
  return done;
}

void CompletionLatch::arrive(std::exception_ptr error) {
  c10::intrusive_ptr<CoilWork> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error && !firstError_) firstError_ = error;
    if (remaining_ == 0 || --remaining_ > 0) return;
    done = std::move(work_);
  }
  if (beforeComplete_) {
    try {
      beforeComplete_();
    } catch (...) {
      if (!firstError_) firstError_ = std::current_exception();
    }
  }
  done->complete(firstError_);
}

WorkQueue::WorkQueue() : state_(std::make_shared<State>()) {
  thread_ = std::thread([s = state_] { loop(s); });
  pthread_setname_np(thread_.native_handle(), "coil-torch");
}

WorkQueue::~WorkQueue() { stop(); }

void WorkQueue::push(c10::intrusive_ptr<CoilWork> work) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    TORCH_CHECK(!state_->stopping,
                "coil backend: the process group has been shut down or aborted");
    state_->queue.push_back(std::move(work));
  }
  state_->cv.notify_one();
}

void WorkQueue::loop(const std::shared_ptr<State>& state) {
  for (;;) {
    c10::intrusive_ptr<CoilWork> work;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->cv.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) return;  // stopping, and everything has run
      work = std::move(state->queue.front());
      state->queue.pop_front();
    }
    work->run();
  }
}

void WorkQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  join();
}

void WorkQueue::failPending(std::exception_ptr error) {
  std::deque<c10::intrusive_ptr<CoilWork>> dropped;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    dropped.swap(state_->queue);
  }
  state_->cv.notify_all();
  for (auto& work : dropped) work->complete(error);
}

void WorkQueue::join() {
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    // A future callback on the worker dropped the last reference to the
    // backend. The thread owns its State, and leaves the loop once the
    // callback returns (stopping is set).
    thread_.detach();
    return;
  }
  GilReleasedIfHeld released;
  thread_.join();
}

}  // namespace coil_torch
