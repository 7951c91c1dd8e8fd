// The all-reduce programs over a shared-memory window (transports/window.h),
// written once over a small vocabulary and run by two executors:
//   WindowExecutor (window_allreduce.cc) — real data in the window's slots;
//   WindowTrace    (window_trace.h)      — records every call, for the
//                                          schedule tests and coil-sim.
// The programs are templates over the executor, so the real one's calls are
// inlined: the one-shot serves the smallest, most latency-bound calls coil
// has (a quarter of a microsecond), where a virtual call per step would show.
//
// The executor's vocabulary (offsets and counts in elements; "my slot k" is
// this rank's slot k, which only it writes and every rank may read after
// waiting for the step that filled it):
//   nextStep()                        the step after the last one posted
//   put(k, in, at, n, inlined)        my slot k [at, at+n) ← input [in, in+n)
//                                     (inlined: in the slot's inline lines, which
//                                     travel with the step)
//   post(step, k)                     stamp my slot k with the call, publish step
//   wait(step, inlineElems)           until every rank has posted step (the one
//                                     wait: deadline, abort, peers' liveness, and
//                                     that every peer's slot belongs to this call)
//   reduceToOutput(k, at, out, n, own, inlined)
//                                     output [out, out+n) ← fin(x0 ⊕ … ⊕ x(n-1)),
//                                     xq = rank q's slot k [at, at+n); this rank's
//                                     own term from its input [out, …) or its slot
//   reduceToSlot(k, at, j, n, in)     my slot j [at, at+n) ← fin(x0 ⊕ … ⊕ x(n-1)),
//                                     xq = rank q's slot k [at, …), own term from
//                                     input [in, in+n)
//   copyOut(q, k, at, out, n)         output [out, out+n) ← rank q's slot k [at, at+n)
//   joined()                          every rank is in the call (a tuning hook)
//   done()                            the program is over (fences streaming stores)
// Every rank reduces in the fixed order x0 ⊕ x1 ⊕ … ⊕ x(n-1), and fin()
// (coilAvg's division) happens once per element, so all ranks get the same
// bits, run after run.
//
// The step protocol: at step s a rank writes its slot s % 2, posts s, waits
// for every rank to post s, then reads their step-s slots, and only before it
// posts s + 1. So when it writes slot s % 2 again at step s + 2, every peer
// has posted s + 1 and is done with step s.
//
// Cost per rank (S bytes, n ranks, pieces of P bytes, α one handshake, β a
// copied byte, γ a reduced byte):
//   one-shot  α + S·β + (n-1)·S·γ
//   slice     2·⌈S/P⌉·α + (2n-1)/n·S·β + (n-1)/n·S·γ
//   direct    3·α + (n-1)/n·S·β + (n-1)/n·S·γ   (device windows only, below;
//             all-gather 2·α + (n-1)·B·β, reduce-scatter 2·α + (n-1)·B·γ for
//             blocks of B bytes; the others 2·α and what each program says)
//   peer      the other collectives through the slots (device peer windows
//             only, at the end of this file): ⌈B/P⌉ + 1 handshakes and, per
//             rank, at most (n+1)·B·β and (n-1)·B·γ (each program says)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace coil::algo {

/// One window all-reduce, as the programs see it.
struct WindowShape {
  int rank;
  int nranks;
  size_t count;       // elements
  size_t lineElems;   // elements per cache line: slices start on lines, so two
                      // ranks never write the same line of a slot or the output
  size_t pieceElems;  // slice: elements per piece (whole line-slices for n ranks)
  bool inlined;       // one-shot: the input fits a slot's inline lines
  int root = 0;       // the rooted collectives' (peer and direct programs)
};

/// Where a reduction's own term comes from.
enum class OwnTerm { kInput, kSlot };

/// One-shot: every rank puts its whole input in its slot, posts one step,
/// and reduces all n slots into its output. One handshake: the latency
/// choice for small messages.
template <class Executor>
void windowOneShotProgram(Executor& w, const WindowShape& s) {
  const uint32_t step = w.nextStep();
  const int slot = static_cast<int>(step % 2);
  w.put(slot, 0, 0, s.count, s.inlined);
  w.post(step, slot);
  w.wait(step, s.inlined ? s.count : 0);
  // Inlined, this rank's own term comes straight from its input; otherwise
  // from its slot, which keeps an in-place call (input == output) right.
  w.reduceToOutput(slot, 0, 0, s.count, s.inlined ? OwnTerm::kInput : OwnTerm::kSlot, s.inlined);
  w.done();
}

/// Slice: the buffer in pieces, each piece in n slices. Rank r reduces
/// slice r of the piece from all n inputs and publishes it; every rank then
/// copies the other slices out. Each rank moves ~2S bytes and reduces S/n:
/// the bandwidth choice for large messages. In place works: a piece's input
/// slices are read before the same piece's output slices are written.
template <class Executor>
void windowSliceProgram(Executor& w, const WindowShape& s) {
  const int n = s.nranks, r = s.rank;
  for (size_t base = 0; base < s.count; base += s.pieceElems) {
    const size_t len = std::min(s.pieceElems, s.count - base);
    const size_t sliceElems = ((len + n - 1) / n + s.lineElems - 1) / s.lineElems * s.lineElems;
    auto begin = [&](int q) { return std::min(len, static_cast<size_t>(q) * sliceElems); };
    auto size = [&](int q) { return begin(q + 1) - begin(q); };

    // Step s: hand every other rank its slice of this rank's input.
    const uint32_t step = w.nextStep();
    const int a = static_cast<int>(step % 2), b = static_cast<int>((step + 1) % 2);
    for (int q = 0; q < n; ++q)
      if (q != r && size(q) != 0) w.put(a, base + begin(q), begin(q), size(q), false);
    w.post(step, a);
    w.wait(step, 0);
    if (base == 0) w.joined();
    // Slot b held step s-1, which every peer finished before posting s.
    if (size(r) != 0) w.reduceToSlot(a, begin(r), b, size(r), base + begin(r));

    // Step s + 1: publish the reduced slice, keep it, collect the others.
    w.post(step + 1, b);
    if (size(r) != 0) w.copyOut(r, b, begin(r), base + begin(r), size(r));
    w.wait(step + 1, 0);
    for (int q = 0; q < n; ++q)
      if (q != r && size(q) != 0) w.copyOut(q, b, begin(q), base + begin(q), size(q));
  }
  w.done();
}

/// Direct: no slots, for buffers that are themselves in the window (device
/// buffers every rank registered as a window, coilCommWindowRegister:
/// registered_collectives.h runs it on GPUs). Rank q's "slot 0" is its input
/// and its "slot 1" its output, read by its peers in place. Rank r reduces
/// slice r of every rank's input into its output, then copies every other
/// slice from its owner's output. Nothing goes through a slot: each rank
/// reads S + (n-1)/n·S bytes and writes S. In place works: in the reduce a
/// rank writes only its own slice, which no peer reads then; in the copies
/// it writes the others, which no peer reads then. The third step ends the
/// call: until every rank has posted it, a peer may still read its output.
/// No host engine runs it (its shm window holds slots, not the caller's
/// buffers); coil-sim shows it.
template <class Executor>
void windowDirectProgram(Executor& w, const WindowShape& s) {
  constexpr int kInput = 0, kOutput = 1;
  const int n = s.nranks, r = s.rank;
  const size_t sliceElems =
      ((s.count + n - 1) / n + s.lineElems - 1) / s.lineElems * s.lineElems;
  auto begin = [&](int q) { return std::min(s.count, static_cast<size_t>(q) * sliceElems); };
  auto size = [&](int q) { return begin(q + 1) - begin(q); };

  const uint32_t step = w.nextStep();
  w.post(step, kInput);  // my input is ready to be read
  w.wait(step, 0);
  w.joined();
  if (size(r) != 0) w.reduceToOutput(kInput, begin(r), begin(r), size(r), OwnTerm::kInput, false);
  w.post(step + 1, kOutput);  // my slice of the result is ready
  w.wait(step + 1, 0);
  for (int q = 0; q < n; ++q)
    if (q != r && size(q) != 0) w.copyOut(q, kOutput, begin(q), begin(q), size(q));
  // I read no peer any more. It stamps my input, which every rank had read
  // before posting step + 1; my output may still be read until all post.
  w.post(step + 2, kInput);
  w.wait(step + 2, 0);
  w.done();
}

/// Direct all-gather (device windows only; count: elements a rank gives).
/// Each rank first places its own block in its output (nothing to do in
/// place, where its input is that block), then, once every rank has, copies
/// every other block from its owner's output: only the outputs need to be
/// windows, and the places compared are the outputs'. The second step ends
/// the call.
template <class Executor>
void windowDirectAllGatherProgram(Executor& w, const WindowShape& s) {
  constexpr int kInput = 0, kOutput = 1;
  const int n = s.nranks, r = s.rank;
  auto block = [&](int q) { return static_cast<size_t>(q) * s.count; };
  const uint32_t step = w.nextStep();
  if (s.count != 0) w.copyOut(r, kInput, 0, block(r), s.count);
  w.post(step, kOutput);  // my block is in my output
  w.wait(step, 0);
  w.joined();
  for (int q = 0; q < n; ++q)
    if (q != r && s.count != 0) w.copyOut(q, kOutput, block(q), block(q), s.count);
  w.post(step + 1, kInput);  // I read no peer any more
  w.wait(step + 1, 0);
  w.done();
}

/// Direct broadcast: the root's output is read (so, as for the all-gather,
/// only the outputs need to be windows: every rank passes one, where only
/// the root passes an input). The root first places its input in its
/// output (nothing to do in place); once it has, every other rank copies
/// the root's output into its own. The second step ends the call: until
/// then a peer may still read the root's output. Per rank: 2·α + B·β (the
/// root, in place, none).
template <class Executor>
void windowDirectBroadcastProgram(Executor& w, const WindowShape& s) {
  constexpr int kInput = 0, kOutput = 1;
  const uint32_t step = w.nextStep();
  if (s.rank == s.root && s.count != 0) w.copyOut(s.root, kInput, 0, 0, s.count);
  w.post(step, kOutput);  // the root's output holds the data
  w.wait(step, 0);
  w.joined();
  if (s.rank != s.root && s.count != 0) w.copyOut(s.root, kOutput, 0, 0, s.count);
  w.post(step + 1, kInput);  // I read no peer any more
  w.wait(step + 1, 0);
  w.done();
}

// The direct programs that read only inputs (device windows only): the
// reduce-scatter, the reduce and the all-to-all. Each reads the peers'
// inputs where they lie, so only the inputs need to be windows (at the same
// place on every rank: a rank reads its peers at its own offsets), and each
// writes only its own output. Two steps: "my input is ready to be read",
// then "I read no peer any more"; until every rank has posted the second, a
// peer may still read this rank's input. In place works (an all-to-all
// never runs in place: the C API refuses it, and its output would be the
// input its peers read). count: a rank's block where there are blocks, as
// the C API's. There is no direct scatter (its
// root's input is the one buffer read, and the other ranks pass none, so
// they could not tell alone that the call runs on windows) and no direct
// gather (the root's input in place is its block of its output, at
// another place in the window than the other ranks' inputs).

// Calls `read` between the two steps. The second stamps the output, which
// no peer reads: a peer still reading this rank's input reads what the
// first step published.
template <class Executor, class Read>
void windowDirectRead(Executor& w, Read&& read) {
  constexpr int kInput = 0, kOutput = 1;
  const uint32_t step = w.nextStep();
  w.post(step, kInput);  // my input is ready to be read
  w.wait(step, 0);
  w.joined();
  read();
  w.post(step + 1, kOutput);  // I read no peer any more
  w.wait(step + 1, 0);
  w.done();
}

/// Direct reduce-scatter (device windows only; count: elements a rank
/// gets). Rank r reduces block r of every rank's input, where it lies, into
/// its output; its own term is block r of its own input (in place that is
/// its output: the one-launch chain allows it). Only the inputs need to be
/// windows.
template <class Executor>
void windowDirectReduceScatterProgram(Executor& w, const WindowShape& s) {
  const size_t mine = static_cast<size_t>(s.rank) * s.count;
  windowDirectRead(w, [&] {
    if (s.count != 0) w.reduceToOutput(0, mine, 0, s.count, OwnTerm::kSlot, false);
  });
}

/// Direct reduce: the root reduces every rank's input, in rank order, into
/// its output; its own term is its input. Per rank: 2·α; the root also
/// (n-1)·B·γ.
template <class Executor>
void windowDirectReduceProgram(Executor& w, const WindowShape& s) {
  windowDirectRead(w, [&] {
    if (s.rank == s.root && s.count != 0)
      w.reduceToOutput(0, 0, 0, s.count, OwnTerm::kInput, false);
  });
}

/// Direct all-to-all (count: elements per block): rank r copies block r
/// of every rank's input into block q of its output. Per rank: 2·α +
/// n·B·β, against the peer program's 2·n·B·β and ⌈B/P⌉ + 1 handshakes.
template <class Executor>
void windowDirectAllToAllProgram(Executor& w, const WindowShape& s) {
  windowDirectRead(w, [&] {
    if (s.count != 0)
      for (int q = 0; q < s.nranks; ++q)
        w.copyOut(q, 0, static_cast<size_t>(s.rank) * s.count, static_cast<size_t>(q) * s.count,
                  s.count);
  });
}

// The peer programs: every other collective through the slots, pipelined
// in pieces, for device buffers on the peer windows (device_window_
// collectives.h runs them; no host engine does). pieceElems: elements of
// one rank's block per piece, B: count, a rank's block. The programs that
// hand each rank its own block (reduce-scatter, all-to-all, scatter) put n
// pieces in a slot, side by side at q·P; the others one. Each piece is one
// step: put into my slot a = step % 2, post, wait, read the peers' slot a,
// so the step protocol above holds (a slot is written again two steps
// later, when every peer has posted the step between). A rank's own block
// goes through its own slot like the others': the program cannot tell an
// in-place call from another, and its own term of a reduction read from
// the slot never aliases the output (a chain launch over more than
// device::kChainSourcesPerLaunch terms could not take it in place).

namespace peer_detail {

// Calls piece(base, len, step, slot) for each piece of a block of `count`
// elements, and ends the program.
template <class Executor, class Piece>
void inPieces(Executor& w, const WindowShape& s, Piece&& piece) {
  for (size_t base = 0; base < s.count; base += s.pieceElems) {
    const uint32_t step = w.nextStep();
    piece(base, std::min(s.pieceElems, s.count - base), step, static_cast<int>(step % 2));
    if (base == 0) w.joined();
  }
  w.done();
}

inline size_t blockAt(int q, size_t count) { return static_cast<size_t>(q) * count; }

// Publishes my slot of `step` and waits until every rank has published its.
template <class Executor>
void exchange(Executor& w, uint32_t step, int slot) {
  w.post(step, slot);
  w.wait(step, 0);
}

// The piece [base, base+len) of each of my input's n blocks into my slot,
// block q's at q·P.
template <class Executor>
void putEveryBlock(Executor& w, const WindowShape& s, int slot, size_t base, size_t len) {
  for (int q = 0; q < s.nranks; ++q)
    w.put(slot, blockAt(q, s.count) + base, static_cast<size_t>(q) * s.pieceElems, len, false);
}

// Rank q's piece at `at` of its slot into block q of my output, every q.
template <class Executor>
void copyEveryBlock(Executor& w, const WindowShape& s, int slot, size_t at, size_t base,
                    size_t len) {
  for (int q = 0; q < s.nranks; ++q) w.copyOut(q, slot, at, blockAt(q, s.count) + base, len);
}

}  // namespace peer_detail

/// Peer all-gather (count: elements a rank gives). Each piece of my block
/// goes into my slot; every rank copies every rank's piece into its block
/// of the output. Per rank: B·β put, n·B·β copied out.
template <class Executor>
void windowPeerAllGatherProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    w.put(a, base, 0, len, false);
    exchange(w, step, a);
    copyEveryBlock(w, s, a, 0, base, len);
  });
}

/// Peer reduce-scatter (count: elements a rank gets). Each piece of every
/// block of my input goes into my slot, block q's at q·P; rank r reduces
/// the piece at r·P of every rank's slot, in rank order, into its output.
/// Per rank: n·B·β put, (n-1)·B·γ.
template <class Executor>
void windowPeerReduceScatterProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  const size_t mine = static_cast<size_t>(s.rank) * s.pieceElems;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    putEveryBlock(w, s, a, base, len);
    exchange(w, step, a);
    w.reduceToOutput(a, mine, base, len, OwnTerm::kSlot, false);
  });
}

/// Peer all-to-all (count: elements per block). Each piece of every block
/// of my input goes into my slot, block q's at q·P; rank r copies the piece
/// at r·P of rank q's slot into its block q. Per rank: n·B·β put, n·B·β
/// copied out.
template <class Executor>
void windowPeerAllToAllProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  const size_t mine = static_cast<size_t>(s.rank) * s.pieceElems;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    putEveryBlock(w, s, a, base, len);
    exchange(w, step, a);
    copyEveryBlock(w, s, a, mine, base, len);
  });
}

/// Peer broadcast. The root puts each piece in its slot; every rank (the
/// root too) copies it into its output. Per rank: B·β (the root 2·B·β).
template <class Executor>
void windowPeerBroadcastProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    if (s.rank == s.root) w.put(a, base, 0, len, false);
    exchange(w, step, a);
    w.copyOut(s.root, a, 0, base, len);
  });
}

/// Peer reduce. Every rank puts each piece in its slot; the root reduces
/// the n slots, in rank order, into its output. Per rank: B·β; the root
/// also (n-1)·B·γ.
template <class Executor>
void windowPeerReduceProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    w.put(a, base, 0, len, false);
    exchange(w, step, a);
    if (s.rank == s.root) w.reduceToOutput(a, 0, base, len, OwnTerm::kSlot, false);
  });
}

/// Peer gather (count: elements a rank gives). Every rank puts each piece
/// of its block in its slot; the root copies every rank's into its block
/// of the output. Per rank: B·β; the root also n·B·β.
template <class Executor>
void windowPeerGatherProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    w.put(a, base, 0, len, false);
    exchange(w, step, a);
    if (s.rank == s.root) copyEveryBlock(w, s, a, 0, base, len);
  });
}

/// Peer scatter (count: elements a rank gets). The root puts each piece of
/// every block of its input in its slot, block q's at q·P; rank r copies
/// the piece at r·P into its output. Per rank: B·β; the root also n·B·β.
template <class Executor>
void windowPeerScatterProgram(Executor& w, const WindowShape& s) {
  using namespace peer_detail;
  const size_t mine = static_cast<size_t>(s.rank) * s.pieceElems;
  inPieces(w, s, [&](size_t base, size_t len, uint32_t step, int a) {
    if (s.rank == s.root) putEveryBlock(w, s, a, base, len);
    exchange(w, step, a);
    w.copyOut(s.root, a, mine, base, len);
  });
}

}  // namespace coil::algo
