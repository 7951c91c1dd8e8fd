#include "work_queue.h"

#include <Python.h>
#include <c10/util/Exception.h>
#include <pthread.h>

#include <utility>

namespace coil_torch {
namespace {

// Releases the GIL for the scope if this thread holds it. Joining the worker
// with the GIL held would deadlock when the worker is completing a future
// whose Python callback (fut.then(...)) is waiting for the GIL.
class GilReleasedIfHeld {
 public:
  GilReleasedIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilReleasedIfHeld() {
    if (state_) PyEval_RestoreThread(state_);
  }
  GilReleasedIfHeld(const GilReleasedIfHeld&) = delete;
  GilReleasedIfHeld& operator=(const GilReleasedIfHeld&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

}  // namespace

CoilWork::CoilWork(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
                   Body body)
    : c10d::Work(rank, opType),
      seq_(seq),
      outputs_(std::move(outputs)),
      body_(std::move(body)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void CoilWork::run() noexcept {
  std::exception_ptr error;
  try {
    if (body_) body_();
  } catch (...) {
    error = std::current_exception();
  }
  body_ = nullptr;  // drop captured tensors as soon as they are done with
  complete(error);
}

void CoilWork::complete(std::exception_ptr error) noexcept {
  // The future first, as gloo does: a thread woken by wait() may look at it.
  try {
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    // A future callback threw. The future records callback errors itself;
    // the work still completes below.
  }
  finish(error);
}

void CoilWork::setPosted(Post post, std::function<void()> demand) {
  post_ = std::move(post);
  demand_ = std::move(demand);
}

void CoilWork::runPost(const c10::intrusive_ptr<CoilWork>& self) noexcept {
  Post post = std::move(post_);
  post_ = nullptr;
  try {
    post(self);
  } catch (...) {
    complete(std::current_exception());
  }
}

void CoilWork::demand() {
  if (demand_ && !c10d::Work::isCompleted()) demand_();
}

bool CoilWork::wait(std::chrono::milliseconds timeout) {
  demand();
  return c10d::Work::wait(timeout);
}

bool CoilWork::isCompleted() {
  demand();
  return c10d::Work::isCompleted();
}

c10::intrusive_ptr<c10::ivalue::Future> CoilWork::getFuture() {
  demand();
  return future_;
}

WorkQueue::WorkQueue(std::function<void()> flush) : state_(std::make_shared<State>()) {
  state_->flush = std::move(flush);
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
  auto flush = [&] {
    if (state->flush) state->flush();
  };
  for (;;) {
    c10::intrusive_ptr<CoilWork> work;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->cv.wait(lock, [&] {
        return state->stopping || state->flushRequested || !state->queue.empty();
      });
      if (state->queue.empty()) {
        bool last = !state->flushRequested;  // else stopping, and everything has run
        state->flushRequested = false;
        lock.unlock();
        flush();
        if (last) return;
        continue;
      }
      work = std::move(state->queue.front());
      state->queue.pop_front();
    }
    if (work->isPosted()) {
      work->runPost(work);
    } else {
      flush();  // what was posted before it runs first
      work->run();
    }
  }
}

void WorkQueue::requestFlush() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->flushRequested = true;
  }
  state_->cv.notify_one();
}

std::function<void()> WorkQueue::flushRequester() const {
  return [weak = std::weak_ptr<State>(state_)] {
    if (std::shared_ptr<State> s = weak.lock()) {
      {
        std::lock_guard<std::mutex> lock(s->mutex);
        s->flushRequested = true;
      }
      s->cv.notify_one();
    }
  };
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
