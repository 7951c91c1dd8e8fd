#include "completion_pool.h"

#include <pthread.h>

#include <utility>

#include "gil_release.h"

namespace coil_torch {

CompletionPool::CompletionPool() : state_(std::make_shared<State>()) {}

CompletionPool::~CompletionPool() { stop(); }

void CompletionPool::submit(std::function<void()> completion) {
  bool startThread = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->stopping) {
      state_->queue.push_back(std::move(completion));
      // Every queued completion needs a thread of its own that is free now:
      // one still queued behind a blocked callback could be the very one
      // that callback waits for.
      if (state_->idle >= static_cast<int>(state_->queue.size())) {
        state_->cv.notify_one();
        return;
      }
      startThread = true;
    }
  }
  if (!startThread) {  // stopped: nobody is left to run it
    completion();
    return;
  }
  std::lock_guard<std::mutex> lock(threadsMutex_);
  threads_.emplace_back([s = state_] { loop(s); });
  pthread_setname_np(threads_.back().native_handle(), "coil-torch-done");
}

void CompletionPool::loop(const std::shared_ptr<State>& state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    ++state->idle;
    state->cv.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
    --state->idle;
    if (state->queue.empty()) return;  // stopping, and everything has run
    std::function<void()> completion = std::move(state->queue.front());
    state->queue.pop_front();
    lock.unlock();
    completion();
    completion = nullptr;  // drop what it captured before waiting again
    lock.lock();
  }
}

void CompletionPool::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(threadsMutex_);
    threads.swap(threads_);
  }
  GilReleasedIfHeld released;
  for (std::thread& t : threads) {
    if (t.get_id() == std::this_thread::get_id())
      t.detach();  // this thread owns its State and returns once its callback does
    else
      t.join();
  }
}

}  // namespace coil_torch
