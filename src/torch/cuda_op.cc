#include "cuda_op.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <exception>

#include "torch_compat.h"

namespace coil_torch {
namespace {

thread_local coilStream_t tOpStream = nullptr;

// Sets opStream() for a scope.
class OpStreamScope {
 public:
  explicit OpStreamScope(coilStream_t s) : saved_(tOpStream) { tOpStream = s; }
  ~OpStreamScope() { tOpStream = saved_; }
  OpStreamScope(const OpStreamScope&) = delete;
  OpStreamScope& operator=(const OpStreamScope&) = delete;

 private:
  coilStream_t saved_;
};

}  // namespace

coilStream_t opStream() { return tOpStream; }

c10::Stream SideStreams::forDevice(const c10::Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(device.index());
  if (it == streams_.end()) {
    c10::impl::VirtualGuardImpl impl(device.type());
    it = streams_.emplace(device.index(), impl.getStreamFromGlobalPool(device, false)).first;
  }
  return it->second;
}

CudaOp::CudaOp(const c10::Device& device, c10::Stream side)
    : device_(device), side_(side), inputsReady_(device.type()), done_(device.type()) {
  c10::impl::VirtualGuardImpl impl(device_.type());
  inputsReady_.record(impl.getStream(device_));
}

void CudaOp::recordInputsReady() {
  c10::impl::VirtualGuardImpl impl(device_.type());
  inputsReady_.record(impl.getStream(device_));
}

void CudaOp::run(const std::function<void()>& body, const std::vector<at::Tensor>& tensors) {
  c10::StreamGuard onSide(side_);  // the device too
  inputsReady_.block(side_);
  std::exception_ptr failed;
  {
    OpStreamScope scope(torch_compat::nativeHandle(side_));
    try {
      body();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  done_.record(side_);
  c10::impl::VirtualGuardImpl impl(device_.type());
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.device() == device_ && t.has_storage())
      impl.recordDataPtrOnStream(t.storage().data_ptr(), side_);
  if (failed) std::rethrow_exception(failed);
}

void CudaOp::onSideStream(const std::function<void()>& fn) const {
  c10::StreamGuard onSide(side_);
  fn();
}

void CudaOp::blockCurrentStream() {
  c10::impl::VirtualGuardImpl impl(device_.type());
  done_.block(impl.getStream(device_));
}

bool CudaOp::finished() const { return done_.query(); }

}  // namespace coil_torch
