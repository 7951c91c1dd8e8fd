// CoilBackend: joining, shutdown/abort, queueing, coalesced batches and
// point-to-point. The collectives are in collectives.cc.
#include "coil_backend.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <utility>

#include "coil_calls.h"
#include "tensor_args.h"

namespace coil_torch {
namespace {

std::exception_ptr closedError(const char* how) {
  try {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("coil backend: the operation was dropped: the process group was ",
                             how, " before it ran"));
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

CoilBackend::CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, const std::string& key,
                         const std::string& groupName)
    : c10d::Backend(rank, size), timeout_(timeout), groupName_(groupName) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "coil backend: rank ", rank,
              " is out of range for a group of ", size, " ranks");
  coilUniqueId id;
  if (rank == 0) {
    check(coilGetUniqueId(&id), "coilGetUniqueId");
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    // Blocks until rank 0 has set it, or the store's timeout passes.
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof id.internal, "coil backend: the unique id under store key '",
                key, "' has ", bytes.size(), " bytes, expected ", sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.timeoutMs = timeout.count();
  config.commName = groupName_.c_str();
  coilComm_t comm = nullptr;
  check(coilCommInitRankConfig(&comm, size, id, rank, &config), "coilCommInitRankConfig");
  comm_ = comm;
  p2p_ = std::make_unique<PointToPoint>(rank, size, CommRef(comm, aborting_));
  queue_ = std::make_unique<WorkQueue>([p2p = p2p_.get()] { p2p->flush(); });
  init();
}

CoilBackend::~CoilBackend() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown only throws on a broken invariant.
  }
}

c10::intrusive_ptr<c10d::Backend::Options> CoilBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("coil", timeout_);
  options->group_name = groupName_;
  return options;
}

uint64_t CoilBackend::getSequenceNumberForGroup() { return seq_; }

void CoilBackend::failCollectedBatch(const char* how) {
  // A batch still being collected never reaches the queue: fail its members
  // (the caller's endCoalescing then finds it empty).
  std::exception_ptr error = closedError(how);
  for (const BatchEntry& e : batch_) e.work->complete(error);
  batch_.clear();
}

void CoilBackend::shutdown() {
  std::lock_guard<std::mutex> lock(lifecycleMutex_);
  if (closed_) return;
  closed_ = true;
  failCollectedBatch("shut down");
  queue_->stop();  // what was queued still runs
  coilCommDestroy(comm_.exchange(nullptr));
}

void CoilBackend::abort() {
  std::lock_guard<std::mutex> lock(lifecycleMutex_);
  if (closed_) return;
  closed_ = true;
  failCollectedBatch("aborted");
  // Drop the queue first: once the comm is aborted, nothing may start on it.
  queue_->failPending(closedError("aborted"));
  aborting_->store(true);  // the running body starts no further coil call
  // Revoke, not abort: the call in progress returns with an error but the
  // handle stays valid, so a body between two coil calls cannot touch freed
  // memory. It is freed once the worker has returned.
  coilComm_t comm = comm_.exchange(nullptr);
  coilCommRevoke(comm);
  queue_->stop();
  coilCommDestroy(comm);
}

CommRef CoilBackend::commRef() const {
  coilComm_t c = comm_.load();
  TORCH_CHECK(c != nullptr, "coil backend: the process group has been shut down or aborted");
  return CommRef(c, aborting_);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::enqueue(c10d::OpType type,
                                                    std::vector<at::Tensor> outputs,
                                                    CoilWork::Body body) {
  if (coalescing_) {
    auto work = c10::make_intrusive<CoilWork>(rank_, type, seq_++, std::move(outputs), nullptr);
    BatchEntry e;
    e.work = work;
    e.body = std::move(body);
    batch_.push_back(std::move(e));
    return work;
  }
  auto work =
      c10::make_intrusive<CoilWork>(rank_, type, seq_++, std::move(outputs), std::move(body));
  queue_->push(work);
  return work;
}

void CoilBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "coil backend: startCoalescing called twice without endCoalescing");
  commRef();  // raises if shut down
  coalescing_ = true;
  batch_.clear();
}

c10::intrusive_ptr<c10d::Work> CoilBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "coil backend: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<BatchEntry> batch;
  batch.swap(batch_);
  if (batch.empty()) {
    // Nothing to run; torch also brackets abort() like this, so do not
    // insist on a live communicator.
    auto done = c10::make_intrusive<CoilWork>(rank_, c10d::OpType::COALESCED, seq_++,
                                              std::vector<at::Tensor>{}, nullptr);
    done->complete(nullptr);
    return done;
  }
  if (comm_.load() == nullptr) {  // shut down or aborted while collecting: nothing may run
    std::exception_ptr error = closedError("shut down or aborted");
    for (const BatchEntry& e : batch) e.work->complete(error);
    std::rethrow_exception(error);
  }
  commRef();  // raises if shut down
  std::vector<at::Tensor> outputs;
  for (const BatchEntry& e : batch)
    for (const at::Tensor& t : e.work->result()) outputs.push_back(t);
  // Sends and receives are posted to p2p_ and run together, as one coil
  // group (any order completes), before the next other operation and at the
  // end; other operations run one by one, in order. Each member work
  // completes as soon as its part has run; after an error every member not
  // yet completed gets it too.
  auto body = [batch = std::move(batch), p2p = p2p_.get()]() {
    size_t next = 0;  // first member not yet posted or completed
    try {
      for (; next < batch.size(); ++next) {
        const BatchEntry& e = batch[next];
        if (e.isP2p) {
          p2p->post(e.work, e.isSend, e.tensor, e.peer, e.tag);
          continue;
        }
        if (std::exception_ptr error = p2p->flush()) std::rethrow_exception(error);
        if (e.body) e.body();
        e.work->complete(nullptr);
      }
      if (std::exception_ptr error = p2p->flush()) std::rethrow_exception(error);
    } catch (...) {
      for (size_t i = next; i < batch.size(); ++i) batch[i].work->complete(std::current_exception());
      throw;
    }
  };
  auto work = c10::make_intrusive<CoilWork>(rank_, c10d::OpType::COALESCED, seq_++,
                                            std::move(outputs), std::move(body));
  queue_->push(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::enqueuePointToPoint(bool isSend,
                                                                const at::Tensor& tensor,
                                                                int peer, int tag) {
  const char* name = isSend ? "send" : "recv";
  checkCpuTensor(tensor, name);
  checkRank(peer, size_, name, isSend ? "destination rank" : "source rank");
  const c10d::OpType type = isSend ? c10d::OpType::SEND : c10d::OpType::RECV;
  if (coalescing_) {
    auto work = c10::make_intrusive<CoilWork>(rank_, type, seq_++,
                                              std::vector<at::Tensor>{tensor}, nullptr);
    BatchEntry e;
    e.work = work;
    e.isP2p = true;
    e.isSend = isSend;
    e.tensor = tensor;
    e.peer = peer;
    e.tag = tag;
    batch_.push_back(std::move(e));
    return work;
  }
  commRef();  // raises if shut down
  auto work =
      c10::make_intrusive<CoilWork>(rank_, type, seq_++, std::vector<at::Tensor>{tensor}, nullptr);
  // Posted when its turn on the worker comes; runs when someone waits on it
  // (or on another posted one), or before the next other operation.
  work->setPosted(
      [p2p = p2p_.get(), isSend, tensor, peer, tag](const c10::intrusive_ptr<CoilWork>& self) {
        p2p->post(self, isSend, tensor, peer, tag);
      },
      queue_->flushRequester());
  queue_->push(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int tag) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: send takes one tensor, got ", tensors.size());
  return enqueuePointToPoint(true, tensors[0], dstRank, tag);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int tag) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: recv takes one tensor, got ", tensors.size());
  return enqueuePointToPoint(false, tensors[0], srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::barrier(const c10d::BarrierOptions& /*opts*/) {
  CommRef c = commRef();
  // Queued like everything else, so it also waits for this rank's earlier work.
  return enqueue(c10d::OpType::BARRIER, {}, [c] { check(coilBarrier(c.get(), nullptr), "coilBarrier"); });
}

}  // namespace coil_torch
