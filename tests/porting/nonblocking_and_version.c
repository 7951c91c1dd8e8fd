/*
 * NCCL's non-blocking communicator pattern and its version checks, host
 * only. The main thread creates every rank with config.blocking = 0 inside
 * a group: ncclGroupEnd returns ncclInProgress, and each communicator is
 * polled with ncclCommGetAsyncError until it stops saying ncclInProgress
 * (with a deadline). Then one thread per rank: a non-blocking init of
 * its own (again polled), ncclCommSplit, ncclCommShrink, a pre-multiplied
 * sum and ncclGroupSimulateEnd, each behind the version check a real
 * program puts around it. A version check that took the wrong branch
 * stops the build (#error).
 *
 * Kept as NCCL source (see single_thread_many_ranks.c for what the porting
 * suite does and what differs from a GPU program).
 *
 * Usage: nonblocking_and_version NRANKS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 19, 0)
#error "expected a library with NCCL 2.19's API or later"
#endif

#define NCCLCHECK(cmd)                                                             \
  do {                                                                             \
    ncclResult_t r_ = (cmd);                                                       \
    if (r_ != ncclSuccess && r_ != ncclInProgress) {                               \
      printf("Failed, NCCL error %s:%d '%s': %s\n", __FILE__, __LINE__,            \
             ncclGetErrorString(r_), ncclGetLastError(NULL));                      \
      exit(EXIT_FAILURE);                                                          \
    }                                                                              \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Polls a non-blocking communicator until it is ready; fails after 60 s. */
static void waitReady(ncclComm_t comm) {
  const double deadline = now() + 60;
  ncclResult_t state;
  do {
    NCCLCHECK(ncclCommGetAsyncError(comm, &state));
  } while (state == ncclInProgress && now() < deadline);
  if (state != ncclSuccess) {
    printf("Failed: communicator not ready: %s (%s)\n", ncclGetErrorString(state),
           ncclGetLastError(comm));
    exit(EXIT_FAILURE);
  }
}

typedef struct {
  int rank, nranks;
  ncclUniqueId id;
  int errors;
} Rank;

static void expectSum(ncclComm_t comm, int got, int want, const char* what, int* errors) {
  int rank = -1;
  ncclCommUserRank(comm, &rank);
  if (got != want) {
    printf("FAIL: %s on rank %d: %d, want %d\n", what, rank, got, want);
    ++*errors;
  }
}

static void* runRank(void* arg) {
  Rank* me = (Rank*)arg;
  const int n = me->nranks, rank = me->rank;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.cgaClusterSize = 2;
  config.minCTAs = 4;
  config.maxCTAs = 16;
  config.netName = "Socket";
  ncclComm_t comm;
  ncclResult_t ret = ncclCommInitRankConfig(&comm, n, me->id, rank, &config);
  if (ret != ncclInProgress) {
    printf("FAIL: non-blocking init returned %s, want ncclInProgress\n", ncclGetErrorString(ret));
    ++me->errors;
  }
  waitReady(comm);
  int one = rank + 1, sum = 0;
  NCCLCHECK(ncclAllReduce(&one, &sum, 1, ncclInt, ncclSum, comm, NULL));
  expectSum(comm, sum, n * (n + 1) / 2, "allreduce", &me->errors);

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  /* Even and odd ranks, non-blocking like the parent. */
  ncclComm_t half;
  NCCLCHECK(ncclCommSplit(comm, rank % 2, rank, &half, &config));
  waitReady(half);
  int halfSum = 0;
  NCCLCHECK(ncclAllReduce(&one, &halfSum, 1, ncclInt, ncclSum, half, NULL));
  int want = 0;
  for (int r = rank % 2; r < n; r += 2) want += r + 1;
  expectSum(half, halfSum, want, "split allreduce", &me->errors);
  NCCLCHECK(ncclCommDestroy(half));
#else
#error "this example wants ncclCommSplit (NCCL 2.18)"
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  /* Drop the last rank. */
  if (rank != n - 1) {
    int exclude[1] = {n - 1};
    ncclComm_t rest;
    NCCLCHECK(ncclCommShrink(comm, exclude, 1, &rest, NULL, NCCL_SHRINK_DEFAULT));
    int restSum = 0;
    NCCLCHECK(ncclAllReduce(&one, &restSum, 1, ncclInt, ncclSum, rest, NULL));
    expectSum(rest, restSum, (n - 1) * n / 2, "shrunk allreduce", &me->errors);
    NCCLCHECK(ncclCommDestroy(rest));
  }
#else
#error "this example wants ncclCommShrink (NCCL 2.27)"
#endif

  /* Each rank scales its input by 1/n before the sum: an average. */
  float scalar = 1.0f / (float)n, x = (float)n * (float)(rank + 1), avg = 0;
  ncclRedOp_t premul;
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
  if (premul < ncclNumOps || premul >= ncclMaxRedOp) {
    printf("FAIL: op %d is not between ncclNumOps and ncclMaxRedOp\n", (int)premul);
    ++me->errors;
  }
  NCCLCHECK(ncclAllReduce(&x, &avg, 1, ncclFloat, premul, comm, NULL));
  expectSum(comm, (int)(avg + 0.5f), n * (n + 1) / 2, "pre-multiplied sum", &me->errors);
  NCCLCHECK(ncclRedOpDestroy(premul, comm));

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  /* Ask how long a group would take, without running it. */
  static float big[1 << 20];
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclAllReduce(big, big, 1 << 20, ncclFloat, ncclSum, comm, NULL));
  NCCLCHECK(ncclGroupSimulateEnd(&sim));
  if (!(sim.estimatedTime > 0)) {
    printf("FAIL: simulated time %g\n", (double)sim.estimatedTime);
    ++me->errors;
  }
#endif

  NCCLCHECK(ncclCommFinalize(comm));
  NCCLCHECK(ncclCommDestroy(comm));
  return NULL;
}

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? atoi(argv[1]) : 4;
  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    printf("FAIL: library version %d, header %d\n", version, NCCL_VERSION_CODE);
    return EXIT_FAILURE;
  }
  printf("%s: version %d.%d.%d%s (code %d)\n", argv[0], NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         NCCL_SUFFIX, version);

  /* Non-blocking inits in a group, all from this thread. */
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  ncclComm_t* comms = malloc(sizeof(ncclComm_t) * n);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) NCCLCHECK(ncclCommInitRankConfig(&comms[r], n, id, r, &config));
  ncclResult_t ret = ncclGroupEnd();
  if (ret != ncclInProgress) {
    printf("FAIL: ncclGroupEnd of non-blocking inits returned %s\n", ncclGetErrorString(ret));
    return EXIT_FAILURE;
  }
  for (int r = 0; r < n; ++r) waitReady(comms[r]);
  int* in = malloc(sizeof(int) * n);
  int* out = malloc(sizeof(int) * n);
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    in[r] = 1 << r;
    NCCLCHECK(ncclAllReduce(&in[r], &out[r], 1, ncclInt, ncclSum, comms[r], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  int errors = 0;
  for (int r = 0; r < n; ++r) {
    if (out[r] != (1 << n) - 1) {
      printf("FAIL: group allreduce rank %d: %d\n", r, out[r]);
      ++errors;
    }
    NCCLCHECK(ncclCommDestroy(comms[r]));
  }

  /* One thread per rank. */
  NCCLCHECK(ncclGetUniqueId(&id));
  Rank* ranks = calloc((size_t)n, sizeof(Rank));
  pthread_t* threads = malloc(sizeof(pthread_t) * n);
  for (int r = 0; r < n; ++r) {
    ranks[r].rank = r;
    ranks[r].nranks = n;
    ranks[r].id = id;
    pthread_create(&threads[r], NULL, runRank, &ranks[r]);
  }
  for (int r = 0; r < n; ++r) {
    pthread_join(threads[r], NULL);
    errors += ranks[r].errors;
  }
  printf("%s: %d ranks: %s\n", argv[0], n, errors ? "FAILED" : "Success");
  free(comms);
  free(in);
  free(out);
  free(ranks);
  free(threads);
  return errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
