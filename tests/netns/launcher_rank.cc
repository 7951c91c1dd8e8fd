// One rank of a multi-host run, started the way a launcher starts it: the
// rank, world size and rendezvous address come from the environment
// (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT), read by coilCommInitFromEnv.
// It checks a few collectives against exact expected values and prints one
// line; the exit status says whether everything matched.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "coil.h"

#define CHECK(call)                                                                 \
  do {                                                                              \
    coilResult_t rc_ = (call);                                                      \
    if (rc_ != coilSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #call, coilGetLastError(comm));       \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int main() {
  coilComm_t comm = nullptr;
  CHECK(coilCommInitFromEnv(&comm));
  int rank = 0, n = 0;
  CHECK(coilCommUserRank(comm, &rank));
  CHECK(coilCommCount(comm, &n));

  // A large float all-reduce (several ring rounds over tcp and shm links).
  const size_t count = (size_t{1} << 22) + 3;
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i % 1000) + rank);
  CHECK(coilAllReduce(buf.data(), buf.data(), count, coilFloat32, coilSum, comm, nullptr));
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != static_cast<float>(n * (i % 1000) + n * (n - 1) / 2)) ++wrong;

  // Broadcast from the last rank and an all-gather of ranks.
  std::vector<int> data(1000, rank);
  CHECK(coilBroadcast(data.data(), data.data(), data.size(), coilInt32, n - 1, comm, nullptr));
  for (int v : data) wrong += v != n - 1;
  std::vector<int> ranks(n, -1);
  CHECK(coilAllGather(&rank, ranks.data(), 1, coilInt32, comm, nullptr));
  for (int r = 0; r < n; ++r) wrong += ranks[r] != r;

  CHECK(coilCommFinalize(comm));
  CHECK(coilCommDestroy(comm));
  std::printf("rank %d of %d: %s (%zu wrong)\n", rank, n, wrong ? "FAILED" : "ok", wrong);
  return wrong ? 1 : 0;
}
