/*
 * NCCL's "single process, single thread, multiple devices" example, host
 * only: one thread owns every rank. It creates them with ncclCommInitRank
 * inside ncclGroupStart/ncclGroupEnd (and again with ncclCommInitAll), then
 * drives all of them from the same thread, each collective in a group, and
 * splits them all from that thread, in a group too.
 *
 * Kept as NCCL source: the porting suite turns it into a coil program with
 * `sed s/nccl/coil/g; s/NCCL/COIL/g` and runs it. What differs from a GPU
 * program: buffers come from malloc instead of cudaMalloc, there is no
 * cudaSetDevice, and the stream argument is NULL (the call completes before
 * it returns, so there is no cudaStreamSynchronize).
 *
 * Usage: single_thread_many_ranks NRANKS
 */
#include <stdio.h>
#include <stdlib.h>

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

static int errors = 0;
#define EXPECT(cond, ...)        \
  do {                           \
    if (!(cond)) {               \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");              \
      ++errors;                  \
    }                            \
  } while (0)

int main(int argc, char* argv[]) {
  const int nDev = argc > 1 ? atoi(argv[1]) : 4;
  const size_t size = 256 * 1024;
  ncclComm_t* comms = malloc(sizeof(ncclComm_t) * nDev);
  float** sendbuff = malloc(sizeof(float*) * nDev);
  float** recvbuff = malloc(sizeof(float*) * nDev);
  for (int i = 0; i < nDev; ++i) {
    sendbuff[i] = malloc(size * sizeof(float));
    recvbuff[i] = malloc(size * sizeof(float));
    for (size_t k = 0; k < size; ++k) sendbuff[i][k] = (float)(i + 1) + (float)(k % 7);
  }

  /* Every rank of one communicator, created from this one thread. */
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i) NCCLCHECK(ncclCommInitRank(comms + i, nDev, id, i));
  NCCLCHECK(ncclGroupEnd());

  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i)
    NCCLCHECK(ncclAllReduce((const void*)sendbuff[i], (void*)recvbuff[i], size, ncclFloat, ncclSum,
                            comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nDev; ++i)
    for (size_t k = 0; k < size; ++k) {
      const float want = (float)(nDev * (nDev + 1) / 2) + (float)nDev * (float)(k % 7);
      if (recvbuff[i][k] != want) {
        EXPECT(0, "allreduce rank %d [%zu] = %g, want %g", i, k, recvbuff[i][k], want);
        break;
      }
    }

  /* Broadcast from the last rank, then an in-place ncclBcast from rank 0. */
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i)
    NCCLCHECK(ncclBroadcast(sendbuff[i], recvbuff[i], size, ncclFloat, nDev - 1, comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nDev; ++i)
    EXPECT(recvbuff[i][5] == sendbuff[nDev - 1][5], "broadcast rank %d got %g", i, recvbuff[i][5]);
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i) {
    for (size_t k = 0; k < size; ++k) recvbuff[i][k] = i == 0 ? (float)k : -1.0f;
    NCCLCHECK(ncclBcast(recvbuff[i], size, ncclFloat, 0, comms[i], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nDev; ++i)
    EXPECT(recvbuff[i][size - 1] == (float)(size - 1), "bcast rank %d got %g", i,
           recvbuff[i][size - 1]);

  for (int i = 0; i < nDev; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));

  /* The same with ncclCommInitAll, and a max-reduction. */
  NCCLCHECK(ncclCommInitAll(comms, nDev, NULL));
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i)
    NCCLCHECK(ncclAllReduce(sendbuff[i], recvbuff[i], size, ncclFloat, ncclMax, comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nDev; ++i)
    EXPECT(recvbuff[i][3] == (float)nDev + 3.0f, "max rank %d got %g", i, recvbuff[i][3]);

  /* Split every rank's communicator from this thread, in a group, as NCCL's
   * guide does for several devices per thread: even and odd ranks. */
  ncclComm_t* halves = malloc(sizeof(ncclComm_t) * nDev);
  int* ones = malloc(sizeof(int) * nDev);
  int* sums = malloc(sizeof(int) * nDev);
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i) NCCLCHECK(ncclCommSplit(comms[i], i % 2, i, &halves[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nDev; ++i) {
    ones[i] = i + 1;
    NCCLCHECK(ncclAllReduce(&ones[i], &sums[i], 1, ncclInt, ncclSum, halves[i], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nDev; ++i) {
    int want = 0;
    for (int j = i % 2; j < nDev; j += 2) want += j + 1;
    EXPECT(sums[i] == want, "split rank %d got %d, want %d", i, sums[i], want);
    NCCLCHECK(ncclCommDestroy(halves[i]));
  }
  free(halves);
  free(ones);
  free(sums);
  for (int i = 0; i < nDev; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));

  for (int i = 0; i < nDev; ++i) {
    free(sendbuff[i]);
    free(recvbuff[i]);
  }
  free(sendbuff);
  free(recvbuff);
  free(comms);
  printf("%s: %d ranks from one thread: %s\n", argv[0], nDev, errors ? "FAILED" : "Success");
  return errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
