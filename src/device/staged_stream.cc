#include "device/staged_stream.h"

#include "topo/binding.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

namespace coil::device {
namespace {

constexpr size_t kAlign = 64;
constexpr int kInitialEvents = 8;
constexpr size_t kBounceBytes = size_t{4} << 20;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StagedStream::StagedStream(int device, OnError onError, size_t stagingBytes)
    : device_(device), onError_(std::move(onError)) {
  setDevice(device_);
  word_ = static_cast<volatile uint32_t*>(allocPinned(kAlign));
  *word_ = 0;
  try {
    bounce_ = static_cast<uint8_t*>(allocPinned(kBounceBytes));
    if (stagingBytes > 0) {
      pinnedStaging_ = static_cast<uint8_t*>(allocPinned(alignUp(stagingBytes)));
      pinnedStagingBytes_ = alignUp(stagingBytes);
    }
    copies_ = createStream();
    for (int i = 0; i < kInitialEvents; ++i) freeEvents_.push_back(createEvent());
  } catch (...) {
    for (Event e : freeEvents_) destroyEvent(e);
    destroyStream(copies_);
    freePinned(pinnedStaging_);
    freePinned(bounce_);
    freePinned(const_cast<uint32_t*>(word_));
    throw;
  }
  proxy_ = std::thread([this] { proxyLoop(); });
}

StagedStream::~StagedStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  proxy_.join();  // it runs every queued job first
  for (Event e : freeEvents_) destroyEvent(e);
  destroyStream(copies_);
  freePinned(pinnedStaging_);
  freePinned(bounce_);
  freePinned(const_cast<uint32_t*>(word_));
}

// Sorts the ranges and merges the overlapping ones into spans, each placed
// at an aligned offset of the staging memory, *total bytes in all.
std::vector<StagedStream::Span> StagedStream::layout(const std::vector<DeviceRange>& ranges,
                                                     size_t* total) {
  std::vector<std::pair<uintptr_t, uintptr_t>> extents;
  for (const DeviceRange& r : ranges)
    if (r.bytes > 0) {
      const auto lo = reinterpret_cast<uintptr_t>(r.ptr);
      extents.emplace_back(lo, lo + r.bytes);
    }
  std::sort(extents.begin(), extents.end());
  std::vector<Span> spans;
  for (const auto& [lo, hi] : extents) {
    if (!spans.empty() && lo < spans.back().hi) spans.back().hi = std::max(spans.back().hi, hi);
    else spans.push_back({lo, hi, 0});
  }
  size_t offset = 0;
  for (Span& s : spans) {
    s.offset = offset;
    offset += alignUp(s.hi - s.lo);
  }
  *total = offset;
  return spans;
}

void StagedStream::FreeBytes::operator()(uint8_t* p) const noexcept { std::free(p); }

uint8_t* StagedStream::hostStaging(size_t bytes) {
  if (bytes > hostStagingBytes_) {
    hostStaging_.reset();
    hostStagingBytes_ = 0;
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, alignUp(bytes)));
    if (p == nullptr) throw std::bad_alloc();
    hostStaging_.reset(p);
    hostStagingBytes_ = bytes;
  }
  return hostStaging_.get();
}

Event StagedStream::takeEvent() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!freeEvents_.empty()) {
      Event e = freeEvents_.back();
      freeEvents_.pop_back();
      return e;
    }
  }
  return createEvent();  // more calls in flight than ever before
}

void StagedStream::enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream) {
  std::lock_guard<std::mutex> order(enqueueMutex_);
  Event ready = takeEvent();
  try {
    recordEvent(ready, stream);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    freeEvents_.push_back(ready);
    throw;
  }
  const uint32_t ticket = issued_ + 1;
  waitWord(stream, word_, ticket);  // if this throws, the stream waits for nothing
  issued_ = ticket;
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back({ticket, ready, ranges, std::move(body)});
  ++enqueued_;
  changed_.notify_all();
}

// Device -> staging through the pinned bounce buffer, a chunk at a time.
void StagedStream::copyIn(uint8_t* host, const void* device, size_t bytes) {
  for (size_t done = 0; done < bytes; done += kBounceBytes) {
    const size_t n = std::min(kBounceBytes, bytes - done);
    copyAsync(bounce_, static_cast<const uint8_t*>(device) + done, n, copies_);
    syncStream(copies_);
    std::memcpy(host + done, bounce_, n);
  }
}

void StagedStream::copyOut(void* device, const uint8_t* host, size_t bytes) {
  for (size_t done = 0; done < bytes; done += kBounceBytes) {
    const size_t n = std::min(kBounceBytes, bytes - done);
    std::memcpy(bounce_, host + done, n);
    copyAsync(static_cast<uint8_t*>(device) + done, bounce_, n, copies_);
    syncStream(copies_);  // before the bounce buffer is refilled
  }
}

// One job: the stream has reached it once `ready` fires; stage the inputs,
// run the body, copy the outputs back (not after a failure: they keep what
// they held), release the stream.
void StagedStream::run(Job& job) {
  size_t total = 0;
  const std::vector<Span> spans = layout(job.ranges, &total);
  const bool pinned = total <= pinnedStagingBytes_;
  uint8_t* base = pinned ? pinnedStaging_ : hostStaging(total);
  auto staged = [&](const void* p) -> uint8_t* {
    const auto a = reinterpret_cast<uintptr_t>(p);
    for (const Span& s : spans)
      if (a >= s.lo && a <= s.hi) return base + s.offset + (a - s.lo);
    return nullptr;
  };
  syncEvent(job.ready);
  if (pinned) {  // straight into the pinned block, every range on the one stream, one wait
    for (const DeviceRange& r : job.ranges)
      if (r.in && r.bytes > 0) copyAsync(staged(r.ptr), r.ptr, r.bytes, copies_);
    syncStream(copies_);
  } else {
    for (const DeviceRange& r : job.ranges)
      if (r.in && r.bytes > 0) copyIn(staged(r.ptr), r.ptr, r.bytes);
  }
  job.body([&](const void* p) -> void* { return staged(p); });
  if (pinned) {
    for (const DeviceRange& r : job.ranges)
      if (r.out && r.bytes > 0) copyAsync(const_cast<void*>(r.ptr), staged(r.ptr), r.bytes, copies_);
    syncStream(copies_);
  } else {
    for (const DeviceRange& r : job.ranges)
      if (r.out && r.bytes > 0) copyOut(const_cast<void*>(r.ptr), staged(r.ptr), r.bytes);
  }
}

void StagedStream::proxyLoop() {
  topo::bindThisThread("device proxy");  // COIL_BIND=auto: next to the rank's CPUs
  try {
    setDevice(device_);
  } catch (const Error& e) {
    onError_(e);  // the jobs fail too; their streams are still released
  }
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every job has run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      run(job);
    } catch (const Error& e) {
      onError_(e);
    } catch (const std::exception& e) {
      onError_(Error(coilInternalError, std::string("staged device call: ") + e.what()));
    }
    __atomic_store_n(word_, job.ticket, __ATOMIC_RELEASE);  // the stream goes on
    std::lock_guard<std::mutex> lock(mutex_);
    freeEvents_.push_back(job.ready);
    ++completed_;
    changed_.notify_all();
  }
}

void StagedStream::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return completed_ >= target; });
}

}  // namespace coil::device
