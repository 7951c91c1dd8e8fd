// oneccl_perf: the coil_perf sweep (float, sum) over Intel's oneCCL, as a
// baseline. Ranks are forked here (rank 0 is the parent); rank 0 makes
// oneCCL's main key-value store and hands its address to the others over
// the fork's pipes, as oneCCL's own samples do with MPI_Bcast.
//
// oneCCL moves data through its ATL layer. The build used here (the CPU
// archive of PyPI's oneccl-devel, tools/lib/oneccl-prefix.sh) runs the OFI
// ATL over Debian's libfabric. Left to itself on this host it picks
// libfabric's tcp provider on the first network interface, so this tool
// says which provider to use and keeps everything on loopback:
//   --transport shm (default)  FI_PROVIDER=shm and CCL_ATL_SHM=1:
//                              libfabric's shared-memory provider
//   --transport tcp            FI_PROVIDER=tcp, FI_TCP_IFACE=lo
// and CCL_KVS_IFACE=lo for the store in both. It also sets
// CCL_WORKER_OFFLOAD=0 (configureOneCcl says why). A variable already set
// in the environment wins, and the header's transport line shows the
// values used. oneCCL's other settings are its defaults. Its MPI ATL
// needs Intel MPI and its launcher; a spot check with it was no faster
// (docs/performance.md, section 4.15).
//
// Flags, output columns, JSON and result checking are coil_perf's
// (baseline_sweep.h).
#include <cstdlib>
#include <memory>
#include <string>

#include <oneapi/ccl.hpp>

#include "baseline_sweep.h"
#include "units.h"

using namespace coil_perf;

namespace {

/// The environment oneCCL reads at ccl::init(), for `transport`: a value
/// the user set already is kept.
void configureOneCcl(const std::string& transport) {
  const auto setDefault = [](const char* name, const std::string& value) { setenv(name, value.c_str(), 0); };
  setDefault("CCL_ATL_TRANSPORT", "ofi");
  // libfabric's shm provider is refused unless oneCCL asks for it too.
  setDefault("CCL_ATL_SHM", transport == "tcp" ? "0" : "1");
  setDefault("FI_PROVIDER", transport == "tcp" ? "tcp" : "shm");
  setDefault("FI_TCP_IFACE", "lo");
  // oneCCL's default hands each operation to a worker thread pinned to a
  // core; with two ranks on two cores every all-reduce then took 8-17 ms
  // (8 B to 32 KiB, 2026-12-06), against 7-35 us when the caller's thread
  // drives it. The caller's thread, as coil and Gloo do.
  setDefault("CCL_WORKER_OFFLOAD", "0");
  setDefault("CCL_KVS_IFACE", "lo");
  // Its warnings name each variable set here, every run.
  setDefault("CCL_LOG_LEVEL", "error");
}

std::string envOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

class OneCclRank final : public BaselineRank {
 public:
  OneCclRank(int nranks, int rank, const ccl::shared_ptr_class<ccl::kvs>& kvs)
      : comm_(ccl::create_communicator(nranks, rank, kvs)) {}

  void allreduceFloatSum(const float* in, float* out, size_t count) override {
    allreduce(in, out, count, ccl::datatype::float32, ccl::reduction::sum);
  }
  double maxOverRanks(double value) override {
    allreduce(&value, &value, 1, ccl::datatype::float64, ccl::reduction::max);
    return value;
  }
  uint64_t sumOverRanks(uint64_t value) override {
    allreduce(&value, &value, 1, ccl::datatype::uint64, ccl::reduction::sum);
    return value;
  }
  void sumBytesOverRanks(uint8_t* bytes, size_t n) override {
    allreduce(bytes, bytes, n, ccl::datatype::uint8, ccl::reduction::sum);
  }
  std::string transportName() const override {
    const ccl::library_version v = ccl::get_library_version();
    return "oneCCL " + std::to_string(v.major) + "." + std::to_string(v.minor) + "." +
           std::to_string(v.update) + ", ATL " + envOr("CCL_ATL_TRANSPORT", "?") + ", FI_PROVIDER=" +
           envOr("FI_PROVIDER", "(libfabric's choice)") + ", CCL_ATL_SHM=" + envOr("CCL_ATL_SHM", "0") +
           ", CCL_WORKER_OFFLOAD=" + envOr("CCL_WORKER_OFFLOAD", "1");
  }

 private:
  void allreduce(const void* in, void* out, size_t count, ccl::datatype type, ccl::reduction op) {
    ccl::allreduce(in, out, count, type, op, comm_).wait();
  }

  ccl::communicator comm_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string transport = "shm";
  BaselineTool tool;
  tool.name = "oneccl_perf";
  tool.description = "float sum all-reduce sweep over oneCCL (OFI: libfabric shm or tcp on lo)";
  tool.extraUsage = "  --transport shm|tcp          libfabric's provider under oneCCL (default shm)\n";
  tool.takeFlag = [&](const std::string& flag, const std::string& v) {
    if (flag != "--transport") return false;
    if (v != "shm" && v != "tcp") throw UsageError("--transport: '" + v + "' is not shm or tcp");
    transport = v;
    return true;
  };
  tool.connect = [&](LocalRanks& ranks, int rank, int nranks) -> std::unique_ptr<BaselineRank> {
    configureOneCcl(transport);
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type address{};
    if (rank == 0) {
      try {
        ccl::init();
        kvs = ccl::create_main_kvs();
        address = kvs->get_address();
      } catch (...) {
        ranks.abandon();  // the others stop waiting for the address
        throw;
      }
      ranks.share(address.data(), address.size());
    } else {
      ranks.receive(address.data(), address.size());
      ccl::init();
      kvs = ccl::create_kvs(address);
    }
    return std::make_unique<OneCclRank>(nranks, rank, kvs);
  };
  BaselineOptions options;
  return runBaseline(argc, argv, options, tool);
}
