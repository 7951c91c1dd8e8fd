/*
 * A host-buffer program written against NCCL's API, the way NCCL users
 * write it: a unique id from rank 0, ncclCommInitRank on every rank,
 * ncclAllReduce, ncclCommDestroy. The build turns it into a coil program
 * with nothing but `sed s/nccl/coil/g; s/NCCL/COIL/g` (see meson.build), to
 * prove that porting is a rename. Ranks are forked processes; the id
 * travels through a pipe.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCCLCHECK(cmd)                                                              \
  do {                                                                              \
    ncclResult_t r = (cmd);                                                         \
    if (r != ncclSuccess) {                                                         \
      fprintf(stderr, "%s:%d '%s' failed: %s (%s)\n", __FILE__, __LINE__, #cmd,     \
              ncclGetErrorString(r), ncclGetLastError(NULL));                       \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

static int runRank(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));
  const size_t count = 1 << 20;
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) send[i] = (float)(rank + 1);
  NCCLCHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
  NCCLCHECK(ncclAllReduce(recv, recv, count, ncclFloat, ncclMax, comm, NULL));
  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  const float want = (float)(nranks * (nranks + 1) / 2);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += recv[i] != want;
  NCCLCHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  printf("rank %d: %zu wrong (library version %d)\n", rank, wrong, version);
  fflush(stdout);
  return wrong != 0;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 3;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  for (int r = 1; r < nranks; ++r)
    if (fork() == 0) {
      ncclUniqueId id;
      if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
      _exit(runRank(r, nranks, id));
    }
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  for (int r = 1; r < nranks; ++r)
    if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
  int failed = runRank(0, nranks, id);
  for (int r = 1; r < nranks; ++r) {
    int status = 0;
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  return failed;
}
