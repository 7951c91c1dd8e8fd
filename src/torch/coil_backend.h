// coil as a c10d backend: torch.distributed.init_process_group("coil").
//
// One CoilBackend owns one coil communicator and one worker thread. Each
// collective validates its arguments on the caller's thread (a bad argument
// raises there), then queues a CoilWork whose body makes the coil call(s)
// with host pointers. Results reach the caller through Work::wait() or the
// work's Future, like gloo's.
#pragma once

#include <unistd.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coil.h"
#include "coil_calls.h"
#include "job_connectors.h"
#include "p2p.h"
#include "store_join.h"
#include "work_queue.h"

namespace coil_torch {

class CoilBackend : public c10d::Backend {
 public:
  /// Joins the communicator of `size` ranks: rank 0 makes a coil unique id
  /// and puts it in `store` under `key`; the others wait for it there
  /// (store_join.h). Every wait in coil (init included) gives up after
  /// `timeout`. Throws c10::DistBackendError with coil's message when the
  /// join fails. The default group (`defaultGroup`) starts the job's
  /// JobConnectors, and its rank 0 waits for them at shutdown.
  CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, const std::string& key,
              const std::string& groupName, bool defaultGroup);
  /// Adopts `comm`, a communicator of `size` ranks in which this is `rank`
  /// (split() makes it with coilCommSplit); `store` and `key` serve
  /// point-to-point and monitoredBarrier as above.
  CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, const std::string& key,
              const std::string& groupName, coilComm_t comm);
  /// Waits for queued work, then frees the communicator (as shutdown()).
  ~CoilBackend() override;

  const std::string getBackendName() const override { return "coil"; }
  // getBackendOptions, supportsCoalescing, split, shutdown and abort
  // override c10d::Backend's in the torch releases that have them (2.7 or
  // 2.9 and later, torch_compat.h) and are plain members before: declared
  // without `override`, so that one source builds against all of them
  // (coil_backend.cc checks their signatures where the base declares them).
  c10::intrusive_ptr<Options> getBackendOptions();
  bool supportsCoalescing() const { return true; }
  /// dist.split_group (split.cc): collective over this group, queued after
  /// its operations so far. The ranks listed (this group's ranks; the
  /// child's ranks in that order) form the child, with coilCommSplit; a
  /// rank not listed takes part and gets null (NON_GROUP_MEMBER). The child
  /// connects anew; its point-to-point meets under this group's store.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts);
  /// Every rank numbers the group's operations from 0 in the order it
  /// issues them, so the numbers agree without a handshake: nothing to set.
  /// (Torch 2.6 and older call it when TORCH_DISTRIBUTED_DEBUG=DETAIL wraps
  /// the group, and c10d::Backend's own raises there.)
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

  /// Lets queued work finish, stops the worker and destroys the
  /// communicator. Later calls raise. Idempotent.
  void shutdown();
  /// Aborts the communicator (a blocked call returns within ~100 ms; peers
  /// see an error), fails queued work, stops the worker. Idempotent.
  void abort();

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputTensorLists,
      std::vector<at::Tensor>& inputTensors, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  /// Messages match on (source, tag), in order within a tag; a receive from
  /// any source takes the earliest message with its tag. They are not
  /// queued on the worker: PointToPoint (p2p.h) moves each direction on its
  /// own, so isend/irecv complete in any order, at any size.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  /// gloo's debugging barrier (dist.monitored_barrier, coil_torch.monitored_barrier):
  /// rank 0 waits up to opts.timeout for every other rank to arrive and
  /// raises naming the first one that did not ("Rank 2 failed to pass
  /// monitoredBarrier in 1000 ms"), or all of them with waitAllRanks; the
  /// others wait for rank 0 to release them and raise if it does not. It
  /// runs on the caller's thread, through the store, so it works even when
  /// the communicator is stuck in a collective (what it exists to find).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  /// Between these, operations are collected instead of queued; endCoalescing
  /// posts the sends and receives and queues the rest as one work; the
  /// batch's work completes when all of them have.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 private:
  CoilBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, const std::string& groupName, JoinedComm joined);

  // An operation collected between startCoalescing and endCoalescing:
  // a send/receive (isP2p) or any other operation (body).
  struct BatchEntry {
    c10::intrusive_ptr<CoilWork> work;
    CoilWork::Body body;
    bool isP2p = false;
    bool isSend = false;
    at::Tensor tensor;
    int peer = -1;
    int tag = 0;
    std::vector<at::Tensor> inputs;  // a CUDA collective's, besides its outputs
  };

  /// A work of this backend, numbered, completed on completions_.
  c10::intrusive_ptr<CoilWork> newWork(c10d::OpType type, std::vector<at::Tensor> outputs,
                                       CoilWork::Body body);
  /// Queues `body` (or adds it to the open coalesced batch) as a work
  /// completing with `outputs`. `inputs`: the other tensors it reads. On
  /// CUDA tensors the work follows ProcessGroupNCCL's stream pattern
  /// (cuda_op.h); all of them must be on one device.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         CoilWork::Body body,
                                         std::vector<at::Tensor> inputs = {});
  /// enqueue() of CUDA tensors on `device` between startCoalescing and
  /// endCoalescing: the batch's collectives share one CudaOp (batchCuda_),
  /// whose inputs are ready where the current stream is at the last of them.
  c10::intrusive_ptr<c10d::Work> collectCudaCollective(c10d::OpType type,
                                                       std::vector<at::Tensor> outputs,
                                                       CoilWork::Body body,
                                                       std::vector<at::Tensor> inputs,
                                                       const c10::Device& device);
  c10::intrusive_ptr<c10d::Work> postPointToPoint(bool isSend, const at::Tensor& tensor,
                                                     int peer, int tag);
  /// allgather of one input into outputs of different sizes
  /// (uneven_all_gather.h).
  c10::intrusive_ptr<c10d::Work> allgatherUneven(std::vector<at::Tensor>& outputs,
                                                 const at::Tensor& input);
  /// Adds `entry` to the open batch, marking its work as in it (wait()
  /// then refuses until the batch ends); returns the work.
  c10::intrusive_ptr<CoilWork> addToBatch(BatchEntry entry);
  /// A send's or receive's work; on a CUDA tensor, with its CudaOp on the
  /// point-to-point side stream, made now (the current stream as it is at
  /// the call), as cuda_p2p.h describes.
  c10::intrusive_ptr<CoilWork> newPointToPointWork(c10d::OpType type, const at::Tensor& tensor);
  /// The communicator for a work body, or a c10::Error once shut down /
  /// aborted, or in a process forked from the one that made the group.
  CommRef commRef() const;
  /// True in a child forked after this backend was made (a data-loader
  /// worker): it has the backend's memory but none of its threads, so it
  /// may neither run work (nothing would ever run it) nor tear the backend
  /// down (joining the parent's threads would wait forever).
  bool inForkedChild() const { return ::getpid() != ownerPid_; }
  /// shutdown() and abort() in such a child: lets go of every part that
  /// owns a parent's thread, without touching it.
  void forsakeInForkedChild();
  /// Completes the members of an open coalesced batch with an error saying
  /// the group was `how` ("shut down", "aborted"), and empties it.
  void failCollectedBatch(const char* how);

  std::atomic<coilComm_t> comm_{nullptr};
  // Set by abort() when it revokes the comm; every body's CommRef shares it.
  std::shared_ptr<std::atomic<bool>> aborting_ = std::make_shared<std::atomic<bool>>(false);
  std::chrono::milliseconds timeout_;
  std::string groupName_;
  c10::intrusive_ptr<c10d::Store> store_;  // the group's; monitoredBarrier's keys
  std::string storeKey_;                   // this backend's prefix in store_
  std::atomic<uint64_t> monitoredBarriers_{0};
  std::atomic<uint64_t> splits_{0};  // split() calls: the children's store keys
  c10::intrusive_ptr<c10d::Store> lastNoColorSplit_;  // split.cc says why
  std::atomic<uint64_t> seq_{0};  // operations issued, for the work objects

  bool coalescing_ = false;
  std::vector<BatchEntry> batch_;
  std::shared_ptr<CudaOp> batchCuda_;  // the open batch's CUDA collectives', if any

  const pid_t ownerPid_ = ::getpid();  // the process that made this backend
  std::mutex lifecycleMutex_;  // shutdown vs abort
  bool closed_ = false;
  // Before queue_: the worker hands completions to it, so it must outlive it.
  std::shared_ptr<CompletionPool> completions_ = std::make_shared<CompletionPool>();
  std::unique_ptr<PointToPoint> p2p_;
  // The job's connectors, when this is the default group (rank 0 waits for
  // them at shutdown); null otherwise, and after shutdown or abort.
  std::shared_ptr<JobConnectors> job_;
  SideStreams sideStreams_;  // CUDA works' streams, one per device
  std::unique_ptr<WorkQueue> queue_;
};

}  // namespace coil_torch
