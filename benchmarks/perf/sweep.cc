#include "sweep.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "check.h"
#include "coil_calls.h"
#include "units.h"

namespace coil_perf {
namespace {

constexpr int kMaxMismatchReports = 8;

void* allocatePages(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

Sweep::Sweep(const Options& opts, const Participant& self, const Table* table)
    : opts_(opts),
      self_(self),
      table_(table),
      send_(allocatePages(opts.maxBytes), std::free),
      recv_(allocatePages(opts.maxBytes), std::free) {}

void Sweep::run() {
  const std::vector<size_t> sizes =
      sweepSizes(opts_.minBytes, opts_.maxBytes, opts_.factor, opts_.stepBytes);
  warmUp(sizes.back());
  for (const TypeInfo& type : opts_.types) {
    for (const OpInfo& op : opts_.ops) {
      size_t previousCount = SIZE_MAX;
      for (size_t bytes : sizes) {
        // Sizes below one element, or not a multiple of it, can round to the
        // count of the previous row: measure each count once.
        if (bytes / type.size == previousCount) continue;
        previousCount = bytes / type.size;
        rows_.push_back(measure(type, op, bytes));
        if (table_ != nullptr) table_->printRow(rows_.back());
      }
    }
  }
}

void Sweep::warmUp(size_t bytes) {
  // As nccl-tests does: a few calls at the largest size before the first
  // row, so first-use costs (page faults on fresh buffers, lazily built
  // connections, cold caches and branch predictors) do not land in it.
  const TypeInfo& type = opts_.types.front();
  const OpInfo& op = opts_.ops.front();
  const size_t count = bytes / type.size;
  fillInput(send_.get(), count, type, op.op, self_.rank(), self_.nranks());
  for (int i = 0; i < opts_.warmup; ++i) allReduce(send_.get(), recv_.get(), count, type, op);
  if (opts_.baselineMpi && self_.mpi() != nullptr && self_.mpi()->unsupported(type.type, op.op) == nullptr) {
    self_.mpi()->timeAllreduce(send_.get(), recv_.get(), count, type.type, op.op, opts_.warmup, 1);
  }
}

void Sweep::allReduce(const void* send, void* recv, size_t count, const TypeInfo& type,
                      const OpInfo& op) {
  coilComm_t comm = self_.comm();
  coilCheck(coilAllReduce(send, recv, count, type.type, op.op, comm, nullptr), "coilAllReduce",
            comm);
}

double Sweep::timeCalls(const void* send, void* recv, size_t count, const TypeInfo& type,
                        const OpInfo& op) {
  for (int i = 0; i < opts_.warmup; ++i) allReduce(send, recv, count, type, op);
  maxOverRanks(self_.comm(), 0.0);  // a barrier: start the clocks together
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < opts_.iters; ++i) allReduce(send, recv, count, type, op);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / opts_.iters;
}

long long Sweep::checkedCall(bool inPlace, size_t count, const TypeInfo& type, const OpInfo& op,
                             size_t bytes) {
  void* recv = recv_.get();
  void* send = inPlace ? recv : send_.get();
  if (!inPlace) poison(recv, count, type);
  fillInput(send, count, type, op.op, self_.rank(), self_.nranks());
  allReduce(send, recv, count, type, op);
  const WrongReport report = countWrong(recv, count, type, op.op, self_.nranks());
  if (report.count > 0 && mismatchReports_++ < kMaxMismatchReports) {
    std::fprintf(stderr,
                 "coil_perf: rank %d: %s %s %zu B %s: %zu wrong values; first at element %zu: "
                 "got 0x%llx, expected 0x%llx\n",
                 self_.rank(), type.name, op.name, bytes, inPlace ? "in-place" : "out-of-place",
                 report.count, report.firstIndex, static_cast<unsigned long long>(report.firstGot),
                 static_cast<unsigned long long>(report.firstExpected));
  }
  return static_cast<long long>(sumOverRanks(self_.comm(), report.count));
}

Row Sweep::measure(const TypeInfo& type, const OpInfo& op, size_t bytes) {
  const int n = self_.nranks();
  Row row;
  row.count = bytes / type.size;
  row.bytes = row.count * type.size;
  row.type = type.name;
  row.op = op.name;
  void* send = send_.get();
  void* recv = recv_.get();

  // Out-of-place. Inputs are always the checker's values, so timings never
  // run on denormals or NaNs left over from an earlier row.
  fillInput(send, row.count, type, op.op, self_.rank(), n);
  const double oopSeconds = maxOverRanks(self_.comm(), timeCalls(send, recv, row.count, type, op));
  row.outOfPlace = bandwidth(row.bytes, oopSeconds, n);
  if (opts_.check) row.outOfPlace.wrong = checkedCall(false, row.count, type, op, row.bytes);

  // In-place: the same buffer is both input and output, as in nccl-tests.
  fillInput(recv, row.count, type, op.op, self_.rank(), n);
  const double ipSeconds = maxOverRanks(self_.comm(), timeCalls(recv, recv, row.count, type, op));
  row.inPlace = bandwidth(row.bytes, ipSeconds, n);
  if (opts_.check) row.inPlace.wrong = checkedCall(true, row.count, type, op, row.bytes);

  if (opts_.baselineMpi && self_.mpi() != nullptr) {
    MpiWorld* mpi = self_.mpi();
    if (const char* why = mpi->unsupported(type.type, op.op)) {
      row.baseline.note = why;
    } else {
      fillInput(send, row.count, type, op.op, self_.rank(), n);
      const double local = mpi->timeAllreduce(send, recv, row.count, type.type, op.op,
                                              opts_.warmup, opts_.iters);
      const Measure m = bandwidth(row.bytes, maxOverRanks(self_.comm(), local), n);
      row.baseline.measured = true;
      row.baseline.timeUs = m.timeUs;
      row.baseline.busbw = m.busbw;
      row.baseline.ratio = m.busbw > 0 ? row.outOfPlace.busbw / m.busbw : 0.0;
    }
  }
  if (row.outOfPlace.wrong > 0) wrongTotal_ += row.outOfPlace.wrong;
  if (row.inPlace.wrong > 0) wrongTotal_ += row.inPlace.wrong;
  return row;
}

}  // namespace coil_perf
