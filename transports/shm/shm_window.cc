// The shared-memory Window (transports/window.h).
//
// Each rank creates one segment:
//
//   [ control pages: mail of slot 0 | mail of slot 1 | closed | pid, size | hub ]
//   [ slot 0 ][ slot 1 ]                       (slotBytes each, page aligned)
//
// The "mail" of a slot is 32 cache lines: a head line (the step that posted
// the slot, its stamp, 48 inline bytes) and 31 lines of 60 inline bytes,
// each with its own copy of the step. A waiting rank polls the lines it
// needs; the lines of a small message then cross between the caches all at
// once, with the step, instead of flag first and data after it.
//
// When polling does not pay, ranks sleep on one futex word for the whole
// communicator, the generation in rank 0's "hub" line. A rank that posts a
// step checks whether every rank has now posted it (its store and those
// loads are sequentially consistent, so of two ranks posting at once at
// least one sees the other); if so, and someone sleeps, it bumps the
// generation and wakes them: one wake-up per step, and no shared counter to
// bounce between the cores when nobody sleeps. (With 8 ranks on 2 cores,
// per-peer wake-ups made a one-shot cost ~3 times as much.)
//
// Setup is the shm transport's: create, allGather the names, attach, agree,
// unlink every name (each rank all of them). After that nothing is left in
// /dev/shm.
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_pause.h"
#include "core/error.h"
#include "core/log.h"
#include "transports/shm/shm_segment.h"
#include "transports/window.h"

namespace coil::transport {
namespace {

constexpr uint32_t kMagic = 0xC011570Du;
constexpr size_t kPage = 4096;
constexpr size_t kNameBytes = 64;
// WindowControl::closed: the owner is there, left after success, or broke.
constexpr uint32_t kOpen = 0, kLeft = 1, kBroken = 2;

struct alignas(64) HeadLine {
  std::atomic<uint32_t> step;  // the last step that posted this slot
  uint32_t algorithm;
  uint64_t tag;
  uint8_t data[48];
};
struct alignas(64) InlineLine {
  std::atomic<uint32_t> step;  // the step whose data this line holds
  uint8_t data[60];
};
constexpr size_t kHeadBytes = sizeof(HeadLine::data);
constexpr size_t kLineBytes = sizeof(InlineLine::data);
constexpr int kInlineLines = 31;
static_assert(sizeof(HeadLine) == 64 && sizeof(InlineLine) == 64);
static_assert(kHeadBytes + kInlineLines * kLineBytes == Window::kInlineBytes);

struct SlotMail {
  HeadLine head;
  InlineLine more[kInlineLines];
};

struct WindowControl {
  // Written by the owner only; read by every rank.
  SlotMail mail[Window::kSlots];
  // Written by the owner when it goes away: kOpen, kLeft or kBroken.
  alignas(64) std::atomic<uint32_t> closed;
  // Written by the owner each time it starts a wait past its first polls:
  // the CPU it waits on (-1: none yet). The higher rank of two that find
  // each other waiting on one CPU moves off it (waitAll).
  alignas(64) std::atomic<int32_t> waitingCpu;
  // Set once at creation.
  alignas(64) uint32_t magic;
  int32_t pid;
  uint64_t slotBytes;
  // Used in rank 0's segment only: the sleepers' futex word and their count.
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> sleepers;
};
// The control block takes whole pages; the slots follow, page aligned.
constexpr size_t kControlBytes = (sizeof(WindowControl) + kPage - 1) / kPage * kPage;

// Exception-free exit from waitUntil's lambdas (as in slot_fifo.cc).
struct WaitAbandoned {
  WaitFailure why;
  int peer;
};

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// True when `seen` is `step` or later (wrapping).
bool reached(uint32_t seen, uint32_t step) { return static_cast<int32_t>(seen - step) >= 0; }

class ShmWindow final : public Window {
 public:
  ShmWindow(int rank, int nranks, size_t slotBytes, ShmSegment own, std::vector<ShmSegment> peers,
            std::vector<uint8_t*> bases, int spinUs)
      : rank_(rank),
        nranks_(nranks),
        slotBytes_(slotBytes),
        own_(std::move(own)),
        peers_(std::move(peers)),
        bases_(std::move(bases)),
        spinUs_(spinUs),
        hub_(control(0)) {}

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  size_t slotBytes() const override { return slotBytes_; }

  uint8_t* slot(int owner, int index) const override {
    return bases_[owner] + kControlBytes + static_cast<size_t>(index) * slotBytes_;
  }

  // Whole lines are copied with constant-size copies (the compiler inlines
  // them as a few vector moves); only the last, partial line calls memcpy.
  void putInline(int index, const void* data, size_t bytes, uint32_t step) override {
    SlotMail& m = control(rank_)->mail[index];
    const auto* src = static_cast<const uint8_t*>(data);
    HeadImage& head = pending_[index];
    if (bytes <= kHeadBytes) {
      std::memcpy(head.data, src, bytes);
      head.bytes = bytes;
      return;
    }
    std::memcpy(head.data, src, kHeadBytes);
    head.bytes = kHeadBytes;
    size_t done = kHeadBytes;
    InlineLine* line = m.more;
    for (; bytes - done >= kLineBytes; done += kLineBytes, ++line) {
      std::memcpy(line->data, src + done, kLineBytes);
      line->step.store(step, std::memory_order_release);
    }
    if (done < bytes) {
      std::memcpy(line->data, src + done, bytes - done);
      line->step.store(step, std::memory_order_release);
    }
  }
  void getInline(int owner, int index, void* out, size_t bytes) const override {
    const SlotMail& m = control(owner)->mail[index];
    auto* dst = static_cast<uint8_t*>(out);
    if (bytes <= kHeadBytes) return void(std::memcpy(dst, m.head.data, bytes));
    std::memcpy(dst, m.head.data, kHeadBytes);
    size_t done = kHeadBytes;
    const InlineLine* line = m.more;
    for (; bytes - done >= kLineBytes; done += kLineBytes, ++line)
      std::memcpy(dst + done, line->data, kLineBytes);
    if (done < bytes) std::memcpy(dst + done, line->data, bytes - done);
  }

  void stamp(int index, uint64_t tag, uint32_t algorithm) override {
    pending_[index].tag = tag;
    pending_[index].algorithm = algorithm;
  }
  uint64_t stampTag(int owner, int index) const override {
    return control(owner)->mail[index].head.tag;
  }
  uint32_t stampAlgorithm(int owner, int index) const override {
    return control(owner)->mail[index].head.algorithm;
  }
  uint64_t latestStampTag(int owner) const override {
    // The later of the two head steps is the last one posted; its stamp
    // stays until the owner posts two steps more, which needs this rank.
    const SlotMail* mail = control(owner)->mail;
    const uint32_t a = mail[0].head.step.load(std::memory_order_acquire);
    const uint32_t b = mail[1].head.step.load(std::memory_order_acquire);
    if (a == 0 && b == 0) return 0;
    return mail[reached(a, b) ? 0 : 1].head.tag;
  }

  uint32_t posted() const override { return posted_; }

  void post(uint32_t step) override {
    posted_ = step;
    // The head line's stamp and inline bytes, then its step, in one burst:
    // a peer already polling this line takes it back between any two
    // stores that reach it apart, and each store after that pays another
    // transfer of the line.
    HeadImage& image = pending_[step % kSlots];
    HeadLine& head = control(rank_)->mail[step % kSlots].head;
    head.tag = image.tag;
    head.algorithm = image.algorithm;
    std::memcpy(head.data, image.data, image.bytes);
    image.bytes = 0;
    // seq_cst store, then seq_cst loads in allPosted: of two ranks posting
    // at once, at least one sees the other, so the last one wakes sleepers.
    head.step.store(step, std::memory_order_seq_cst);
    if (hub_->sleepers.load(std::memory_order_seq_cst) != 0 && allPosted(step)) {
      hub_->generation.fetch_add(1, std::memory_order_seq_cst);
      futexWakeAll(&hub_->generation);
    }
  }

  void setPolling(int us, bool yield) override {
    spinUs_ = us > 0 ? us : 0;
    yield_ = yield;
  }

  int brokenPeer() const override {
    for (int q = 0; q < nranks_; ++q)
      if (q != rank_ && control(q)->closed.load(std::memory_order_relaxed) == kBroken) return q;
    return -1;
  }

  std::vector<int> notPosted(uint32_t step) const override {
    std::vector<int> missing;
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && !posted(p, step)) missing.push_back(p);
    return missing;
  }

  bool waitAll(uint32_t step, const WaitWatch& watch, int* peer, WaitFailure* why,
               size_t inlineBytes) override {
    // Poll while a peer is (very likely) running on another core: the head
    // lines, and the inline lines the caller will read, all in one sweep.
    const int lines = inlineBytes > kHeadBytes
                          ? static_cast<int>((inlineBytes - kHeadBytes + kLineBytes - 1) / kLineBytes)
                          : 0;
    auto arrived = [&](int q) {
      const SlotMail& m = control(q)->mail[step % kSlots];
      bool all = reached(m.head.step.load(std::memory_order_acquire), step);
      for (int i = 0; i < lines; ++i)
        all = reached(m.more[i].step.load(std::memory_order_acquire), step) && all;
      return all;
    };
    int q = 0;
    Clock::time_point until{};  // read only once the first polls failed
    CoreHandover handover;      // pausing: a peer on this core gets it now and then
    bool cpuChecked = false;
    for (bool more = true; more;) {
      for (int i = 0; i < (yield_ ? 1 : 64); ++i) {
        while (q < nranks_ && (q == rank_ || arrived(q))) ++q;
        if (q == nranks_) return prepareNext(step, lines), true;
        if (yield_) sched_yield();
        else cpuPause();
      }
      const Clock::time_point now = Clock::now();
      if (until == Clock::time_point{}) {
        until = now + std::chrono::microseconds(spinUs_);
      } else if (!cpuChecked && !yield_) {
        // A pausing wait past two rounds of polls. Two ranks on one core
        // (cpu_pause.h): polling only delays the peer, and the scheduler
        // keeps them together, so the higher rank of the two moves off (at
        // most once a millisecond: a rank that keeps meeting peers on its
        // core has more peers than cores).
        cpuChecked = true;
        const int cpu = sched_getcpu();
        control(rank_)->waitingCpu.store(cpu, std::memory_order_relaxed);
        if (cpu >= 0 && rank_ > q && control(q)->waitingCpu.load(std::memory_order_relaxed) == cpu &&
            now - lastMove_ > std::chrono::milliseconds(1) && moveOffCpu(cpu) >= 0)
          lastMove_ = now;
      }
      if (!yield_) handover.poll(now);
      more = spinUs_ > 0 && now < until;
    }
    // Sleep on the hub until every rank has posted `step` (a posted head
    // line orders the inline lines written before it).
    try {
      waitUntil(
          hub_->generation, hub_->sleepers, [&] { return allPosted(step); },
          [&] {
            if (watch.abortFlag && watch.abortFlag->load(std::memory_order_relaxed))
              throw WaitAbandoned{WaitFailure::Aborted, firstMissing(step)};
            watch.checkStall();
            for (int p = 0; p < nranks_; ++p) {
              if (p == rank_ || posted(p, step)) continue;
              // Closed or gone, and STILL not posted: a peer may post, finish
              // and exit between a first look at its step and a look at its
              // flags (a preempted waiter makes that window long).
              WaitFailure why;
              if (control(p)->closed.load()) why = WaitFailure::PeerClosed;
              else if (processGone(control(p)->pid)) why = WaitFailure::PeerDied;
              else continue;
              if (!posted(p, step)) throw WaitAbandoned{why, p};
            }
          },
          watch.deadline, [&] { throw WaitAbandoned{WaitFailure::Timeout, firstMissing(step)}; });
    } catch (const WaitAbandoned& w) {
      *why = w.why;
      *peer = w.peer;
      return false;
    }
    prepareNext(step, lines);
    return true;
  }

  void close(bool broken) noexcept override {
    WindowControl* c = control(rank_);
    const uint32_t state = broken ? kBroken : kLeft;
    uint32_t seen = c->closed.load();
    while (seen < state && !c->closed.compare_exchange_weak(seen, state)) {
    }
    if (seen >= state) return;
    hub_->generation.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&hub_->generation);  // sleepers re-check and see the flag
  }

  const char* name() const override { return "shm window"; }

 private:
  WindowControl* control(int owner) const {
    return reinterpret_cast<WindowControl*>(bases_[owner]);
  }
  // Rank q's head line of `step`'s slot holds step - kSlots or `step`: no
  // rank can post step + kSlots before this one posts step + 1.
  bool posted(int q, uint32_t step) const {
    return reached(control(q)->mail[step % kSlots].head.step.load(std::memory_order_seq_cst), step);
  }
  bool allPosted(uint32_t step) const {
    for (int q = 0; q < nranks_; ++q)
      if (q != rank_ && !posted(q, step)) return false;
    return true;
  }
  // Every rank has posted `step`, so every peer is done with this rank's
  // lines of step - 1: fetch them for writing now (the same count as this
  // step used), so that the next post does not wait for their transfer back.
  void prepareNext(uint32_t step, int lines) const {
    SlotMail& m = control(rank_)->mail[(step + 1) % kSlots];
    prefetchForWrite(&m.head);
    for (int i = 0; i < lines; ++i) prefetchForWrite(&m.more[i]);
  }
  static void prefetchForWrite(const void* line) {
#if defined(__x86_64__)
    // PREFETCHW (the CPUs without it execute it as a no-op).
    asm volatile("prefetchw (%0)" : : "r"(line));
#else
    __builtin_prefetch(line, 1, 3);
#endif
  }
  int firstMissing(uint32_t step) const {
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && !posted(p, step)) return p;
    return rank_ == 0 ? 1 : 0;
  }

  int rank_;
  int nranks_;
  size_t slotBytes_;
  ShmSegment own_;
  std::vector<ShmSegment> peers_;
  std::vector<uint8_t*> bases_;  // by rank
  int spinUs_;
  Clock::time_point lastMove_{};  // when waitAll last moved this rank off its peer's core
  bool yield_ = false;
  WindowControl* hub_;  // rank 0's control page: the sleepers' futex word
  uint32_t posted_ = 0;
  // What post() writes into each slot's head line before its step.
  struct HeadImage {
    uint64_t tag = 0;
    uint32_t algorithm = 0;
    size_t bytes = 0;  // inline bytes waiting (0: none)
    alignas(16) uint8_t data[kHeadBytes] = {};
  };
  HeadImage pending_[kSlots];
};

std::string windowSegmentName(const std::string& commLabel, int rank) {
  return "/coil-" + commLabel + "-w" + std::to_string(rank);
}

}  // namespace

std::unique_ptr<Window> openHostWindow(SetupContext& ctx, bool wanted,
                                       const WindowOptions& options) {
  if (ctx.nranks <= 1) return nullptr;
  for (const PeerInfo& p : ctx.peers)
    if (p.hostHash != ctx.peers[ctx.rank].hostHash) wanted = false;
  const size_t slotBytes = roundUp(std::max<size_t>(options.slotBytes, kPage), kPage);
  const size_t segmentBytes = kControlBytes + Window::kSlots * slotBytes;

  // 1. Own segment (only if this rank wants a window). A window is an
  //    optimisation: if /dev/shm cannot hold it, the FIFO algorithms run.
  ShmSegment own;
  if (wanted) {
    try {
      own = ShmSegment::create(windowSegmentName(ctx.commLabel, ctx.rank), segmentBytes,
                               /*reserve=*/true);
    } catch (const Error& e) {
      COIL_WARN(kShm, "rank ", ctx.rank, ": no shared window (", e.what(),
                "); all-reduce uses the FIFO algorithms");
    }
  }
  if (own.base() != nullptr) {
    auto* c = static_cast<WindowControl*>(own.base());
    for (SlotMail& m : c->mail) {
      m.head.step.store(0);
      for (InlineLine& l : m.more) l.step.store(0);
    }
    c->generation.store(0);
    c->sleepers.store(0);
    c->closed.store(kOpen);
    c->magic = kMagic;
    c->pid = static_cast<int32_t>(getpid());
    c->waitingCpu.store(-1, std::memory_order_relaxed);
    c->slotBytes = slotBytes;
  }

  std::vector<std::string> everyName;
  for (int r = 0; r < ctx.nranks; ++r) everyName.push_back(windowSegmentName(ctx.commLabel, r));
  UnlinkNamesOnFailure cleanup(std::move(everyName));

  // 2. Names. An empty name anywhere: no window for anyone.
  struct NameRecord {
    char name[kNameBytes];
    uint64_t bytes;
  };
  std::vector<NameRecord> names(static_cast<size_t>(ctx.nranks));
  std::memset(names.data(), 0, names.size() * sizeof(NameRecord));
  std::snprintf(names[ctx.rank].name, kNameBytes, "%s", own.name().c_str());
  names[ctx.rank].bytes = own.size();
  ctx.oob.allGather(names.data(), sizeof(NameRecord));
  for (const NameRecord& rec : names)
    if (rec.name[0] == '\0') {
      cleanup.unlinkAll();  // nobody will attach (and a rank killed now cannot unlink its own)
      return nullptr;
    }
  for (int r = 0; r < ctx.nranks; ++r)
    if (names[r].bytes != segmentBytes)
      fail(coilInvalidUsage, "shm window: rank ", r, " uses ", names[r].bytes,
           "-byte segments, this rank ", segmentBytes,
           ": COIL_SHM_WINDOW_BYTES must be the same on every rank");

  // 3. Attach every peer's segment.
  std::vector<ShmSegment> peers;
  std::vector<uint8_t*> bases(static_cast<size_t>(ctx.nranks), nullptr);
  bases[ctx.rank] = static_cast<uint8_t*>(own.base());
  std::string attachError;
  for (int r = 0; r < ctx.nranks && attachError.empty(); ++r) {
    if (r == ctx.rank) continue;
    try {
      peers.push_back(ShmSegment::attach(
          std::string(names[r].name, strnlen(names[r].name, kNameBytes)), names[r].bytes));
      auto* c = static_cast<const WindowControl*>(peers.back().base());
      if (c->magic != kMagic || c->slotBytes != slotBytes)
        fail(coilInternalError, "shm window: segment of rank ", r, " is malformed");
      bases[r] = static_cast<uint8_t*>(peers.back().base());
    } catch (const Error& e) {
      attachError = e.what();
    }
  }

  // 4. Everyone attached (this exchange is also the barrier after which the
  //    names can go). A rank that could not attach: no window for anyone.
  std::vector<uint8_t> attached(static_cast<size_t>(ctx.nranks), 0);
  attached[ctx.rank] = attachError.empty() ? 1 : 0;
  ctx.oob.allGather(attached.data(), 1);
  // Every rank attached or gave up: every name goes, the peers' too (a rank
  // killed between this exchange and its own unlink would leave its segment).
  cleanup.unlinkAll();
  own.unlink();
  for (int r = 0; r < ctx.nranks; ++r) {
    if (attached[r]) continue;
    COIL_WARN(kShm, "rank ", ctx.rank, ": no shared window: rank ", r, " could not attach",
              r == ctx.rank ? " (" + attachError + ")" : std::string(),
              "; all-reduce uses the FIFO algorithms");
    return nullptr;
  }

  const int spinUs = std::max(0, options.spinUs);
  COIL_INFO(kShm, "rank ", ctx.rank, ": shm window of ", ctx.nranks, " ranks, ", Window::kSlots,
            " x ", slotBytes / 1024, " KiB slots per rank, spin ", spinUs, " us");
  return std::make_unique<ShmWindow>(ctx.rank, ctx.nranks, slotBytes, std::move(own),
                                     std::move(peers), std::move(bases), spinUs);
}

}  // namespace coil::transport
