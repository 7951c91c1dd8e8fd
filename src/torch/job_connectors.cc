#include "job_connectors.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <thread>

namespace coil_torch {
namespace {

std::mutex currentJobMutex;
std::shared_ptr<JobConnectors> currentJob;

constexpr auto kOthersPollInterval = std::chrono::milliseconds(10);

}  // namespace

std::shared_ptr<JobConnectors> JobConnectors::start(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::string& storeKey) {
  auto job = std::make_shared<JobConnectors>(store, "coil_job_connectors/" + storeKey);
  std::lock_guard<std::mutex> lock(currentJobMutex);
  currentJob = job;
  return job;
}

std::shared_ptr<JobConnectors> JobConnectors::current() {
  std::lock_guard<std::mutex> lock(currentJobMutex);
  return currentJob;
}

void JobConnectors::finish(const std::shared_ptr<JobConnectors>& job) {
  if (!job) return;
  std::lock_guard<std::mutex> lock(currentJobMutex);
  if (currentJob == job) currentJob.reset();
}

bool JobConnectors::countIn() {
  local_.fetch_add(1);
  try {
    store_->add(key_, 1);
    return true;
  } catch (const c10::Error&) {
    local_.fetch_sub(1);  // the connector's own store calls fail the same way
    return false;
  }
}

void JobConnectors::countOut() {
  local_.fetch_sub(1);
  try {
    store_->add(key_, -1);
  } catch (const c10::Error&) {
    // The store is gone: nobody is left to wait for this one.
  }
}

void JobConnectors::waitForOthers(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  try {
    while (store_->add(key_, 0) > local_.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(kOthersPollInterval);
  } catch (const c10::Error&) {
    // The store is gone (not hosted here after all): nothing to wait for.
  }
}

}  // namespace coil_torch
