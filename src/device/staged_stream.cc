#include "device/staged_stream.h"

#include <algorithm>

namespace coil::device {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMinStagingBytes = size_t{1} << 20;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StagedStream::StagedStream(int device, OnError onError)
    : device_(device), onError_(std::move(onError)) {
  setDevice(device_);
  word_ = static_cast<volatile uint32_t*>(allocPinned(kAlign));
  *word_ = 0;
  proxy_ = std::thread([this] { proxyLoop(); });
}

StagedStream::~StagedStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  proxy_.join();  // it runs every queued body first
  // The copies back read staging after the word moved on: wait for them.
  for (Staging& s : staging_) {
    try {
      syncEvent(s.done);
    } catch (const Error&) {
      // a failed device: nothing more will read this memory
    }
    destroyEvent(s.done);
    freePinned(s.host);
  }
  for (Event e : freeEvents_) destroyEvent(e);
  freePinned(const_cast<uint32_t*>(word_));
}

// Sorts the ranges and merges the overlapping ones into spans, each placed
// at an aligned offset of one staging block of *total bytes.
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

// A staging block of at least `bytes` whose last job's copies back are done.
StagedStream::Staging& StagedStream::stagingFor(size_t bytes) {
  for (Staging& s : staging_)
    if (s.capacity >= bytes && eventDone(s.done)) return s;
  // None fits: replace an idle smaller one, or add one (jobs queued
  // without a sync each hold their own block until their copies back ran).
  for (Staging& s : staging_)
    if (eventDone(s.done)) {
      freePinned(s.host);
      s.host = nullptr;
      s.capacity = std::max(bytes, kMinStagingBytes);
      s.host = allocPinned(s.capacity);
      return s;
    }
  Staging s;
  s.capacity = std::max(bytes, kMinStagingBytes);
  s.host = allocPinned(s.capacity);
  try {
    s.done = createEvent();
  } catch (...) {
    freePinned(s.host);
    throw;
  }
  staging_.push_back(s);
  return staging_.back();
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
  return createEvent();
}

void StagedStream::enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream) {
  std::lock_guard<std::mutex> order(enqueueMutex_);
  size_t total = 0;
  std::vector<Span> spans = layout(ranges, &total);
  Staging* block = total > 0 ? &stagingFor(total) : nullptr;
  uint8_t* base = block ? static_cast<uint8_t*>(block->host) : nullptr;
  auto staged = [&](const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    for (const Span& s : spans)
      if (a >= s.lo && a < s.hi) return base + s.offset + (a - s.lo);
    return static_cast<uint8_t*>(nullptr);  // unreachable for a range's bytes
  };
  for (const DeviceRange& r : ranges)
    if (r.in && r.bytes > 0) copyAsync(staged(r.ptr), r.ptr, r.bytes, stream);
  Event ready = takeEvent();
  recordEvent(ready, stream);
  const uint32_t ticket = issued_ + 1;
  waitWord(stream, word_, ticket);
  issued_ = ticket;
  // From here the stream waits for this ticket: the job must reach the
  // proxy even if what follows fails, or the stream would wait forever.
  try {
    for (const DeviceRange& r : ranges)
      if (r.out && r.bytes > 0) copyAsync(const_cast<void*>(r.ptr), staged(r.ptr), r.bytes, stream);
    if (block) recordEvent(block->done, stream);
  } catch (...) {
    body = [](const HostOf&) {};
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({ticket, ready, {}, nullptr, std::move(body)});
    ++enqueued_;
    changed_.notify_all();
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back({ticket, ready, std::move(spans), base, std::move(body)});
  ++enqueued_;
  changed_.notify_all();
}

void StagedStream::release(uint32_t ticket) { __atomic_store_n(word_, ticket, __ATOMIC_RELEASE); }

void StagedStream::proxyLoop() {
  try {
    setDevice(device_);
  } catch (const Error& e) {
    onError_(e);  // the syncs below fail too; the stream is still released
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
    const HostOf hostOf = [&job](const void* p) -> void* {
      const auto a = reinterpret_cast<uintptr_t>(p);
      for (const Span& s : job.spans)
        if (a >= s.lo && a <= s.hi) return job.base + s.offset + (a - s.lo);
      return nullptr;
    };
    try {
      syncEvent(job.ready);
      job.body(hostOf);
    } catch (const Error& e) {
      onError_(e);
    } catch (const std::exception& e) {
      onError_(Error(coilInternalError, std::string("staged device call: ") + e.what()));
    }
    release(job.ticket);
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

bool StagedStream::busy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ < enqueued_;
}

}  // namespace coil::device
