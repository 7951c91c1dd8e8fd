// device.h for a build without the CUDA toolkit: no pointer is device
// memory, and whatever needs a device says the build has none.
#include "core/error.h"
#include "device/device.h"
#include "device/device_reduce.h"

namespace coil::device {
namespace {

constexpr const char* kReason = "this coil was built without CUDA (meson -Dcuda was disabled, or found no nvcc)";

[[noreturn]] void noCuda(const char* what) { fail(coilInvalidUsage, what, ": ", kReason); }

}  // namespace

bool available() { return false; }
std::string unavailableReason() { return kReason; }
std::string buildDescription() { return "built without CUDA"; }
MemKind kindOf(const void*) { return MemKind::kHost; }
int currentDevice() { noCuda("currentDevice"); }
void setDevice(int) { noCuda("setDevice"); }
int deviceCount() { return 0; }
Uuid uuidOf(int) { noCuda("uuidOf"); }
void* allocDevice(size_t) { noCuda("allocDevice"); }
void freeDevice(void*) noexcept {}
void* allocPinned(size_t) { noCuda("allocPinned"); }
void freePinned(void*) noexcept {}
Stream createStream() { noCuda("createStream"); }
void destroyStream(Stream) noexcept {}
void copyAsync(void*, const void*, size_t, Stream) { noCuda("copyAsync"); }
Event createEvent() { noCuda("createEvent"); }
void destroyEvent(Event) noexcept {}
void recordEvent(Event, Stream) { noCuda("recordEvent"); }
void waitEvent(Stream, Event) { noCuda("waitEvent"); }
void syncEvent(Event) { noCuda("syncEvent"); }
void syncStream(Stream) { noCuda("syncStream"); }
void waitWord(Stream, const volatile uint32_t*, uint32_t) { noCuda("waitWord"); }
std::string sharedMemoryUnsupported() { return kReason; }
SharedMemory allocShared(size_t) { noCuda("allocShared"); }
OwnedFd exportShared(const SharedMemory&) { noCuda("exportShared"); }
SharedMemory importShared(int, size_t) { noCuda("importShared"); }
SharedMemory allocIpc(size_t) { noCuda("allocIpc"); }
IpcHandle ipcHandleOf(const SharedMemory&) { noCuda("ipcHandleOf"); }
SharedMemory openIpc(const IpcHandle&, size_t) { noCuda("openIpc"); }
IpcRange ipcRangeOf(const void*, size_t) { noCuda("ipcRangeOf"); }
void freeShared(SharedMemory& memory) noexcept { memory = SharedMemory{}; }
void reduceAsync(void*, const void*, const void*, size_t, coilDataType_t, coilRedOp_t, void*) {
  noCuda("reduceAsync");
}
void reduceChainAsync(void*, const void* const*, int, size_t, coilDataType_t, coilRedOp_t, void*) {
  noCuda("reduceChainAsync");
}
void divideAsync(void*, const void*, size_t, coilDataType_t, int, void*) { noCuda("divideAsync"); }
void loadReductionKernels() { noCuda("loadReductionKernels"); }

}  // namespace coil::device
