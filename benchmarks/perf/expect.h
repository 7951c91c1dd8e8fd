// What every collective should produce, from the value rules of check.h.
//
// Inputs: reductions give every rank fillInput's values over its whole send
// buffer (element i of the operation = element i of every rank's buffer);
// copies give rank r fillCopyInput(r, offset 0) over its send buffer.
// Expected outputs on rank `rank` (block = the call's count):
//   allreduce      all of recv = reduction of element i
//   broadcast      recv = the root's data
//   reduce         root: recv = reduction; other ranks: nothing
//   allgather      block q of recv = rank q's data
//   reducescatter  recv = reduction of elements rank*block + j
//   alltoall       block q of recv = rank q's data at rank*block + j
//   gather         root: block q = rank q's data; other ranks: nothing
//   scatter        recv = the root's data at rank*block + j
//   sendrecv       recv = data of rank (rank-1+n)%n
// The sources differ per rank and per element, so a block from the wrong
// rank or at the wrong offset is caught.
#pragma once

#include "check.h"
#include "collectives.h"

namespace coil_perf {

/// Writes this rank's input of `call` into call.send (layout.sendCount
/// elements; nothing on ranks that send nothing, e.g. a broadcast's
/// non-roots). For in-place calls call.send points inside call.recv.
void fillCollectiveInput(const CollCall& call, const Layout& layout, int rank, int nranks);

/// Poisons call.recv (layout.recvCount elements) on the ranks that receive.
/// Call it before fillCollectiveInput, so an in-place input survives.
void poisonCollectiveOutput(const CollCall& call, const Layout& layout, int rank);

/// Compares what `call` left in call.recv on this rank with the expected
/// values (an empty report on ranks that receive nothing).
WrongReport checkCollectiveOutput(const CollCall& call, const Layout& layout, int rank,
                                  int nranks);

/// True when rank `rank` receives a result in `call` (false for the
/// non-roots of reduce and gather).
bool receivesResult(const CollCall& call, int rank);

}  // namespace coil_perf
