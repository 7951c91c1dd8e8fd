// Flight recorder: the last N operations of one communicator, for the
// post-mortem of a timeout or an error (what torch's NCCL flight recorder,
// TORCH_NCCL_TRACE_BUFFER_SIZE, keeps for NCCL).
//
//   COIL_FLIGHT_RECORDER_ENTRIES=N     entries kept per communicator (default 64; 0: off)
//   COIL_FLIGHT_RECORDER_TIMING=1      also time each operation to the microsecond
//                                      (default 0: start times to the millisecond)
//   COIL_DEBUG_DUMP_ON_ERROR=<path>    also append each dump to this file; in the
//                                      path %r is the rank, %p the pid, %h the host
//
// Every collective and every send/recv (one entry per operation of a group)
// gets an entry: its sequence number, what it was (kind, count, dtype, op,
// root or peer), the algorithm that ran it, its state (started, completed,
// failed) and when it started. Collectives with count 0 are not recorded
// (they move nothing; their sequence number is still used). When an error
// breaks the communicator (Communicator::breakWith: a timeout, a dead or
// closed peer, a mismatch, an abort), the entries are written to the log at
// WARN level, subsystem COLL, oldest first, each line prefixed "flight
// recorder (rank r of n, comm <label>[ '<name>']): ":
//
//   ...: 8 operation(s) recorded, the last 8 follow, oldest first
//   ...: #1 allreduce 1024 x float32 sum oneshot completed, started 03:41:53.335
//   ...: #0 send 4 x float32 to rank 1 completed, started 03:41:53.336
//   ...: #6 allreduce 16 x float32 sum oneshot failed after 500 ms, started 03:41:53.337
//
// An entry line: "#<seq> <what>[ <algorithm>] <state>, started <time, UTC>", where
//   - seq: for a collective the call number every rank shares (error messages
//     say "allreduce #6"); for a send or receive the number of that message
//     between the two ranks in that direction, from 0;
//   - what: "<collective> <count> x <dtype>[ <op>][ root <r>]" ("barrier"
//     alone), or "send <count> x <dtype> to rank <p>" / "recv ... from rank <p>";
//     op is "premulsum" for a coilRedOpCreatePreMulSum op;
//   - state: "completed", "failed after <ms> ms", or "in progress for <ms> ms"
//     (the dump ran during the call);
//   - time: HH:MM:SS.milli, from the coarse clock the call's deadline reads
//     anyway (its resolution is the kernel tick, 1-4 ms).
// With COIL_FLIGHT_RECORDER_TIMING=1 every operation is timed with the TSC
// instead, as torch's TORCH_NCCL_ENABLE_TIMING adds durations to its entries:
// "completed in 410 us", "failed after 499 ms", "in progress for 3.2 us"
// (durations in us, one decimal below 10 us, up to 10 ms, then in ms), and
// "started HH:MM:SS.micro". The operations of one group are timed together.
// The file gets, per dump, appended in one write (so ranks and
// communicators sharing a path do not interleave):
//
//   coil flight recorder: rank 0 of 3, comm 719b4ada285e-28706, host vm, pid 28706
//   written 2026-11-22 03:41:54.337993 UTC; 8 operation(s) recorded, the last 8 follow, oldest first
//   error: allreduce #6 (16 x float32, sum): timed out after 500 ms waiting for ranks 1, 2 (tcp); ...
//   #1 allreduce 1024 x float32 sum oneshot completed, started 03:41:53.335
//   ...
//   <an empty line>
//
// A file that cannot be opened or written is a WARN line, never an error.
//
// Cost: the calling thread writes its own entries: no allocation, no lock,
// no atomic read-modify-write, and by default no clock read (the start time
// is the one the call's deadline took; a failure reads the coarse clock).
// Begin, algorithm and end of one call cost ~10 ns; with timing, two TSC
// reads (~10 ns each on the reference VM; steady_clock off x86-64) more,
// which was ~5% of a 2-rank 8 B all-reduce over shm (flight_recorder_test
// prints both next to a small all-reduce).
//
// A dump may run on another thread than the one recording (an abort): each
// entry is a seqlock (a version word, odd while written), so a reader never
// returns a torn entry, only skips one that the writer is overwriting.
// Dumps take a mutex among themselves; the writer never does.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/fingerprint.h"
#include "coil.h"
#include "core/deadline.h"  // coarseMonotonicMs: the clock of untimed entries

#if !defined(__x86_64__)
#include <chrono>
#endif

namespace coil {

class FlightRecorder {
 public:
  enum class State : uint8_t { kStarted = 0, kCompleted = 1, kFailed = 2 };
  /// Entry::kind: an algo::CollKind, or one of these.
  static constexpr uint8_t kSend = 100, kRecv = 101;
  /// begin() of a disabled recorder.
  static constexpr uint64_t kNone = ~uint64_t{0};

  /// One operation (a plain copy, as snapshot() returns it).
  struct Entry {
    uint64_t id;             // 0, 1, 2, ...: order of operations on this communicator
    uint64_t count;          // elements, as the API call passed them
    uint64_t start;          // timed: ticks(); else coarse monotonic ms (coarseMonotonicMs)
    uint64_t end;            // on the same clock; 0 while started, and for an untimed
                             // operation that completed
    const char* algorithm;   // a static string, or nullptr (not chosen / not known)
    uint32_t seq;            // collective: the call number every rank shares (as in
                             // "allreduce #12"); send/recv: per peer and direction
    int32_t peer;            // root (rooted collectives), peer (send/recv), else -1
    int32_t op;              // coilRedOp_t (>= coilNumOps: a pre-multiplied sum); -1: none
    uint8_t kind;            // algo::CollKind, kSend or kRecv
    State state;
    uint8_t type;            // coilDataType_t
    bool timed;              // start and end are ticks() (COIL_FLIGHT_RECORDER_TIMING=1)
  };
  static_assert(sizeof(Entry) == 56);

  /// Who is dumping: for the header of a dump.
  struct Owner {
    int rank;
    int nranks;
    std::string label;  // the communicator's label (shm names, logs)
    std::string name;   // coilConfig_t name, or empty
  };

  /// Reads COIL_FLIGHT_RECORDER_ENTRIES, COIL_FLIGHT_RECORDER_TIMING and
  /// COIL_DEBUG_DUMP_ON_ERROR (coilInvalidUsage if the first is not an
  /// integer in [0, 1048576], or the second not 0 or 1).
  FlightRecorder();
  /// `entries` kept (0: disabled); `dumpPath` "" for no file; `timing`:
  /// time every operation with the TSC.
  FlightRecorder(size_t entries, std::string dumpPath, bool timing = false);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Entries kept (N), and operations recorded so far.
  size_t entries() const { return entries_; }
  uint64_t recorded() const { return head_.load(std::memory_order_acquire); }
  const std::string& dumpPath() const { return dumpPath_; }
  bool timing() const { return timing_; }

  /// Records the start of an operation, at `nowMs` (coarseMonotonicMs(), as
  /// the caller's deadline read it) unless timing; returns its id for end().
  /// `op` and `peer` are ignored (recorded as -1) for kinds without them.
  uint64_t begin(uint8_t kind, uint32_t seq, uint64_t count, coilDataType_t type, int op, int peer,
                 int64_t nowMs) {
    if (entries_ == 0) return kNone;
    const uint64_t id = head_.load(std::memory_order_relaxed);
    const bool hasOp = algo::reduces(static_cast<algo::CollKind>(kind));
    const bool hasPeer = kind >= kSend || algo::hasRoot(static_cast<algo::CollKind>(kind));
    const uint64_t start = timing_ ? ticks() : static_cast<uint64_t>(nowMs);
    // The words of the Entry, computed in registers (an Entry built on the
    // stack and copied out as words stalled store forwarding).
    Slot& s = slot(id);
    const uint64_t v = beginWrite(s);
    s.words[kIdWord].store(id, std::memory_order_relaxed);
    s.words[kCountWord].store(count, std::memory_order_relaxed);
    s.words[kStartWord].store(start, std::memory_order_relaxed);
    s.words[kEndWord].store(0, std::memory_order_relaxed);
    s.words[kAlgorithmWord].store(0, std::memory_order_relaxed);
    s.words[kSeqWord].store(seqWord(seq, hasPeer ? peer : -1), std::memory_order_relaxed);
    s.words[kStateWord].store(
        flagsWord(hasOp ? op : -1, kind, State::kStarted, static_cast<uint8_t>(type), timing_),
        std::memory_order_relaxed);
    s.version.store(v + 2, std::memory_order_release);
    head_.store(id + 1, std::memory_order_release);
    return id;
  }
  /// Names the algorithm of the latest operation begun.
  void setAlgorithm(const char* name) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (entries_ == 0 || head == 0) return;
    // One word of an entry only this thread writes, so no seqlock round: a
    // reader sees the old name or the new one, and read() takes the state
    // word first, so an entry it sees ended carries the name set before.
    slot(head - 1).words[kAlgorithmWord].store(reinterpret_cast<uintptr_t>(name),
                                               std::memory_order_release);
  }
  /// Records the end of operation `id` (kNone, an id already overwritten or
  /// ended: nothing). Writes only the words that change: untimed, a
  /// completion only its state (no clock read on the per-call path).
  void end(uint64_t id, State state) {
    if (id == kNone || entries_ == 0) return;
    Slot& s = slot(id);
    if (s.words[kIdWord].load(std::memory_order_relaxed) != id) return;
    uint64_t flags = s.words[kStateWord].load(std::memory_order_relaxed);
    if (((flags >> kStateShift) & 0xff) != uint8_t(State::kStarted)) return;
    flags = (flags & ~(uint64_t{0xff} << kStateShift)) | (uint64_t(state) << kStateShift);
    uint64_t now = 0;
    if (timing_) now = ticks();
    else if (state == State::kFailed) now = static_cast<uint64_t>(coarseMonotonicMs());
    if (now == 0) {
      // An untimed completion changes one word: no seqlock round.
      s.words[kStateWord].store(flags, std::memory_order_release);
      return;
    }
    const uint64_t v = beginWrite(s);
    s.words[kEndWord].store(now, std::memory_order_relaxed);
    s.words[kStateWord].store(flags, std::memory_order_relaxed);
    s.version.store(v + 2, std::memory_order_release);
  }

  /// The last entries() operations (fewer before that many were recorded),
  /// oldest first. Safe from any thread while the owner records; an entry
  /// being overwritten right then is left out.
  std::vector<Entry> snapshot() const;

  /// One line per entry, oldest first: "#41 allreduce 1024 x float32 sum
  /// oneshot completed, started 10:11:12.345" (times UTC; timed: "completed
  /// in 12 us, started 10:11:12.345678").
  std::vector<std::string> describe(const std::vector<Entry>& entries) const;

  /// Writes the recorder to the log (WARN, subsystem COLL: a header line,
  /// then one line per entry, each prefixed "flight recorder (rank r of n,
  /// comm label): ") and, when COIL_DEBUG_DUMP_ON_ERROR names a path, appends
  /// the same to that file, headed by the host, pid, time and `error`.
  /// Never throws; a file that cannot be written is logged.
  void dump(const Owner& owner, const std::string& error) const noexcept;

  /// The dump file's path for this rank: %r rank, %p pid, %h host, %% a %.
  static std::string expandPath(const std::string& pattern, int rank);

  /// The clock of timed entries: the TSC on x86-64, steady_clock ns elsewhere.
  static uint64_t ticks() {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
  }

  /// One collective: begun on construction; completed by complete(), failed
  /// by fail() or by leaving the scope without either (an exception). An
  /// explicit complete() instead of asking std::uncaught_exceptions(), whose
  /// thread-local lookup twice per call cost ~1% of a 2-rank 8 B all-reduce.
  class Scope {
   public:
    Scope(FlightRecorder& r, algo::CollKind kind, uint32_t seq, uint64_t count,
          coilDataType_t type, int op, int root, int64_t nowMs)
        : r_(r), id_(r.begin(static_cast<uint8_t>(kind), seq, count, type, op, root, nowMs)) {}
    ~Scope() { r_.end(id_, State::kFailed); }  // nothing when already ended
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    void complete() { r_.end(id_, State::kCompleted); }
    void fail() { r_.end(id_, State::kFailed); }

   private:
    FlightRecorder& r_;
    uint64_t id_;
  };

  /// The operations of one point-to-point batch, added in order (their ids
  /// are consecutive); ended together like Scope (complete(), fail(), or
  /// failed when the scope is left without either). The operations of a
  /// batch are timed together: each from its add() to the end of the batch.
  class Batch {
   public:
    explicit Batch(FlightRecorder& r) : r_(r), first_(r.recorded()) {}
    ~Batch() { endAll(State::kFailed); }  // nothing for entries already ended
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
    void add(bool isSend, uint32_t seq, uint64_t count, coilDataType_t type, int peer,
             int64_t nowMs) {
      r_.begin(isSend ? kSend : kRecv, seq, count, type, -1, peer, nowMs);
      ++n_;
    }
    void complete() { endAll(State::kCompleted); }
    /// Ends the batch as failed: operation i completed if done(i), else failed.
    template <typename Done>
    void fail(Done&& done) {
      for (size_t i = 0; i < n_; ++i)
        r_.end(first_ + i, done(i) ? State::kCompleted : State::kFailed);
    }

   private:
    void endAll(State s) {
      for (size_t i = 0; i < n_; ++i) r_.end(first_ + i, s);
    }
    FlightRecorder& r_;
    uint64_t first_;
    size_t n_ = 0;
  };

 private:
  static constexpr size_t kWords = sizeof(Entry) / sizeof(uint64_t);
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};  // odd while the owner writes
    std::atomic<uint64_t> words[kWords] = {};
  };
  static_assert(sizeof(Slot) == 64);

  // The words of an Entry (little-endian), as begin(), setAlgorithm() and
  // end() write them.
  static constexpr size_t kIdWord = offsetof(Entry, id) / 8;
  static constexpr size_t kCountWord = offsetof(Entry, count) / 8;
  static constexpr size_t kStartWord = offsetof(Entry, start) / 8;
  static constexpr size_t kEndWord = offsetof(Entry, end) / 8;
  static constexpr size_t kAlgorithmWord = offsetof(Entry, algorithm) / 8;
  static constexpr size_t kSeqWord = offsetof(Entry, seq) / 8;
  static constexpr size_t kStateWord = offsetof(Entry, state) / 8;
  static constexpr unsigned kStateShift = 8 * (offsetof(Entry, state) % 8);
  static_assert(std::endian::native == std::endian::little);
  static_assert(offsetof(Entry, seq) % 8 == 0 && offsetof(Entry, peer) == offsetof(Entry, seq) + 4);
  static_assert(offsetof(Entry, op) % 8 == 0 && offsetof(Entry, kind) == offsetof(Entry, op) + 4 &&
                offsetof(Entry, state) == offsetof(Entry, op) + 5 &&
                offsetof(Entry, type) == offsetof(Entry, op) + 6 &&
                offsetof(Entry, timed) == offsetof(Entry, op) + 7);
  static uint64_t seqWord(uint32_t seq, int32_t peer) {
    return uint64_t{seq} | uint64_t{static_cast<uint32_t>(peer)} << 32;
  }
  static uint64_t flagsWord(int32_t op, uint8_t kind, State state, uint8_t type, bool timed) {
    return uint64_t{static_cast<uint32_t>(op)} | uint64_t{kind} << 32 |
           uint64_t{static_cast<uint8_t>(state)} << 40 | uint64_t{type} << 48 |
           uint64_t{timed} << 56;
  }

  Slot& slot(uint64_t id) const { return slots_[id & mask_]; }
  // Seqlock: the version goes odd before the words change, even after.
  static uint64_t beginWrite(Slot& s) {
    const uint64_t v = s.version.load(std::memory_order_relaxed);
    s.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    return v;
  }
  // A reader's copy of slot `id`; false if it is being written or holds another id.
  bool read(uint64_t id, Entry* out) const;

  size_t entries_ = 0;                  // N
  bool timing_ = false;                 // COIL_FLIGHT_RECORDER_TIMING
  uint64_t mask_ = 0;                   // slots: a power of two >= N
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> head_{0};       // id of the next entry
  std::string dumpPath_;
  mutable std::mutex dumpMutex_;        // dumps only
};

}  // namespace coil
