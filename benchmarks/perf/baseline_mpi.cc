// The MPI half of coil_perf in builds with MPI (see baseline.h).
// The C API is all we use; skipping the deprecated C++ bindings also skips
// their headers' -Wcast-function-type warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "baseline.h"

namespace coil_perf {
namespace {

void mpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, length));
}

// MPI's name for each coil type; MPI_DATATYPE_NULL where MPI has none.
MPI_Datatype mpiType(coilDataType_t type) {
  switch (type) {
    case coilInt8: return MPI_INT8_T;
    case coilUint8: return MPI_UINT8_T;
    case coilInt32: return MPI_INT32_T;
    case coilUint32: return MPI_UINT32_T;
    case coilInt64: return MPI_INT64_T;
    case coilUint64: return MPI_UINT64_T;
    case coilFloat32: return MPI_FLOAT;
    case coilFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // fp16, bf16: no standard MPI type
  }
}

// An unsigned integer type `bytes` wide, for collectives that only copy.
MPI_Datatype copyType(size_t bytes) {
  switch (bytes) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

MPI_Op mpiOp(coilRedOp_t op) {
  switch (op) {
    case coilSum: return MPI_SUM;
    case coilProd: return MPI_PROD;
    case coilMax: return MPI_MAX;
    case coilBand: return MPI_BAND;
    case coilBor: return MPI_BOR;
    case coilBxor: return MPI_BXOR;
    case coilMin: return MPI_MIN;
    default: return MPI_OP_NULL;  // avg: MPI has no such operator
  }
}

class LinkedMpiWorld final : public MpiWorld {
 public:
  LinkedMpiWorld(int* argc, char*** argv) {
    mpiCheck(MPI_Init(argc, argv), "MPI_Init");
    // Errors come back as codes, so they become exceptions with a message.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~LinkedMpiWorld() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void broadcastFromRoot(void* data, size_t bytes) override {
    mpiCheck(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }

  const char* unsupported(const CollCall& call) const override {
    if (!collectiveInfo(call.coll).reduces) return nullptr;  // copies run as bytes
    if (mpiType(call.type.type) == MPI_DATATYPE_NULL) return "MPI has no standard fp16/bf16 type";
    if (mpiOp(call.op) == MPI_OP_NULL) return "MPI has no avg operator";
    return nullptr;
  }

  double timeCollective(const CollCall& call, int warmup, int iters) override {
    if (unsupported(call) != nullptr) {
      throw std::logic_error("timeCollective: unsupported type or op for MPI");
    }
    // MPI counts are int; the sweep never reaches 2^31 elements per call
    // on one host, but say so rather than truncate.
    if (call.count > 0x7FFFFFFFu) throw std::runtime_error("MPI: count exceeds INT_MAX");
    for (int i = 0; i < warmup; ++i) issue(call);
    mpiCheck(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) issue(call);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iters;
  }

 private:
  // One call of MPI's counterpart of `call`.
  void issue(const CollCall& c) {
    const bool reduces = collectiveInfo(c.coll).reduces;
    // Copies do not look at the bits: an unsigned type of the same width
    // lets fp16/bf16 run too.
    const MPI_Datatype dt = reduces ? mpiType(c.type.type) : copyType(c.type.size);
    const MPI_Op op = reduces ? mpiOp(c.op) : MPI_OP_NULL;
    const int n = static_cast<int>(c.count);
    void* send = const_cast<void*>(c.send);  // pre-MPI-3 headers lack const
    switch (c.coll) {
      case Collective::AllReduce:
        mpiCheck(MPI_Allreduce(send, c.recv, n, dt, op, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
      case Collective::Broadcast:
        mpiCheck(MPI_Bcast(rank_ == c.root ? send : c.recv, n, dt, c.root, MPI_COMM_WORLD), "MPI_Bcast");
        break;
      case Collective::Reduce:
        mpiCheck(MPI_Reduce(send, c.recv, n, dt, op, c.root, MPI_COMM_WORLD), "MPI_Reduce");
        break;
      case Collective::AllGather:
        mpiCheck(MPI_Allgather(send, n, dt, c.recv, n, dt, MPI_COMM_WORLD), "MPI_Allgather");
        break;
      case Collective::ReduceScatter:
        mpiCheck(MPI_Reduce_scatter_block(send, c.recv, n, dt, op, MPI_COMM_WORLD),
                 "MPI_Reduce_scatter_block");
        break;
      case Collective::AllToAll:
        mpiCheck(MPI_Alltoall(send, n, dt, c.recv, n, dt, MPI_COMM_WORLD), "MPI_Alltoall");
        break;
      case Collective::Gather:
        mpiCheck(MPI_Gather(send, n, dt, c.recv, n, dt, c.root, MPI_COMM_WORLD), "MPI_Gather");
        break;
      case Collective::Scatter:
        mpiCheck(MPI_Scatter(send, n, dt, c.recv, n, dt, c.root, MPI_COMM_WORLD), "MPI_Scatter");
        break;
      case Collective::SendRecv:
        mpiCheck(MPI_Sendrecv(send, n, dt, (rank_ + 1) % size_, 0, c.recv, n, dt,
                              (rank_ - 1 + size_) % size_, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 "MPI_Sendrecv");
        break;
    }
  }

  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool mpiBuiltIn() { return true; }

std::string mpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "(MPI_Get_library_version failed)";
  std::string version(text, length);
  version = version.substr(0, version.find('\n'));
  // MPICH pads its fields with spaces and tabs: one space each.
  std::string tidy;
  for (char c : version)
    if ((c != ' ' && c != '\t') || (!tidy.empty() && tidy.back() != ' ')) tidy += c == '\t' ? ' ' : c;
  while (!tidy.empty() && tidy.back() == ' ') tidy.pop_back();
  return tidy;
}

MpiFamily builtInMpiFamily() { return mpiFamilyOf(mpiLibraryVersion().c_str()); }

std::unique_ptr<MpiWorld> startMpi(int* argc, char*** argv) {
  return std::make_unique<LinkedMpiWorld>(argc, argv);
}

}  // namespace coil_perf
