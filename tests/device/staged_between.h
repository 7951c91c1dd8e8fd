// A staged call between two calls that read the peers' device memory, on
// the same stream: an all-gather of one int32 per rank in a group (calls in
// a group go through host memory), checked. The fake-GPU communicator tests
// put one after every peer-window or window call, so that the paths are
// seen to keep their order on a stream.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "coil.h"
#include "tests/device/fake_device.h"

namespace coil::test {

inline void expectStagedAllGather(coilComm_t comm, int rank, int nranks, int32_t tag,
                                  device::Stream stream) {
  device::fake::DeviceBuffer mine(sizeof(int32_t)), all(sizeof(int32_t) * nranks);
  const int32_t value = rank * 1000 + tag;
  std::memcpy(mine.get(), &value, sizeof value);
  ASSERT_EQ(coilGroupStart(), coilSuccess);
  ASSERT_EQ(coilAllGather(mine.get(), all.get(), 1, coilInt32, comm, stream), coilSuccess)
      << coilGetLastError(comm);
  ASSERT_EQ(coilGroupEnd(), coilSuccess) << coilGetLastError(comm);
  device::syncStream(stream);
  for (int r = 0; r < nranks; ++r) {
    int32_t got = 0;
    std::memcpy(&got, all.get() + r * sizeof(int32_t), sizeof got);
    ASSERT_EQ(got, r * 1000 + tag) << "rank " << r << "'s value";
  }
}

}  // namespace coil::test
