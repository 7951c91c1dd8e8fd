#include "rank_buffers.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "coil_calls.h"
#include "device_memory.h"

namespace coil_perf {
namespace {

// How long the destructor waits for queued device work (after a failure,
// the communicator is gone by then and its calls have ended or failed).
constexpr double kCleanupWaitSeconds = 30;

void* allocatePages(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* allocateDevice(size_t bytes) {
  void* p = nullptr;
  coilCheck(coilMemAlloc(&p, bytes == 0 ? 1 : bytes), "coilMemAlloc", nullptr);
  return p;
}

// `p` in [base, base + bytes), or with `end`, [base, base + bytes].
bool within(const void* p, const void* base, size_t bytes, bool end) {
  const auto* c = static_cast<const char*>(p);
  const auto* b = static_cast<const char*>(base);
  return c >= b && (c < b + bytes || (end && c == b + bytes));
}

}  // namespace

RankBuffers::RankBuffers(bool device, size_t bytes) : device_(device), bytes_(bytes) {
  if (!device_) {
    send_ = allocatePages(bytes_);
    try {
      recv_ = allocatePages(bytes_);
    } catch (...) {
      std::free(send_);
      throw;
    }
    return;
  }
  try {
    stream_ = gpu::createStream();
    sendHost_ = allocatePages(bytes_);
    recvHost_ = allocatePages(bytes_);
    send_ = allocateDevice(bytes_);
    recv_ = allocateDevice(bytes_);
  } catch (...) {
    coilMemFree(recv_);
    coilMemFree(send_);
    std::free(recvHost_);
    std::free(sendHost_);
    gpu::destroyStream(stream_);
    throw;
  }
}

RankBuffers::~RankBuffers() {
  if (!device_) {
    std::free(send_);
    std::free(recv_);
    return;
  }
  if (!gpu::waitStream(stream_, kCleanupWaitSeconds)) {
    // Freeing memory that queued work may still use could corrupt it; the
    // process is about to end anyway.
    std::fprintf(stderr, "coil_perf: the CUDA stream is still busy or failed; its device "
                         "buffers are left allocated\n");
    return;
  }
  const coilResult_t freedSend = coilMemFree(send_);
  const coilResult_t freedRecv = coilMemFree(recv_);
  if (freedSend != coilSuccess || freedRecv != coilSuccess) {
    std::fprintf(stderr, "coil_perf: %s\n",
                 describeFailure(freedSend != coilSuccess ? freedSend : freedRecv, "coilMemFree",
                                 nullptr).c_str());
  }
  gpu::destroyStream(stream_);
  std::free(sendHost_);
  std::free(recvHost_);
}

void* RankBuffers::hostOf(const void* p) const {
  if (!device_) return const_cast<void*>(p);
  const auto* c = static_cast<const char*>(p);
  // Inside a buffer first: the device buffers may be adjacent, and then the
  // end of one is the start of the other.
  for (bool end : {false, true}) {
    if (within(p, send_, bytes_, end))
      return static_cast<char*>(sendHost_) + (c - static_cast<const char*>(send_));
    if (within(p, recv_, bytes_, end))
      return static_cast<char*>(recvHost_) + (c - static_cast<const char*>(recv_));
  }
  throw std::logic_error("coil_perf: a pointer outside the device buffers has no host mirror");
}

void RankBuffers::upload(size_t bytes) {
  if (!device_) return;
  bytes = std::min(bytes, bytes_);
  gpu::copyToDevice(send_, sendHost_, bytes, stream_);
  gpu::copyToDevice(recv_, recvHost_, bytes, stream_);
}

void RankBuffers::download(size_t bytes) {
  if (!device_) return;
  bytes = std::min(bytes, bytes_);
  gpu::copyToHost(sendHost_, send_, bytes, stream_);
  gpu::copyToHost(recvHost_, recv_, bytes, stream_);
}

void RankBuffers::sync() {
  if (device_) gpu::syncStream(stream_);
}

}  // namespace coil_perf
