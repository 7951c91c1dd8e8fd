/*
 * NCCL's "one device per process" example, host only. NCCL's version uses
 * MPI to start the processes and to broadcast the unique id; here a tiny
 * launcher forks NRANKS processes and sends them the id through a pipe.
 * Each process creates its rank with ncclCommInitRank, runs all-reduce,
 * broadcast, in-place ncclBcast and reduce, checks every value, then makes
 * a second communicator with ncclCommInitRankScalable from two ids.
 *
 * Kept as NCCL source (see single_thread_many_ranks.c for what the porting
 * suite does and what differs from a GPU program).
 *
 * Usage: one_rank_per_process NRANKS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

#define NCCLCHECK(cmd)                                                             \
  do {                                                                             \
    ncclResult_t r_ = (cmd);                                                       \
    if (r_ != ncclSuccess) {                                                       \
      printf("Failed, NCCL error %s:%d '%s': %s\n", __FILE__, __LINE__,            \
             ncclGetErrorString(r_), ncclGetLastError(NULL));                      \
      exit(EXIT_FAILURE);                                                          \
    }                                                                              \
  } while (0)

#define NIDS 2

static int check(int ok, int rank, const char* what) {
  if (!ok) printf("FAIL: rank %d: %s\n", rank, what);
  return ok ? 0 : 1;
}

static int runRank(int myRank, int nRanks, ncclUniqueId* ids) {
  int errors = 0;
  const size_t size = 300000;
  float* sendbuff = malloc(size * sizeof(float));
  float* recvbuff = malloc(size * sizeof(float));
  for (size_t i = 0; i < size; ++i) sendbuff[i] = (float)myRank + 0.5f * (float)(i % 3);

  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, nRanks, ids[0], myRank));

  NCCLCHECK(ncclAllReduce(sendbuff, recvbuff, size, ncclFloat, ncclSum, comm, NULL));
  for (size_t i = 0; i < size; ++i) {
    const float want = (float)(nRanks * (nRanks - 1) / 2) + (float)nRanks * 0.5f * (float)(i % 3);
    if (recvbuff[i] != want) {
      errors += check(0, myRank, "allreduce sum");
      break;
    }
  }

  const int root = 1 % nRanks;
  NCCLCHECK(ncclBroadcast(sendbuff, recvbuff, size, ncclFloat, root, comm, NULL));
  errors += check(recvbuff[4] == (float)root + 0.5f, myRank, "broadcast");

  for (size_t i = 0; i < size; ++i) recvbuff[i] = myRank == nRanks - 1 ? (float)i : 0.0f;
  NCCLCHECK(ncclBcast(recvbuff, size, ncclFloat, nRanks - 1, comm, NULL));
  errors += check(recvbuff[size - 1] == (float)(size - 1), myRank, "bcast in place");

  int64_t factor = myRank + 1, product = 0;
  NCCLCHECK(ncclReduce(&factor, &product, 1, ncclInt64, ncclProd, nRanks - 1, comm, NULL));
  if (myRank == nRanks - 1) {
    int64_t want = 1;
    for (int r = 1; r <= nRanks; ++r) want *= r;
    errors += check(product == want, myRank, "reduce product");
  }
  NCCLCHECK(ncclCommDestroy(comm));

  /* Scalable init: every rank passes the same ids. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NCCLCHECK(ncclCommInitRankScalable(&comm, nRanks, myRank, NIDS, ids + 1, &config));
  double d = 1.0 / (double)(1 << myRank), total = 0;
  NCCLCHECK(ncclAllReduce(&d, &total, 1, ncclDouble, ncclSum, comm, NULL));
  errors += check(total == 2.0 - 2.0 / (double)(1 << nRanks), myRank, "scalable allreduce");
  NCCLCHECK(ncclCommDestroy(comm));

  free(sendbuff);
  free(recvbuff);
  return errors;
}

int main(int argc, char* argv[]) {
  const int nRanks = argc > 1 ? atoi(argv[1]) : 4;
  /* The launcher's part: start the ranks, then make the ids and hand them
   * over. (Forking first, as MPI would: ncclGetUniqueId starts a thread.) */
  int fds[2];
  if (pipe(fds) != 0) return EXIT_FAILURE;
  for (int r = 1; r < nRanks; ++r)
    if (fork() == 0) {
      ncclUniqueId got[1 + NIDS];
      if (read(fds[0], got, sizeof got) != (ssize_t)sizeof got) _exit(EXIT_FAILURE);
      _exit(runRank(r, nRanks, got) ? EXIT_FAILURE : EXIT_SUCCESS);
    }
  ncclUniqueId ids[1 + NIDS];
  for (int i = 0; i < 1 + NIDS; ++i) NCCLCHECK(ncclGetUniqueId(&ids[i]));
  for (int r = 1; r < nRanks; ++r)
    if (write(fds[1], ids, sizeof ids) != (ssize_t)sizeof ids) return EXIT_FAILURE;
  int errors = runRank(0, nRanks, ids);
  for (int r = 1; r < nRanks; ++r) {
    int status = 0;
    wait(&status);
    errors += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  printf("%s: %d ranks, one per process: %s\n", argv[0], nRanks, errors ? "FAILED" : "Success");
  return errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
