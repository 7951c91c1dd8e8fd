/*
 * NCCL's "one device per thread" pattern, host only: the main thread makes
 * the unique id, and each of NRANKS threads creates its own rank with
 * ncclCommInitRank (each call blocks until all ranks have joined), runs
 * collectives on it and destroys it.
 *
 * Kept as NCCL source (see single_thread_many_ranks.c for what the porting
 * suite does and what differs from a GPU program).
 *
 * Usage: one_rank_per_thread NRANKS
 */
#include <pthread.h>
#include <stdint.h>
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

typedef struct {
  int rank, nranks;
  ncclUniqueId id;
  int errors;
} Rank;

static void* runRank(void* arg) {
  Rank* me = (Rank*)arg;
  const int n = me->nranks;
  const size_t count = 100000;
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, n, me->id, me->rank));
  int nranks = 0, rank = -1;
  NCCLCHECK(ncclCommCount(comm, &nranks));
  NCCLCHECK(ncclCommUserRank(comm, &rank));
  if (nranks != n || rank != me->rank) ++me->errors;

  int64_t* send = malloc(count * sizeof(int64_t));
  int64_t* recv = malloc(count * n * sizeof(int64_t));
  for (size_t i = 0; i < count; ++i) send[i] = (int64_t)rank * 1000000 + (int64_t)i;

  /* Sum: sum over ranks of rank*1e6 + i. */
  NCCLCHECK(ncclAllReduce(send, recv, count, ncclInt64, ncclSum, comm, NULL));
  for (size_t i = 0; i < count; ++i)
    if (recv[i] != (int64_t)n * (n - 1) / 2 * 1000000 + (int64_t)n * (int64_t)i) {
      printf("FAIL: rank %d allreduce [%zu] = %lld\n", rank, i, (long long)recv[i]);
      ++me->errors;
      break;
    }

  /* All-gather: block r holds rank r's input. */
  NCCLCHECK(ncclAllGather(send, recv, count, ncclInt64, comm, NULL));
  for (int r = 0; r < n; ++r)
    if (recv[(size_t)r * count + 7] != (int64_t)r * 1000000 + 7) {
      printf("FAIL: rank %d allgather block %d\n", rank, r);
      ++me->errors;
    }

  /* Reduce-scatter of n blocks of count: block r is n times its values. */
  for (size_t i = 0; i < count * n; ++i) recv[i] = (int64_t)i;
  NCCLCHECK(ncclReduceScatter(recv, send, count, ncclInt64, ncclSum, comm, NULL));
  if (send[1] != (int64_t)n * ((int64_t)rank * (int64_t)count + 1)) {
    printf("FAIL: rank %d reducescatter got %lld\n", rank, (long long)send[1]);
    ++me->errors;
  }

  /* Average (NCCL 2.10): integers truncate. */
  int32_t v = 10 * (rank + 1), avg = 0;
  NCCLCHECK(ncclAllReduce(&v, &avg, 1, ncclInt32, ncclAvg, comm, NULL));
  if (avg != 5 * (n + 1)) {
    printf("FAIL: rank %d avg %d, want %d\n", rank, avg, 5 * (n + 1));
    ++me->errors;
  }

  NCCLCHECK(ncclCommFinalize(comm));
  NCCLCHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  return NULL;
}

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? atoi(argv[1]) : 4;
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  Rank* ranks = calloc((size_t)n, sizeof(Rank));
  pthread_t* threads = malloc(sizeof(pthread_t) * n);
  for (int r = 0; r < n; ++r) {
    ranks[r].rank = r;
    ranks[r].nranks = n;
    ranks[r].id = id;
    pthread_create(&threads[r], NULL, runRank, &ranks[r]);
  }
  int errors = 0;
  for (int r = 0; r < n; ++r) {
    pthread_join(threads[r], NULL);
    errors += ranks[r].errors;
  }
  printf("%s: %d ranks, one per thread: %s\n", argv[0], n, errors ? "FAILED" : "Success");
  free(ranks);
  free(threads);
  return errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
