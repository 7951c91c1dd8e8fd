// --calibrate and --predict: coil_perf as the cost model's measuring tool.
//
// --calibrate FILE measures α, β, γ of the transport in use and writes them
// to FILE (model_fit.h has the format). Method:
//  1. all-gather (it has only the ring, so COIL_ALGO does not matter) at
//     every size of the -b/-e/-f sweep; T = (n-1)·α + (n-1)/n·S·β is
//     fitted by least squares of the relative error (model_fit.h), which
//     weighs the small sizes (α) and the large ones (β) alike.
//  2. ring all-reduce on a communicator created with
//     COIL_ALGO=allreduce:ring (coil reads COIL_ALGO when a communicator is
//     created, so a child communicator is split off with the variable set)
//     at the sweep's sizes from 256 KiB up; with α and β fixed, γ is fitted
//     to T = 2(n-1)·rounds·α + 2(n-1)/n·S·β + (n-1)/n·S·γ. rounds =
//     ceil(S / (n·chunk)) uses predict.h's estimate of coil's chunk (the
//     public API does not report it); at these sizes the α term is a few
//     per cent of T, so an error in the estimate moves γ little.
// Every call is in place (nccl-tests' pointers): coil's out-of-place
// all-gather also copies the rank's own block, a local copy of S/n bytes
// that the model does not count (at n = 2 as many bytes as the ring sends).
// On each communicator, calls at the largest size run for 0.5 s before the
// first timed size: nccl-tests' warm-up, made long enough for the kernel to
// spread freshly started ranks over the cores. Each size is then timed in 5
// repetitions of the -w/-n loop (each the maximum over ranks of the mean
// per call). The best repetition is fitted: on a shared host the others
// include time in which another process held a core, which is the host's
// load and not the transport's cost; the median is printed beside it, so
// the size of that disturbance shows. Then the fit's predictions are
// printed next to the measurements.
//
// --predict prints, for every size of the sweep, the all-reduce time the
// cost model predicts for ring and for tree (parameters from --model FILE,
// or from this run's --calibrate) next to the time measured with
// COIL_ALGO=allreduce:ring and COIL_ALGO=allreduce:tree (two communicators
// split off as above), best and median, with the model's relative error
// against the best.
#pragma once

#include <string>
#include <vector>

#include "launch.h"
#include "options.h"

namespace coil_perf {

/// Runs --calibrate and/or --predict (calibration first) on `self`'s
/// communicator; `rankHosts` is the "pid P on HOST" text of every rank.
/// Rank 0 (`printer`) prints and writes the file. Every rank must call it.
/// Throws UsageError when the run cannot calibrate (one rank; a transport
/// that cannot be told), std::runtime_error / CoilFailure otherwise.
void runModelTools(const Options& opts, const Participant& self,
                   const std::vector<std::string>& rankHosts, bool printer);

}  // namespace coil_perf
