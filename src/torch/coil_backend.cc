// CoilBackend: joining, shutdown/abort, queueing, coalesced batches and
// point-to-point. The collectives are in collectives.cc.
#include "coil_backend.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "coil_calls.h"
#include "store_join.h"
#include "tensor_args.h"
#include "torch_compat.h"

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

// The members coil_backend.h declares without `override`: where this
// torch's c10d::Backend declares one, its signature must be ours, or ours
// would sit beside it instead of overriding it.
template <class Base>
constexpr bool overridesWhereTorchHasThem() {
  using Options = c10::intrusive_ptr<c10d::Backend::Options>;
  using Split = c10::intrusive_ptr<c10d::Backend> (Base::*)(
      const c10::intrusive_ptr<c10d::Store>&, const std::vector<int>&, const Options&);
  return (!requires { &Base::shutdown; } ||
          requires { static_cast<void (Base::*)()>(&Base::shutdown); }) &&
         (!requires { &Base::abort; } ||
          requires { static_cast<void (Base::*)()>(&Base::abort); }) &&
         (!requires { &Base::getBackendOptions; } ||
          requires { static_cast<Options (Base::*)()>(&Base::getBackendOptions); }) &&
         (!requires { &Base::supportsCoalescing; } ||
          requires { static_cast<bool (Base::*)() const>(&Base::supportsCoalescing); }) &&
         (!requires { &Base::split; } || requires { static_cast<Split>(&Base::split); });
}
static_assert(overridesWhereTorchHasThem<c10d::Backend>(),
              "c10d::Backend declares shutdown, abort, getBackendOptions, supportsCoalescing or "
              "split with another signature than CoilBackend's (coil_backend.h)");

}  // namespace

CoilBackend::CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, const std::string& key,
                         const std::string& groupName, bool defaultGroup)
    : CoilBackend(store, rank, size, timeout, groupName,
                  joinThroughStore(*store, rank, size, timeout, key, groupName)) {
  if (defaultGroup) job_ = JobConnectors::start(store, storeKey_);
}

CoilBackend::CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, const std::string& groupName,
                         JoinedComm joined)
    : CoilBackend(store, rank, size, timeout, joined.storeKey, groupName, joined.comm) {}

CoilBackend::CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, const std::string& key,
                         const std::string& groupName, coilComm_t comm)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      groupName_(groupName),
      store_(store),
      storeKey_(key) {
  comm_ = comm;
  try {
    p2p_ = std::make_unique<PointToPoint>(rank, size, store, key + "/p2p", groupName_, timeout);
  } catch (...) {
    coilCommDestroy(comm_.exchange(nullptr));  // no destructor runs for a throwing constructor
    throw;
  }
  queue_ = std::make_unique<WorkQueue>();
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
  torch_compat::setGroupName(*options, groupName_);
  return options;
}

uint64_t CoilBackend::getSequenceNumberForGroup() { return seq_; }

void CoilBackend::failCollectedBatch(const char* how) {
  // A batch still being collected never reaches the queue: fail its members
  // (the caller's endCoalescing then finds it empty).
  std::exception_ptr error = closedError(how);
  for (const BatchEntry& e : batch_) {
    e.work->setInOpenBatch(false);
    e.work->complete(error);
  }
  batch_.clear();
  batchCuda_ = nullptr;
}

void CoilBackend::forsakeInForkedChild() {
  // The lock may have been held by a parent's thread at the fork: not taken.
  if (closed_) return;
  closed_ = true;
  batch_.clear();
  // Each owns a thread of the parent's; destroying one would join it.
  (void)queue_.release();
  (void)p2p_.release();
  new std::shared_ptr<CompletionPool>(std::move(completions_));
  new std::shared_ptr<JobConnectors>(std::move(job_));
  coilCommDestroy(comm_.exchange(nullptr));  // in a forked child: only forgets the handle
}

void CoilBackend::shutdown() {
  if (inForkedChild()) return forsakeInForkedChild();
  std::lock_guard<std::mutex> lock(lifecycleMutex_);
  if (closed_) return;
  closed_ = true;
  failCollectedBatch("shut down");
  queue_->stop();  // what was queued still runs
  p2p_->close(true);  // queued sends still go out
  // The store's host (rank 0 when launched by hand or by mp.spawn) leaves
  // after every connector of the job.
  if (job_ && rank_ == 0) job_->waitForOthers(kConnectorsGrace);
  JobConnectors::finish(std::exchange(job_, nullptr));
  completions_->stop();
  coilCommDestroy(comm_.exchange(nullptr));
}

void CoilBackend::abort() {
  if (inForkedChild()) return forsakeInForkedChild();
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
  p2p_->close(false);
  JobConnectors::finish(std::exchange(job_, nullptr));
  queue_->stop();
  completions_->stop();
  coilCommDestroy(comm);
}

CommRef CoilBackend::commRef() const {
  TORCH_CHECK(!inForkedChild(), "coil backend: this process (pid ", ::getpid(),
              ") is a fork() child of the process that made the process group (pid ",
              ownerPid_, "): it inherited the group but none of its threads or connections, "
              "so it cannot run collectives or point-to-point operations on it; make a new "
              "process group in the child (or run these calls in the parent)");
  coilComm_t c = comm_.load();
  TORCH_CHECK(c != nullptr, "coil backend: the process group has been shut down or aborted");
  return CommRef(c, aborting_);
}

c10::intrusive_ptr<CoilWork> CoilBackend::newWork(c10d::OpType type,
                                                  std::vector<at::Tensor> outputs,
                                                  CoilWork::Body body) {
  return c10::make_intrusive<CoilWork>(rank_, type, seq_++, std::move(outputs), std::move(body),
                                       completions_);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::enqueue(c10d::OpType type,
                                                    std::vector<at::Tensor> outputs,
                                                    CoilWork::Body body,
                                                    std::vector<at::Tensor> inputs) {
  // The device of the work: the first CUDA tensor's, else the host.
  const at::Tensor* first = nullptr;
  for (const auto* list : {&outputs, &inputs})
    for (const at::Tensor& t : *list)
      if (first == nullptr && t.defined() && t.is_cuda()) first = &t;
  if (first) {
    for (const auto* list : {&outputs, &inputs})
      for (const at::Tensor& t : *list)
        TORCH_CHECK(!t.defined() || t.device() == first->device(), "coil backend: ",
                    c10d::opTypeToString(type), ": all tensors must be on one device, got ",
                    first->device().str(), " and ", t.device().str());
    const c10::Device device = first->device();
    if (coalescing_)
      return collectCudaCollective(type, std::move(outputs), std::move(body), std::move(inputs),
                                   device);
    auto work = newWork(type, std::move(outputs), std::move(body));
    work->setCudaOp(std::make_shared<CudaOp>(device, sideStreams_.forDevice(device)),
                    std::move(inputs));
    queue_->push(work);
    return work;
  }
  if (coalescing_) {
    TORCH_CHECK(!batchCuda_, "coil backend: ", c10d::opTypeToString(type), ": CPU and CUDA "
                "collectives in one coalesced batch are not supported; end the batch between them");
    BatchEntry e;
    e.work = newWork(type, std::move(outputs), nullptr);
    e.body = std::move(body);
    return addToBatch(std::move(e));
  }
  auto work =
      newWork(type, std::move(outputs), std::move(body));
  queue_->push(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::collectCudaCollective(
    c10d::OpType type, std::vector<at::Tensor> outputs, CoilWork::Body body,
    std::vector<at::Tensor> inputs, const c10::Device& device) {
  const std::string op = c10d::opTypeToString(type);
  for (const BatchEntry& e : batch_) {
    TORCH_CHECK(!e.isP2p || !e.tensor.is_cuda(), "coil backend: ", op, ": CUDA collectives and "
                "CUDA sends or receives in one coalesced batch are not supported; end the batch "
                "between them");
    TORCH_CHECK(e.isP2p || batchCuda_, "coil backend: ", op, ": CPU and CUDA collectives in one "
                "coalesced batch are not supported; end the batch between them");
  }
  if (!batchCuda_) {
    batchCuda_ = std::make_shared<CudaOp>(device, sideStreams_.forDevice(device));
  } else {
    TORCH_CHECK(batchCuda_->device() == device, "coil backend: ", op, ": the CUDA collectives "
                "of one coalesced batch must be on one device, got ",
                batchCuda_->device().str(), " and ", device.str());
    batchCuda_->recordInputsReady();  // the batch runs after this call's inputs too
  }
  BatchEntry e;
  e.work = newWork(type, std::move(outputs), nullptr);
  e.work->setCudaOp(batchCuda_, {});
  e.body = std::move(body);
  e.inputs = std::move(inputs);
  return addToBatch(std::move(e));
}

c10::intrusive_ptr<CoilWork> CoilBackend::addToBatch(BatchEntry entry) {
  c10::intrusive_ptr<CoilWork> work = entry.work;
  work->setInOpenBatch(true);  // endCoalescing (or a shutdown) clears it
  batch_.push_back(std::move(entry));
  return work;
}

void CoilBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "coil backend: startCoalescing called twice without endCoalescing");
  commRef();  // raises if shut down
  coalescing_ = true;
  batch_.clear();
  batchCuda_ = nullptr;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "coil backend: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<BatchEntry> batch;
  batch.swap(batch_);
  std::shared_ptr<CudaOp> batchCuda = std::move(batchCuda_);
  batchCuda_ = nullptr;
  for (const BatchEntry& e : batch) e.work->setInOpenBatch(false);
  if (batch.empty()) {
    // Nothing to run; torch also brackets abort() like this, so do not
    // insist on a live communicator.
    auto done = newWork(c10d::OpType::COALESCED, std::vector<at::Tensor>{}, nullptr);
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
  // The batch's work completes once every member has: the sends and
  // receives, posted now (they progress on their own), and the other
  // operations, run in order as one work on the worker. Not waiting for the
  // sends and receives there keeps the worker free for later collectives
  // that a peer's matching send may come after.
  auto work = newWork(c10d::OpType::COALESCED, std::move(outputs), nullptr);
  size_t parts = 0;
  bool hasCollectives = false;
  for (const BatchEntry& e : batch) {
    if (e.isP2p) ++parts;
    else hasCollectives = true;
  }
  if (hasCollectives) ++parts;
  // With CUDA collectives, the batch's end is theirs (recorded on the side
  // stream after they ran). With CUDA sends or receives (all on one device,
  // postPointToPoint), it is recorded on their side stream after the last of
  // their copies there. Either way wait() makes the current stream wait.
  std::function<void()> recordEnd;
  auto cudaP2p = std::find_if(batch.begin(), batch.end(),
                              [](const BatchEntry& e) { return e.isP2p && e.tensor.is_cuda(); });
  if (batchCuda) {
    work->setCudaOp(batchCuda, {});
  } else if (cudaP2p != batch.end()) {
    const c10::Device device = cudaP2p->tensor.device();
    auto end = std::make_shared<CudaOp>(device, p2p_->sideStream(device));
    work->setCudaOp(end, {});
    recordEnd = [end] { end->run([] {}, {}); };
  }
  auto latch = std::make_shared<CompletionLatch>(work, parts, std::move(recordEnd));
  std::vector<BatchEntry> collectives;
  for (BatchEntry& e : batch) {
    if (!e.isP2p) {
      collectives.push_back(std::move(e));
      continue;
    }
    e.work->setOnComplete([latch](std::exception_ptr error) { latch->arrive(error); });
    if (e.isSend)
      p2p_->send(e.work, e.tensor, e.peer, e.tag);
    else
      p2p_->recv(e.work, e.tensor, e.peer, e.tag);
  }
  if (hasCollectives) {
    // The members complete once the part has, not as each body returns: a
    // CUDA member's wait() needs the part's end on the side stream, which
    // CudaOp::run records after the last body.
    std::vector<c10::intrusive_ptr<CoilWork>> members;
    std::vector<CoilWork::Body> bodies;
    std::vector<at::Tensor> touched;  // CUDA: marked as used on the side stream
    for (BatchEntry& e : collectives) {
      members.push_back(e.work);
      bodies.push_back(std::move(e.body));
      if (!batchCuda) continue;
      for (const at::Tensor& t : e.work->result()) touched.push_back(t);
      for (const at::Tensor& t : e.inputs) touched.push_back(t);
    }
    auto ran = std::make_shared<size_t>(0);  // bodies that returned
    auto part = newWork(c10d::OpType::COALESCED, {}, [bodies = std::move(bodies), ran]() {
      for (; *ran < bodies.size(); ++*ran)
        if (bodies[*ran]) bodies[*ran]();
    });
    if (batchCuda) part->setCudaOp(batchCuda, std::move(touched));
    part->setOnComplete(
        [latch, members = std::move(members), ran](std::exception_ptr error) {
          for (size_t i = 0; i < members.size(); ++i)
            members[i]->complete(i < *ran ? nullptr : error);
          latch->arrive(error);
        });
    queue_->push(part);
  }
  return work;
}

c10::intrusive_ptr<CoilWork> CoilBackend::newPointToPointWork(c10d::OpType type,
                                                              const at::Tensor& tensor) {
  auto work = newWork(type, std::vector<at::Tensor>{tensor}, nullptr);
  if (tensor.is_cuda())
    work->setCudaOp(std::make_shared<CudaOp>(tensor.device(), p2p_->sideStream(tensor.device())),
                    {});
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::postPointToPoint(bool isSend,
                                                                const at::Tensor& tensor,
                                                                int peer, int tag) {
  const char* name = isSend ? "send" : "recv";
  checkDenseTensor(tensor, name);
  checkRank(peer, size_, name, isSend ? "destination rank" : "source rank");
  const c10d::OpType type = isSend ? c10d::OpType::SEND : c10d::OpType::RECV;
  if (coalescing_) {
    TORCH_CHECK(!tensor.is_cuda() || !batchCuda_, "coil backend: ", name, ": CUDA collectives "
                "and CUDA sends or receives in one coalesced batch are not supported; end the "
                "batch between them");
    for (const BatchEntry& e : batch_)
      TORCH_CHECK(!e.isP2p || !tensor.is_cuda() || !e.tensor.is_cuda() ||
                      e.tensor.device() == tensor.device(),
                  "coil backend: ", name, ": the CUDA tensors of one batch of sends and "
                  "receives must be on one device, got ", e.tensor.device().str(), " and ",
                  tensor.device().str());
    BatchEntry e;
    e.work = newPointToPointWork(type, tensor);
    e.isP2p = true;
    e.isSend = isSend;
    e.tensor = tensor;
    e.peer = peer;
    e.tag = tag;
    return addToBatch(std::move(e));
  }
  commRef();  // raises if shut down
  auto work = newPointToPointWork(type, tensor);
  if (isSend)
    p2p_->send(work, tensor, peer, tag);
  else
    p2p_->recv(work, tensor, peer, tag);
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int tag) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: send takes one tensor, got ", tensors.size());
  return postPointToPoint(true, tensors[0], dstRank, tag);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int tag) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: recv takes one tensor, got ", tensors.size());
  return postPointToPoint(false, tensors[0], srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> CoilBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  TORCH_CHECK(tensors.size() == 1, "coil backend: recv takes one tensor, got ", tensors.size());
  checkDenseTensor(tensors[0], "recv");
  TORCH_CHECK(!coalescing_, "coil backend: recv from any source cannot be part of a batch");
  commRef();  // raises if shut down
  auto work = newPointToPointWork(c10d::OpType::RECVANYSOURCE, tensors[0]);
  p2p_->recv(work, tensors[0], kAnySource, tag);
  return work;
}

c10::intrusive_ptr<c10d::Work> CoilBackend::barrier(const c10d::BarrierOptions& /*opts*/) {
  CommRef c = commRef();
  // Queued like everything else, so it also waits for this rank's earlier work.
  return enqueue(c10d::OpType::BARRIER, {}, [c] { check(coilBarrier(c.get(), nullptr), "coilBarrier"); });
}

}  // namespace coil_torch
