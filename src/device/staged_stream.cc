#include "device/staged_stream.h"

#include "core/thread_name.h"
#include "topo/binding.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>

namespace coil::device {
namespace {

constexpr size_t kAlign = 64;
constexpr int kInitialEvents = 8;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StagedStream::StagedStream(int device, OnError onError, size_t stagingBytes)
    : device_(device), onError_(std::move(onError)) {
  setDevice(device_);
  stagingBytes_ = stagingBytes;
  blockBytes_ = alignUp(std::max(stagingBytes, kMinBlockBytes));
  word_ = static_cast<volatile uint32_t*>(allocPinned(kAlign));
  *word_ = 0;
  try {
    block_ = static_cast<uint8_t*>(allocPinned(blockBytes_));
    blockFree_ = createEvent();
    for (int i = 0; i < kInitialEvents; ++i) freeEvents_.push_back(createEvent());
  } catch (...) {
    for (Event e : freeEvents_) destroyEvent(e);
    destroyEvent(blockFree_);
    freePinned(block_);
    freePinned(const_cast<uint32_t*>(word_));
    throw;
  }
  proxy_ = std::thread([this] { proxyLoop(); });
  nameOwnThread(proxy_, "cuda-proxy", -1);
  topo::bindOwnThread(proxy_, "device proxy");  // COIL_BIND=auto: next to the rank's CPUs
}

StagedStream::~StagedStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  proxy_.join();  // it runs every queued job first
  try {
    syncEvent(blockFree_);  // the streams' last copies from the block
  } catch (const Error&) {
  }
  for (Event e : freeEvents_) destroyEvent(e);
  destroyEvent(blockFree_);
  freePinned(block_);
  freePinned(const_cast<uint32_t*>(word_));
}

// Sorts the ranges and merges the overlapping or touching ones into spans, each placed
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
    // Touching ranges merge too: a pointer at one range's end and at the next
    // one's start must lead to one staged byte.
    if (!spans.empty() && lo <= spans.back().hi) spans.back().hi = std::max(spans.back().hi, hi);
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

std::optional<size_t> StagedStream::stagedOffset(const std::vector<Span>& spans, const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const Span& s : spans)
    if (a >= s.lo && a <= s.hi) return s.offset + (a - s.lo);
  return std::nullopt;
}

uint8_t* StagedStream::stagedAddress(const std::vector<Span>& spans, uint8_t* base, const void* p) {
  const std::optional<size_t> offset = stagedOffset(spans, p);
  return offset ? base + *offset : nullptr;
}

StagedStream::HostOf StagedStream::stagedIn(const std::vector<Span>& spans, uint8_t* base) {
  return [&spans, base](const void* p) -> void* { return stagedAddress(spans, base, p); };
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

// A large call's inbound (or outbound) ranges cut into trips of at most a
// block each; a call with nothing to move that way still makes one trip,
// so that its stream waits for the proxy at that point.
std::vector<StagedStream::Trip> StagedStream::trips(const std::vector<DeviceRange>& ranges,
                                                    const std::vector<Span>& spans,
                                                    bool inbound) const {
  std::vector<Trip> out(1);
  size_t used = 0;  // of the current trip's block
  for (const DeviceRange& r : ranges) {
    if (!(inbound ? r.in : r.out) || r.bytes == 0) continue;
    const size_t hostOffset = *stagedOffset(spans, r.ptr);  // every range is in a span
    for (size_t done = 0; done < r.bytes;) {
      if (used >= blockBytes_) {
        out.emplace_back();
        used = 0;
      }
      const size_t n = std::min(r.bytes - done, blockBytes_ - used);
      out.back().pieces.push_back({static_cast<const uint8_t*>(r.ptr) + done, hostOffset + done, used, n});
      used = alignUp(used + n);
      done += n;
    }
  }
  return out;
}

void StagedStream::enqueue(const std::vector<DeviceRange>& ranges, Body body, Stream stream,
                           Order order) {
  std::lock_guard<std::mutex> inOrder(enqueueMutex_);
  Job job;
  job.spans = layout(ranges, &job.total);
  job.inBlock = job.total <= stagingBytes_;
  if (order == Order::kHost) {
    job.body = std::move(body);
    runInHostOrder(job, ranges, stream);
    return;
  }
  submitOnceQueued(job, stream, [&] {
    enqueueOn(job, ranges, stream);
    job.body = std::move(body);
  });
}

// Runs `queue` (which puts the job's work on the stream and then gives the
// job its body or phases), then hands the job to the proxy. If `queue`
// throws, the next call must still not use the block before this one's
// queued copies are through, and the waits already queued must still be
// released: the job goes to the proxy without its work, and the caller
// gets the error.
void StagedStream::submitOnceQueued(Job& job, Stream stream, const std::function<void()>& queue) {
  try {
    queue();
  } catch (...) {
    try {
      recordEvent(blockFree_, stream);
    } catch (const Error&) {
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (job.lastTicket == 0) returnEvents(job);
    else submit(std::move(job));
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  submit(std::move(job));
}

void StagedStream::enqueuePhases(std::vector<Phase> phases, Stream stream, Order order) {
  if (phases.empty()) return;  // nothing to order: a job needs a ticket
  std::lock_guard<std::mutex> inOrder(enqueueMutex_);
  if (order == Order::kHost) return runPhasesInHostOrder(phases, stream);
  Job job;
  submitOnceQueued(job, stream, [&] {
    enqueuePhasesOn(job, phases, stream);
    job.phases = std::move(phases);
  });
}

// Each phase's GPU work, an event for the proxy, and a wait for the proxy's
// host step; the last wait too, so that the block's (and a phased call's
// shared memory's) next user starts after the call's last host step.
void StagedStream::enqueuePhasesOn(Job& job, const std::vector<Phase>& phases, Stream stream) {
  waitEvent(stream, blockFree_);
  for (const Phase& phase : phases) {
    if (phase.onStream) phase.onStream(stream);
    Trip& t = job.inbound.emplace_back();
    recordOn(t, stream);
    waitFor(job, t, stream);
  }
  recordEvent(blockFree_, stream);
}

void StagedStream::runPhasesInHostOrder(const std::vector<Phase>& phases, Stream stream) {
  inHostOrder(stream, [&] {
    for (const Phase& phase : phases) {
      if (phase.onStream) phase.onStream(stream);
      syncStream(stream);
      if (phase.onHost) phase.onHost();
    }
  });
}

void StagedStream::runPhases(Job& job) {
  for (size_t i = 0; i < job.phases.size(); ++i) {
    syncEvent(job.inbound[i].event);
    if (job.phases[i].onHost) job.phases[i].onHost();
    release(job.inbound[i].ticket);
  }
}

void StagedStream::submit(Job&& job) {
  queue_.push_back(std::move(job));
  ++enqueued_;
  changed_.notify_all();
}

void StagedStream::returnEvents(const Job& job) {
  for (const std::vector<Trip>* trips : {&job.inbound, &job.outbound})
    for (const Trip& t : *trips)
      if (t.event) freeEvents_.push_back(t.event);
}

// The copies both orders make: a call's input ranges into the block, or
// its output ranges back out of it, on `stream` (a call in the block)...
void StagedStream::copyRanges(const Job& job, const std::vector<DeviceRange>& ranges, bool inbound,
                              Stream stream) {
  for (const DeviceRange& r : ranges) {
    if (!(inbound ? r.in : r.out) || r.bytes == 0) continue;
    void* staged = stagedAddress(job.spans, block_, r.ptr);
    if (inbound) copyAsync(staged, r.ptr, r.bytes, stream);
    else copyAsync(const_cast<void*>(r.ptr), staged, r.bytes, stream);
  }
}

// ...one trip's pieces between the device and the block, on `stream`...
void StagedStream::copyTrip(const Trip& t, bool inbound, Stream stream) {
  for (const Piece& p : t.pieces) {
    if (inbound) copyAsync(block_ + p.blockOffset, p.device, p.bytes, stream);
    else copyAsync(const_cast<void*>(p.device), block_ + p.blockOffset, p.bytes, stream);
  }
}

// ...and between the block and host staging, on the host (a large call).
void StagedStream::moveTrip(const Trip& t, bool inbound, uint8_t* host) {
  for (const Piece& p : t.pieces) {
    if (inbound) std::memcpy(host + p.hostOffset, block_ + p.blockOffset, p.bytes);
    else std::memcpy(block_ + p.blockOffset, host + p.hostOffset, p.bytes);
  }
}

void StagedStream::recordOn(Trip& t, Stream stream) {
  t.event = takeEvent();
  recordEvent(t.event, stream);
}

void StagedStream::waitFor(Job& job, Trip& t, Stream stream) {
  t.ticket = issued_ + 1;
  waitWord(stream, word_, t.ticket);
  issued_ = job.lastTicket = t.ticket;
}

// Puts the call's copies and waits on `stream` (staged_stream.h), filling
// in `job`'s tickets and events as it goes.
void StagedStream::enqueueOn(Job& job, const std::vector<DeviceRange>& ranges, Stream stream) {
  waitEvent(stream, blockFree_);  // never recorded yet: waits for nothing
  auto waitFor = [&](Trip& t) { this->waitFor(job, t, stream); };
  auto recordOn = [&](Trip& t) { this->recordOn(t, stream); };
  if (job.inBlock) {
    copyRanges(job, ranges, true, stream);
    Trip& t = job.inbound.emplace_back();
    recordOn(t);
    waitFor(t);
    copyRanges(job, ranges, false, stream);
  } else {
    job.inbound = trips(ranges, job.spans, true);
    job.outbound = trips(ranges, job.spans, false);
    for (Trip& t : job.inbound) {
      copyTrip(t, true, stream);
      recordOn(t);
      waitFor(t);
    }
    for (size_t j = 0; j < job.outbound.size(); ++j) {
      Trip& t = job.outbound[j];
      waitFor(t);
      copyTrip(t, false, stream);
      if (j + 1 < job.outbound.size()) recordOn(t);  // the proxy refills the block after it
    }
  }
  recordEvent(blockFree_, stream);
}

// The host-order call (staged_stream.h): the same copies as enqueueOn, with
// the host waiting for the stream where enqueueOn has the stream wait for
// the proxy.
void StagedStream::runInHostOrder(Job& job, const std::vector<DeviceRange>& ranges, Stream stream) {
  inHostOrder(stream, [&] {
    if (job.inBlock) {
      copyRanges(job, ranges, true, stream);
      syncStream(stream);
      job.body(stagedIn(job.spans, block_));
      copyRanges(job, ranges, false, stream);
      return;
    }
    uint8_t* host = hostStaging(job.total);
    for (const Trip& t : trips(ranges, job.spans, true)) {
      copyTrip(t, true, stream);
      syncStream(stream);
      moveTrip(t, true, host);
    }
    job.body(stagedIn(job.spans, host));
    bool first = true;
    for (const Trip& t : trips(ranges, job.spans, false)) {
      if (!first) syncStream(stream);  // the previous trip's copies out have left the block
      first = false;
      moveTrip(t, false, host);
      copyTrip(t, false, stream);
    }
  });
}

// A host-order call's frame: after the block's previous user, and
// blockFree_ recorded on every way out (the block's next user waits for it
// whatever happens).
void StagedStream::inHostOrder(Stream stream, const std::function<void()>& run) {
  waitEvent(stream, blockFree_);
  try {
    run();
  } catch (...) {
    try {
      recordEvent(blockFree_, stream);
    } catch (const Error&) {
    }
    throw;
  }
  recordEvent(blockFree_, stream);
}

void StagedStream::release(uint32_t ticket) {
  __atomic_store_n(word_, ticket, __ATOMIC_RELEASE);  // the stream goes on
}

// One job, in the order its stream meets it. A call in the block: its
// stream has copied the inputs in once `ready` fires; run the body there and
// let the stream copy the outputs out. A large call: move each inbound
// trip's pieces from the block to host staging once the stream has filled
// it, run the body, then fill the block for each outbound trip once the
// stream has emptied it of the previous one.
void StagedStream::run(Job& job) {
  if (!job.phases.empty()) return runPhases(job);
  if (job.inBlock) {
    syncEvent(job.inbound.front().event);
    job.body(stagedIn(job.spans, block_));
    release(job.inbound.front().ticket);
    return;
  }
  uint8_t* host = hostStaging(job.total);
  for (const Trip& t : job.inbound) {
    syncEvent(t.event);
    moveTrip(t, true, host);
    release(t.ticket);
  }
  job.body(stagedIn(job.spans, host));
  for (size_t j = 0; j < job.outbound.size(); ++j) {
    if (j > 0) syncEvent(job.outbound[j - 1].event);
    moveTrip(job.outbound[j], false, host);
    release(job.outbound[j].ticket);
  }
}

void StagedStream::proxyLoop() {
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
    if (job.runnable()) {
      try {
        run(job);
      } catch (const Error& e) {
        onError_(e);
      } catch (const std::exception& e) {
        onError_(Error(coilInternalError, std::string("staged device call: ") + e.what()));
      }
    }
    release(job.lastTicket);  // every wait of the job, whatever happened
    std::lock_guard<std::mutex> lock(mutex_);
    returnEvents(job);
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
