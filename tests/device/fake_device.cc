#include "tests/device/fake_device.h"

#include <atomic>
#include <condition_variable>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <map>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "device/device_reduce.h"
#include "reduce/reduce.h"

namespace coil::device {
namespace {

// The waits on a word that streams are blocked in right now. An allocation
// counts against the rule only while one of them is still unreleased (a
// wait whose word has just reached its ticket is about to end).
struct BlockedWait {
  const volatile uint32_t* word;
  uint32_t ticket;
};
std::mutex gWaitsMutex;
std::vector<BlockedWait> gWaits;
std::atomic<int> gAllocWhileWaiting{0};  // allocations/frees made while one was unreleased

bool released(const BlockedWait& w) {
  return static_cast<int32_t>(__atomic_load_n(w.word, __ATOMIC_ACQUIRE) - w.ticket) >= 0;
}

// allocDevice's blocks by their first byte: memfd segments, so that a
// block can be exported for legacy IPC (ipcRangeOf) as cudaMalloc's can.
struct DeviceBlock {
  size_t bytes;  // mapped (whole pages)
  int fd;        // the segment's descriptor, kept for exporting
};
std::mutex gDeviceMutex;
std::map<const void*, DeviceBlock> gDeviceBlocks;

// The block that holds `ptr`, or end().
std::map<const void*, DeviceBlock>::const_iterator blockHolding(const void* ptr) {
  auto it = gDeviceBlocks.upper_bound(ptr);
  if (it == gDeviceBlocks.begin()) return gDeviceBlocks.end();
  --it;
  const auto* start = static_cast<const uint8_t*>(it->first);
  return static_cast<const uint8_t*>(ptr) < start + it->second.bytes ? it : gDeviceBlocks.end();
}

void noteAllocation() {
  std::lock_guard<std::mutex> lock(gWaitsMutex);
  for (const BlockedWait& w : gWaits)
    if (!released(w)) {
      ++gAllocWhileWaiting;
      return;
    }
}

struct FakeEvent {
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0, reached = 0;  // generation recorded / generation its stream passed
};

// One of the device's hardware queues: it runs the operations pushed to it
// in order, whichever streams they belong to. A real device has
// CUDA_DEVICE_MAX_CONNECTIONS of them and spreads its streams over them;
// by default each fake stream gets a queue of its own (no sharing), and
// fake::shareHardwareQueues(n) makes the streams created after it share n.
class HardwareQueue {
 public:
  HardwareQueue() : thread_([this] { loop(); }) {}
  ~HardwareQueue() {
    push(nullptr);
    thread_.join();
  }
  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(m_);
      ops_.push_back(std::move(op));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return !ops_.empty(); });
        op = std::move(ops_.front());
        ops_.pop_front();
      }
      if (!op) return;
      op();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  std::thread thread_;
};

std::mutex gQueuesMutex;
int gSharedQueueCount = 0;                  // 0: every stream has its own queue
std::vector<HardwareQueue*> gSharedQueues;  // never destroyed: streams may outlive a test
size_t gNextSharedQueue = 0;

class FakeStream {
 public:
  FakeStream() {
    std::lock_guard<std::mutex> lock(gQueuesMutex);
    if (gSharedQueueCount == 0) {
      own_ = std::make_unique<HardwareQueue>();
      queue_ = own_.get();
    } else {
      while (gSharedQueues.size() < static_cast<size_t>(gSharedQueueCount))
        gSharedQueues.push_back(new HardwareQueue());
      queue_ = gSharedQueues[gNextSharedQueue++ % static_cast<size_t>(gSharedQueueCount)];
    }
  }
  ~FakeStream() { sync(); }  // its operations may still sit in a shared queue
  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(m_);
      ++pushed_;
    }
    queue_->push([this, op = std::move(op)] {
      op();
      {
        std::lock_guard<std::mutex> lock(m_);
        ++done_;
      }
      cv_.notify_all();
    });
  }
  void sync() {
    std::unique_lock<std::mutex> lock(m_);
    const uint64_t target = pushed_;
    cv_.wait(lock, [&] { return done_ >= target; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t pushed_ = 0, done_ = 0;
  std::unique_ptr<HardwareQueue> own_;
  HardwareQueue* queue_ = nullptr;
};

// The legacy default stream (a null Stream), made on first use.
FakeStream& defaultStream() {
  static FakeStream* s = new FakeStream();  // never destroyed: threads may still use it at exit
  return *s;
}

FakeStream& streamOf(Stream s) { return s ? *static_cast<FakeStream*>(s) : defaultStream(); }

// A free synchronises with the device, as cudaFree and cudaFreeHost do: it
// lets the waits that are released but not yet over finish first (one of
// them may read the memory being freed). An unreleased wait would make a
// real free wait forever; noteAllocation has counted it, and this returns.
void synchroniseForFree() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(gWaitsMutex);
      bool pending = false;
      for (const BlockedWait& w : gWaits) pending = pending || released(w);
      if (!pending) return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// CUDA's rule for legacy IPC: an allocation that another process opened
// (cudaIpcOpenMemHandle) must not be freed before that process closed it
// (cudaIpcCloseMemHandle), or the result is undefined. An opening process
// holds a shared flock on the segment (openIpc) until it closes it, so
// the exporter's free sees whether one still does.
std::atomic<int> gFreedWhileOpened{0};

void noteFreeOfExported(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) ++gFreedWhileOpened;
}

}  // namespace

bool available() { return true; }
std::string unavailableReason() { return {}; }
std::string buildDescription() { return "fake device (tests/device/fake_device.cc)"; }

MemKind kindOf(const void* ptr) {
  std::lock_guard<std::mutex> lock(gDeviceMutex);
  return blockHolding(ptr) != gDeviceBlocks.end() ? MemKind::kDevice : MemKind::kHost;
}

int currentDevice() { return 0; }
void setDevice(int) {}
int deviceCount() { return 1; }
Uuid uuidOf(int) {  // one GPU: every rank of every process shares it
  Uuid uuid{};
  uuid.fill(0xFA);
  return uuid;
}

void* allocDevice(size_t bytes) {
  noteAllocation();
  const size_t size = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  const int fd = memfd_create("coil-fake-device", MFD_CLOEXEC);
  void* p = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0)
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    fail(coilSystemError, "allocDevice: memfd: ", std::strerror(err));
  }
  std::lock_guard<std::mutex> lock(gDeviceMutex);
  gDeviceBlocks[p] = {size, fd};  // the descriptor stays open for ipcRangeOf's handles
  return p;
}

void freeDevice(void* ptr) noexcept {
  if (!ptr) return;
  noteAllocation();
  synchroniseForFree();
  DeviceBlock block{};
  {
    std::lock_guard<std::mutex> lock(gDeviceMutex);
    auto it = gDeviceBlocks.find(ptr);
    if (it == gDeviceBlocks.end()) return;
    block = it->second;
    gDeviceBlocks.erase(it);
  }
  noteFreeOfExported(block.fd);
  munmap(ptr, block.bytes);
  ::close(block.fd);
}

void* allocPinned(size_t bytes) {
  noteAllocation();
  return std::calloc(1, bytes > 0 ? bytes : 1);
}

void freePinned(void* ptr) noexcept {
  if (!ptr) return;
  noteAllocation();
  synchroniseForFree();
  std::free(ptr);
}

Stream createStream() { return new FakeStream(); }
void destroyStream(Stream stream) noexcept { delete static_cast<FakeStream*>(stream); }

void copyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  streamOf(stream).push([=] { std::memcpy(dst, src, bytes); });
}

Event createEvent() { return new FakeEvent(); }
void destroyEvent(Event event) noexcept { delete static_cast<FakeEvent*>(event); }

void recordEvent(Event event, Stream stream) {
  auto* e = static_cast<FakeEvent*>(event);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->m);
    generation = ++e->recorded;
  }
  streamOf(stream).push([e, generation] {
    {
      std::lock_guard<std::mutex> lock(e->m);
      e->reached = std::max(e->reached, generation);
    }
    e->cv.notify_all();
  });
}

void waitEvent(Stream stream, Event event) {
  auto* e = static_cast<FakeEvent*>(event);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->m);
    generation = e->recorded;  // the latest record now, as cudaStreamWaitEvent
  }
  streamOf(stream).push([e, generation] {
    std::unique_lock<std::mutex> lock(e->m);
    e->cv.wait(lock, [&] { return e->reached >= generation; });
  });
}

void syncEvent(Event event) {
  auto* e = static_cast<FakeEvent*>(event);
  std::unique_lock<std::mutex> lock(e->m);
  const uint64_t target = e->recorded;
  e->cv.wait(lock, [&] { return e->reached >= target; });
}

void syncStream(Stream stream) { streamOf(stream).sync(); }

void waitWord(Stream stream, const volatile uint32_t* word, uint32_t ticket) {
  streamOf(stream).push([word, ticket] {
    const BlockedWait me{word, ticket};
    {
      std::lock_guard<std::mutex> lock(gWaitsMutex);
      gWaits.push_back(me);
    }
    while (!released(me)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::lock_guard<std::mutex> lock(gWaitsMutex);
    for (auto it = gWaits.begin(); it != gWaits.end(); ++it)
      if (it->word == word && it->ticket == ticket) {
        gWaits.erase(it);
        break;
      }
  });
}

// Shared memory: a memfd segment, mapped by whoever holds its descriptor
// (other processes too, after fd passing), as cuMem's POSIX handles are.
// A legacy IPC handle names the exporting process and its descriptor of
// the segment, opened through /proc as cudaIpcOpenMemHandle opens another
// process's allocation; like it, it refuses the exporting process itself.
std::string gSharedMemoryRefusal;  // fake::refuseSharedMemory
std::string gIpcRefusal;           // fake::refuseIpc
std::string gImportFailure;        // fake::failImports
std::string sharedMemoryUnsupported() { return gSharedMemoryRefusal; }

SharedMemory mapSegment(int fd, size_t bytes, SharedMemory::Kind kind, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail(coilSystemError, what, ": mmap: ", std::strerror(errno));
  return {p, bytes, ~uint64_t{0}, kind};
}

SharedMemory newSegment(size_t bytes, SharedMemory::Kind kind, const char* what) {
  noteAllocation();
  const size_t size = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  OwnedFd fd(memfd_create("coil-fake-shared", MFD_CLOEXEC));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    fail(coilSystemError, what, ": memfd: ", std::strerror(errno));
  SharedMemory m = mapSegment(fd.get(), size, kind, what);
  m.handle = static_cast<uint64_t>(dup(fd.get()));  // kept for exporting
  return m;
}

SharedMemory allocShared(size_t bytes) {
  return newSegment(bytes, SharedMemory::Kind::kCuMem, "allocShared");
}

OwnedFd exportShared(const SharedMemory& memory) {
  return OwnedFd(fcntl(static_cast<int>(memory.handle), F_DUPFD_CLOEXEC, 0));
}

SharedMemory importShared(int fd, size_t bytes) {
  if (!gImportFailure.empty()) fail(coilUnhandledCudaError, gImportFailure);
  return mapSegment(fd, bytes, SharedMemory::Kind::kCuMem, "importShared");
}

struct FakeIpcHandle {
  char magic[8];
  int32_t pid;
  int32_t fd;
};
static_assert(sizeof(FakeIpcHandle) <= sizeof(IpcHandle::bytes));

SharedMemory allocIpc(size_t bytes) {
  if (!gIpcRefusal.empty()) fail(coilUnhandledCudaError, "cudaMalloc (legacy IPC): ", gIpcRefusal);
  return newSegment(bytes, SharedMemory::Kind::kIpcOwn, "allocIpc");
}

// The handle of this process's segment behind descriptor `fd`.
IpcHandle handleOfSegment(int fd) {
  const FakeIpcHandle h{{'c', 'o', 'i', 'l', 'f', 'a', 'k', 'e'}, static_cast<int32_t>(getpid()),
                        static_cast<int32_t>(fd)};
  IpcHandle out;
  std::memcpy(out.bytes.data(), &h, sizeof h);
  return out;
}

IpcHandle ipcHandleOf(const SharedMemory& memory) {
  return handleOfSegment(static_cast<int>(memory.handle));
}

std::string gIpcOpenFailure;  // fake::failIpcOpens

SharedMemory openIpc(const IpcHandle& handle, size_t bytes) {
  if (!gIpcOpenFailure.empty()) fail(coilUnhandledCudaError, "cudaIpcOpenMemHandle: ", gIpcOpenFailure);
  FakeIpcHandle h;
  std::memcpy(&h, handle.bytes.data(), sizeof h);
  if (std::memcmp(h.magic, "coilfake", 8) != 0)
    fail(coilUnhandledCudaError, "cudaIpcOpenMemHandle: not a handle of the fake device");
  if (h.pid == getpid())
    fail(coilUnhandledCudaError,
         "cudaIpcOpenMemHandle: the handle was made by this process (CUDA refuses that too)");
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  OwnedFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid())
    fail(coilUnhandledCudaError, "cudaIpcOpenMemHandle: ", path, ": ", std::strerror(errno));
  if (flock(fd.get(), LOCK_SH) != 0)  // held until freeShared closes the descriptor
    fail(coilSystemError, "openIpc: flock: ", std::strerror(errno));
  SharedMemory m = mapSegment(fd.get(), bytes, SharedMemory::Kind::kIpcOpened, "openIpc");
  m.handle = static_cast<uint64_t>(dup(fd.get()));  // the same lock, kept until freeShared
  return m;
}

std::string gRangeRefusal;  // fake::refuseIpcRanges

IpcRange ipcRangeOf(const void* ptr, size_t bytes) {
  if (!gRangeRefusal.empty()) fail(coilUnhandledCudaError, "cudaIpcGetMemHandle: ", gRangeRefusal);
  std::lock_guard<std::mutex> lock(gDeviceMutex);
  auto it = blockHolding(ptr);
  if (it == gDeviceBlocks.end())
    fail(coilUnhandledCudaError, "cuMemGetAddressRange(", ptr, "): not device memory");
  IpcRange out;
  out.offset = static_cast<uint64_t>(static_cast<const uint8_t*>(ptr) -
                                     static_cast<const uint8_t*>(it->first));
  out.allocationBytes = it->second.bytes;
  if (out.offset + bytes > out.allocationBytes)
    fail(coilInvalidArgument, "[", ptr, ", +", bytes, " bytes) runs past the end of its allocation");
  out.handle = handleOfSegment(it->second.fd);
  return out;
}

std::chrono::milliseconds gCloseDelay{0};  // fake::delayCloses

void freeShared(SharedMemory& memory) noexcept {
  if (memory.kind == SharedMemory::Kind::kIpcOpened) std::this_thread::sleep_for(gCloseDelay);
  if (memory.kind == SharedMemory::Kind::kIpcOwn) noteFreeOfExported(static_cast<int>(memory.handle));
  if (memory.ptr != nullptr && memory.kind != SharedMemory::Kind::kBorrowed) {
    munmap(memory.ptr, memory.bytes);
    if (memory.handle != ~uint64_t{0}) ::close(static_cast<int>(memory.handle));
  }
  memory = SharedMemory{};
}

// The kernels, as the host's (bitwise what the GPU's must give).
void reduceAsync(void* dst, const void* a, const void* b, size_t count, coilDataType_t type,
                 coilRedOp_t op, void* stream) {
  const reduce::ReduceFn fn = reduce::kernel(type, op);
  streamOf(stream).push([=] { fn(dst, a, b, count); });
}

// The chain as its definition says: reduceAsync's pairs in order, into a
// buffer of its own, since dst may be a later source (which a GPU's one
// launch reads before it writes; the pairs in dst would not).
void reduceChainAsync(void* dst, const void* const* src, int n, size_t count, coilDataType_t type,
                      coilRedOp_t op, void* stream) {
  checkChainArguments(dst, src, n, "reduceChainAsync");
  const reduce::ReduceFn fn = reduce::kernel(type, op);
  const size_t bytes = count * reduce::typeSize(type);
  std::vector<const void*> sources(src, src + n);
  streamOf(stream).push([=] {
    std::vector<uint8_t> partial(bytes);
    fn(partial.data(), sources[0], sources[1], count);
    for (size_t q = 2; q < sources.size(); ++q) fn(partial.data(), partial.data(), sources[q], count);
    if (bytes > 0) std::memcpy(dst, partial.data(), bytes);
  });
}

void divideAsync(void* dst, const void* src, size_t count, coilDataType_t type, int divisor,
                 void* stream) {
  const reduce::DivideFn fn = reduce::divider(type);
  streamOf(stream).push([=] { fn(dst, src, count, divisor); });
}

// The fake's kernels are host functions: nothing loads lazily.
void loadReductionKernels() {}

namespace fake {

void enqueueHostWork(Stream stream, std::function<void()> fn) { streamOf(stream).push(std::move(fn)); }
int allocationsWhileWaiting() { return gAllocWhileWaiting.load(); }
int freesWhileOpenedElsewhere() { return gFreedWhileOpened.load(); }
void delayCloses(std::chrono::milliseconds delay) { gCloseDelay = delay; }
void resetCounters() {
  gAllocWhileWaiting = 0;
  gFreedWhileOpened = 0;
}
void refuseSharedMemory(const std::string& why) { gSharedMemoryRefusal = why; }
void refuseIpc(const std::string& why) { gIpcRefusal = why; }
void failImports(const std::string& why) { gImportFailure = why; }
void failIpcOpens(const std::string& why) { gIpcOpenFailure = why; }
void refuseIpcRanges(const std::string& why) { gRangeRefusal = why; }
void shareHardwareQueues(int n) {
  std::lock_guard<std::mutex> lock(gQueuesMutex);
  gSharedQueueCount = n;
  gNextSharedQueue = 0;
}

}  // namespace fake
}  // namespace coil::device
