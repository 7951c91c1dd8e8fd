/*
 * The point-to-point patterns of NCCL's documentation, host only, one rank
 * per process (forked; the id travels through a pipe):
 *   - sendrecv:  exchange with a peer, the send issued before the receive
 *                in one group (so neither can block the other);
 *   - one-to-all (scatter) and all-to-one (gather) from ncclSend/ncclRecv;
 *   - all-to-all: every pair, sends and receives in one group;
 *   - neighbor exchange: both ring neighbours, in one group.
 * Every received value is checked against what the sender must have put.
 *
 * Kept as NCCL source (see single_thread_many_ranks.c for what the porting
 * suite does and what differs from a GPU program).
 *
 * Usage: sendrecv_patterns NRANKS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* What rank `from` sends to rank `to`, element i. */
static int32_t value(int from, int to, size_t i) { return from * 1000000 + to * 10000 + (int32_t)(i % 10000); }

static void fill(int32_t* buf, size_t count, int from, int to) {
  for (size_t i = 0; i < count; ++i) buf[i] = value(from, to, i);
}

static int expect(const int32_t* buf, size_t count, int from, int to, int rank, const char* what) {
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != value(from, to, i)) {
      printf("FAIL: rank %d, %s: element %zu from rank %d is %d\n", rank, what, i, from, buf[i]);
      return 1;
    }
  return 0;
}

static int runRank(int rank, int nranks, ncclUniqueId id) {
  int errors = 0;
  const size_t count = 50000;
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
  int32_t* sendbuff = malloc(count * nranks * sizeof(int32_t));
  int32_t* recvbuff = malloc(count * nranks * sizeof(int32_t));

  /* Sendrecv with the peer across the ring (rank + n/2); the send first. */
  const int peer = (rank + nranks / 2) % nranks;
  const int from = (rank - nranks / 2 + nranks) % nranks;
  fill(sendbuff, count, rank, peer);
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(sendbuff, count, ncclInt32, peer, comm, NULL));
  NCCLCHECK(ncclRecv(recvbuff, count, ncclInt32, from, comm, NULL));
  NCCLCHECK(ncclGroupEnd());
  errors += expect(recvbuff, count, from, rank, rank, "sendrecv");

  /* One-to-all from root 0: block r of the root's buffer goes to rank r. */
  const int root = 0;
  NCCLCHECK(ncclGroupStart());
  if (rank == root)
    for (int r = 0; r < nranks; ++r) {
      fill(sendbuff + r * count, count, root, r);
      NCCLCHECK(ncclSend(sendbuff + r * count, count, ncclInt32, r, comm, NULL));
    }
  NCCLCHECK(ncclRecv(recvbuff, count, ncclInt32, root, comm, NULL));
  NCCLCHECK(ncclGroupEnd());
  errors += expect(recvbuff, count, root, rank, rank, "one-to-all");

  /* All-to-one at the last rank. */
  const int sink = nranks - 1;
  fill(sendbuff, count, rank, sink);
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(sendbuff, count, ncclInt32, sink, comm, NULL));
  if (rank == sink)
    for (int r = 0; r < nranks; ++r)
      NCCLCHECK(ncclRecv(recvbuff + r * count, count, ncclInt32, r, comm, NULL));
  NCCLCHECK(ncclGroupEnd());
  if (rank == sink)
    for (int r = 0; r < nranks; ++r)
      errors += expect(recvbuff + r * count, count, r, sink, rank, "all-to-one");

  /* All-to-all. */
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r) {
    fill(sendbuff + r * count, count, rank, r);
    NCCLCHECK(ncclSend(sendbuff + r * count, count, ncclInt32, r, comm, NULL));
    NCCLCHECK(ncclRecv(recvbuff + r * count, count, ncclInt32, r, comm, NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int r = 0; r < nranks; ++r)
    errors += expect(recvbuff + r * count, count, r, rank, rank, "all-to-all");

  /* Neighbor exchange: send to both neighbours, receive from both. */
  const int next = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
  fill(sendbuff, count, rank, next);
  fill(sendbuff + count, count, rank, prev);
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(sendbuff, count, ncclInt32, next, comm, NULL));
  NCCLCHECK(ncclSend(sendbuff + count, count, ncclInt32, prev, comm, NULL));
  NCCLCHECK(ncclRecv(recvbuff, count, ncclInt32, prev, comm, NULL));
  NCCLCHECK(ncclRecv(recvbuff + count, count, ncclInt32, next, comm, NULL));
  NCCLCHECK(ncclGroupEnd());
  errors += expect(recvbuff, count, prev, rank, rank, "neighbor from prev");
  errors += expect(recvbuff + count, count, next, rank, rank, "neighbor from next");

  NCCLCHECK(ncclCommDestroy(comm));
  free(sendbuff);
  free(recvbuff);
  return errors;
}

int main(int argc, char* argv[]) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 4;
  int fds[2];
  if (pipe(fds) != 0) return EXIT_FAILURE;
  for (int r = 1; r < nranks; ++r)
    if (fork() == 0) {
      ncclUniqueId id;
      if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) _exit(EXIT_FAILURE);
      _exit(runRank(r, nranks, id) ? EXIT_FAILURE : EXIT_SUCCESS);
    }
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  for (int r = 1; r < nranks; ++r)
    if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) return EXIT_FAILURE;
  int errors = runRank(0, nranks, id);
  for (int r = 1; r < nranks; ++r) {
    int status = 0;
    wait(&status);
    errors += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  printf("%s: %d ranks: %s\n", argv[0], nranks, errors ? "FAILED" : "Success");
  return errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
