#include "sweep.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "coil_calls.h"
#include "expect.h"
#include "units.h"

namespace coil_perf {
namespace {

constexpr int kMaxMismatchReports = 8;

// Collectives that do not reduce run once per type, under this name.
const OpInfo kNoOp{"none", coilSum};
const std::vector<OpInfo> kNoOps{kNoOp};

}  // namespace

Sweep::Sweep(const Options& opts, const Participant& self, const Table* table,
             RankBuffers& buffers)
    : opts_(opts), self_(self), table_(table), buffers_(buffers) {
  if (buffers_.bytes() < opts.maxBytes) throw std::logic_error("coil_perf: buffers too small");
  // Device buffers travel through coil's host staging, the memory its
  // transports see: registering them would mean nothing (main says so).
  if (opts.registerBuffers && !buffers_.device()) {
    sendRegistered_ = std::make_unique<Registered>(self.comm(), buffers_.send(), opts.maxBytes);
    recvRegistered_ = std::make_unique<Registered>(self.comm(), buffers_.recv(), opts.maxBytes);
  }
  // -R 2: windows (collective), whole buffers, as every rank's are the same size.
  if (opts.windowBuffers && buffers_.device()) {
    sendWindow_ = std::make_unique<Window>(self.comm(), buffers_.send(), buffers_.bytes());
    recvWindow_ = std::make_unique<Window>(self.comm(), buffers_.recv(), buffers_.bytes());
  }
}

Sweep::Window::Window(coilComm_t c, void* buffer, size_t bytes) : comm(c) {
  coilCheck(coilCommWindowRegister(comm, buffer, bytes, &window, COIL_WIN_COLL_SYMMETRIC),
            "coilCommWindowRegister", comm);
}

Sweep::Window::~Window() {
  // Collective: not while a failure unwinds this rank alone (its peers may
  // never come); destroying the communicator frees the window then.
  if (window != nullptr && std::uncaught_exceptions() == 0) coilCommWindowDeregister(comm, window);
}

CollCall Sweep::onHost(const CollCall& call) const {
  CollCall host = call;
  host.send = buffers_.hostOf(call.send);
  host.recv = buffers_.hostOf(call.recv);
  return host;
}

size_t Sweep::extent(const Layout& layout, const TypeInfo& type) {
  // In-place calls point inside one buffer of max(sendCount, recvCount)
  // elements (collectives.h), out-of-place ones use less of each.
  return std::max(layout.sendCount, layout.recvCount) * type.size;
}

void Sweep::fillInput(const CollCall& call, const Layout& layout) {
  fillCollectiveInput(onHost(call), layout, self_.rank(), self_.nranks());
  buffers_.upload(extent(layout, call.type));
}

Sweep::Registered::Registered(coilComm_t c, void* buffer, size_t bytes) : comm(c) {
  coilCheck(coilCommRegister(comm, buffer, bytes, &handle), "coilCommRegister", comm);
}

Sweep::Registered::~Registered() {
  if (handle != nullptr) coilCommDeregister(comm, handle);
}

void Sweep::run() {
  size_t perCycle = 0;
  for (const CollectiveInfo& coll : opts_.collectives) perCycle += plan(coll).size();
  const bool forever = opts_.runCycles == 0;
  if (table_ != nullptr) printRowCount(perCycle, opts_.runCycles);
  Progress progress(stderr, forever ? perCycle : perCycle * static_cast<size_t>(opts_.runCycles),
                    table_ != nullptr && Progress::onTerminal(stderr));
  for (int cycle = 0; forever || cycle < opts_.runCycles; ++cycle) {
    if (table_ != nullptr && opts_.runCycles != 1) {
      table_->printNote("Cycle " + std::to_string(cycle + 1) +
                        (forever ? " (until stopped)" : " of " + std::to_string(opts_.runCycles)));
    }
    if (forever) rowsDone_ = 0;  // the line counts the rows of this cycle
    for (const CollectiveInfo& coll : opts_.collectives) runCollective(coll, progress);
  }
}

void Sweep::printRowCount(size_t total, int cycles) const {
  std::string text = std::to_string(total) + " rows";
  if (cycles != 1) text += cycles == 0 ? " per cycle, cycles until stopped"
                                       : " per cycle, " + std::to_string(cycles) + " cycles";
  if (opts_.collectives.size() > 1) {
    text += ":";
    for (const CollectiveInfo& coll : opts_.collectives) {
      text += std::string(" ") + coll.name + " " + std::to_string(plan(coll).size());
    }
  }
  table_->printNote(text);
}

std::vector<Sweep::Planned> Sweep::plan(const CollectiveInfo& coll) const {
  const std::vector<size_t> sizes =
      sweepSizes(opts_.minBytes, opts_.maxBytes, opts_.factor, opts_.stepBytes);
  const std::vector<OpInfo>& ops = coll.reduces ? opts_.ops : kNoOps;
  std::vector<Planned> out;
  for (const TypeInfo& type : opts_.types) {
    for (const OpInfo& op : ops) {
      if (coll.reduces && !opTakesType(op, type)) continue;  // bxor on float: coil refuses it
      for (int root : roots(coll)) {
        size_t previousCount = SIZE_MAX;
        for (size_t bytes : sizes) {
          const size_t count = layoutFor(coll.id, bytes, type.size, self_.nranks()).count;
          if (count == previousCount) continue;
          previousCount = count;
          out.push_back({&type, &op, root, bytes});
        }
      }
    }
  }
  return out;
}

std::vector<int> Sweep::roots(const CollectiveInfo& coll) const {
  if (!coll.rooted) return {-1};
  const int n = self_.nranks();
  if (!opts_.allRoots && opts_.root >= n) {
    throw std::runtime_error("-r " + std::to_string(opts_.root) + ": the communicator has only " +
                             std::to_string(n) + " ranks");
  }
  std::vector<int> out;
  for (int r = opts_.allRoots ? 0 : opts_.root; r < (opts_.allRoots ? n : opts_.root + 1); ++r) {
    out.push_back(r);
  }
  return out;
}

void Sweep::runCollective(const CollectiveInfo& coll, Progress& progress) {
  const std::vector<Planned> rows = plan(coll);
  // A plain all-reduce run keeps the original table (tools depend on it).
  const bool plainAllReduce =
      opts_.collectives.size() == 1 && coll.id == Collective::AllReduce;
  progress.clear();
  if (table_ != nullptr) table_->printColumns(coll.rooted, plainAllReduce ? "" : coll.name);
  const size_t firstRow = rows_.size();
  long long wrong = 0;
  if (!rows.empty())
    warmUp(coll, rows.front(),
           sweepSizes(opts_.minBytes, opts_.maxBytes, opts_.factor, opts_.stepBytes).back());
  for (const Planned& p : rows) {
    progress.show(rowsDone_++, std::string(coll.name) + " " + p.type->name + " " + p.op->name +
                                   (p.root >= 0 ? " root " + std::to_string(p.root) : "") + " " +
                                   std::to_string(p.bytes) + " B");
    rows_.push_back(measure(coll, *p.type, *p.op, p.root, p.bytes));
    const Row& row = rows_.back();
    wrong += std::max(0LL, row.outOfPlace.wrong) + std::max(0LL, row.inPlace.wrong);
    progress.clear();
    if (table_ != nullptr) table_->printRow(row);
  }
  wrongTotal_ += wrong;
  if (table_ != nullptr) {
    const std::vector<Row> mine(rows_.begin() + static_cast<std::ptrdiff_t>(firstRow), rows_.end());
    table_->printFooter(opts_.check() ? wrong : -1, averageBusbw(mine));
  }
}

CollCall Sweep::outOfPlace(const CollectiveInfo& coll, const Layout& layout, const TypeInfo& type,
                           const OpInfo& op, int root) {
  CollCall call;
  call.coll = coll.id;
  call.send = buffers_.send();
  call.recv = buffers_.recv();
  call.count = layout.count;
  call.type = type;
  call.op = op.op;
  call.root = root < 0 ? 0 : root;
  return call;
}

void Sweep::warmUp(const CollectiveInfo& coll, const Planned& first, size_t bytes) {
  // As nccl-tests does: a few calls at the largest size before the first
  // row, so first-use costs (page faults on fresh buffers, lazily built
  // connections, cold caches and branch predictors) do not land in it.
  // The first row's type, op and root: a pair coil takes (plan() skips others).
  const TypeInfo& type = *first.type;
  const OpInfo& op = *first.op;
  const int root = first.root;
  const int rank = self_.rank(), n = self_.nranks();
  const Layout layout = layoutFor(coll.id, bytes, type.size, n);
  const CollCall call = outOfPlace(coll, layout, type, op, root);
  fillInput(call, layout);
  for (int i = 0; i < opts_.warmup; ++i) runCoil(call, self_.comm(), rank, n, buffers_.stream());
  buffers_.sync();
  if (opts_.baselineMpi && self_.mpi() != nullptr && !buffers_.device() &&
      self_.mpi()->unsupported(call) == nullptr) {
    self_.mpi()->timeCollective(call, opts_.warmup, 1);
  }
}

long long Sweep::checkedCall(const CollCall& call, const Layout& layout, bool inPlace) {
  const int rank = self_.rank(), n = self_.nranks();
  // With device buffers: on the host mirrors, copied to the device before
  // the call and back after it.
  const CollCall host = onHost(call);
  poisonCollectiveOutput(host, layout, rank);
  fillCollectiveInput(host, layout, rank, n);  // after: an in-place input overwrites the poison
  buffers_.upload(extent(layout, call.type));
  runCoil(call, self_.comm(), rank, n, buffers_.stream());
  buffers_.download(extent(layout, call.type));  // waits for the stream first
  const WrongReport report = checkCollectiveOutput(host, layout, rank, n);
  if (report.count > 0 && mismatchReports_++ < kMaxMismatchReports) {
    const CollectiveInfo& coll = collectiveInfo(call.coll);
    const std::string root = coll.rooted ? " root " + std::to_string(call.root) : "";
    std::fprintf(stderr,
                 "coil_perf: rank %d: %s%s %s %s %zu B %s: %zu wrong values; first at element "
                 "%zu: got 0x%llx, expected 0x%llx\n",
                 rank, coll.name, root.c_str(), call.type.name,
                 coll.reduces ? opNameOf(call.op) : "none", layout.bytes,
                 inPlace ? "in-place" : "out-of-place", report.count, report.firstIndex,
                 static_cast<unsigned long long>(report.firstGot),
                 static_cast<unsigned long long>(report.firstExpected));
  }
  return static_cast<long long>(sumOverRanks(self_.comm(), report.count));
}

long long Sweep::checkedCalls(const CollCall& call, const Layout& layout, bool inPlace) {
  long long wrong = 0;  // summed over -c's calls, as nccl-tests counts them
  for (int i = 0; i < opts_.checkIters; ++i) wrong += checkedCall(call, layout, inPlace);
  return wrong;
}

Row Sweep::measure(const CollectiveInfo& coll, const TypeInfo& type, const OpInfo& op, int root,
                   size_t bytes) {
  const int rank = self_.rank(), n = self_.nranks();
  const Layout layout = layoutFor(coll.id, bytes, type.size, n);
  const double factor = busFactor(coll.id, n);
  coilComm_t comm = self_.comm();
  Row row;
  row.collective = coll.name;
  row.bytes = layout.bytes;
  row.count = layout.totalCount;
  row.type = type.name;
  row.op = op.name;
  row.root = root;
  row.hasInPlace = coll.inPlace;

  // Out-of-place. Inputs are always the checker's values, so timings never
  // run on denormals or NaNs left over from an earlier row.
  const CollCall call = outOfPlace(coll, layout, type, op, root);
  fillInput(call, layout);
  Timing timing{opts_.warmup, opts_.iters, opts_.aggIters, opts_.blocking, opts_.average};
  if (buffers_.device()) {
    timing.stream = buffers_.stream();
    timing.sync = [this] { buffers_.sync(); };
  }
  row.outOfPlace =
      bandwidthWithFactor(layout.bytes, timeCoil(call, comm, rank, n, timing), factor);
  if (opts_.check()) row.outOfPlace.wrong = checkedCalls(call, layout, false);

  // In-place, with nccl-tests' pointers (collectives.h).
  if (coll.inPlace) {
    CollCall inPlace = call;
    inPlacePointers(coll.id, buffers_.recv(), layout, type.size, rank, &inPlace.send,
                    &inPlace.recv);
    fillInput(inPlace, layout);
    row.inPlace =
        bandwidthWithFactor(layout.bytes, timeCoil(inPlace, comm, rank, n, timing), factor);
    if (opts_.check()) row.inPlace.wrong = checkedCalls(inPlace, layout, true);
  }

  if (opts_.baselineMpi && self_.mpi() != nullptr && !buffers_.device()) {
    MpiWorld* mpi = self_.mpi();
    if (const char* why = mpi->unsupported(call)) {
      row.baseline.note = why;
    } else {
      fillInput(call, layout);  // host buffers: --baseline mpi refuses device memory
      const double local = mpi->timeCollective(call, opts_.warmup, opts_.iters);
      const Measure m = bandwidthWithFactor(
          layout.bytes, combineOverRanks(comm, local, opts_.average, rank, n), factor);
      row.baseline.measured = true;
      row.baseline.timeUs = m.timeUs;
      row.baseline.busbw = m.busbw;
      row.baseline.ratio = m.busbw > 0 ? row.outOfPlace.busbw / m.busbw : 0.0;
    }
  }
  return row;
}

}  // namespace coil_perf
