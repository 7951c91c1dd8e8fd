#include "comm_report.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "api/handle.h"
#include "coil.h"
#include "comm/communicator.h"

namespace coil::topo {
namespace {

// One rank's view of one link, fixed-size for an all-gather.
struct LinkRecord {
  char transport[16];
  char reason[240];
};
struct RankHeader {
  char host[64];
};

// "2->3". (snprintf: GCC 12 warns falsely on string concatenation here.)
std::string pairName(int from, int to) {
  char text[32];
  std::snprintf(text, sizeof text, "%d->%d", from, to);
  return text;
}

void copyText(char* dst, size_t size, const std::string& text) {
  std::snprintf(dst, size, "%s", text.c_str());
}

}  // namespace

int printCommReport() {
  coilComm_t comm = nullptr;
  if (coilCommInitFromEnv(&comm) != coilSuccess) {
    std::fprintf(stderr,
                 "coil-topo --comm: %s\n(run it under a launcher: torchrun, mpirun or srun, or "
                 "with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set)\n",
                 coilGetLastError(nullptr));
    return 1;
  }
  const Communicator& c = *comm->impl;
  const int n = c.nranks(), me = c.rank();
  // Per rank: its host name, then one record per peer.
  const size_t perRank = sizeof(RankHeader) + static_cast<size_t>(n) * sizeof(LinkRecord);
  std::vector<char> mine(perRank, 0), all(perRank * static_cast<size_t>(n), 0);
  auto* header = reinterpret_cast<RankHeader*>(mine.data());
  gethostname(header->host, sizeof header->host - 1);
  for (int q = 0; q < n; ++q) {
    auto* rec = reinterpret_cast<LinkRecord*>(mine.data() + sizeof(RankHeader)) + q;
    const auto [transport, reason] = c.linkReport(q);
    copyText(rec->transport, sizeof rec->transport, transport);
    copyText(rec->reason, sizeof rec->reason, reason);
  }
  if (coilAllGather(mine.data(), all.data(), perRank, coilUint8, comm, nullptr) != coilSuccess) {
    std::fprintf(stderr, "coil-topo --comm: gathering the ranks' links failed: %s\n",
                 coilGetLastError(comm));
    coilCommDestroy(comm);
    return 1;
  }
  if (me == 0) {
    auto headerOf = [&](int r) {
      return reinterpret_cast<const RankHeader*>(all.data() + static_cast<size_t>(r) * perRank);
    };
    auto recordOf = [&](int r, int q) {
      return reinterpret_cast<const LinkRecord*>(all.data() + static_cast<size_t>(r) * perRank +
                                                 sizeof(RankHeader)) + q;
    };
    std::printf("%d ranks; the transport from each rank (row) to each peer (column):\n\n", n);
    std::printf("%-8s", "");
    for (int q = 0; q < n; ++q) std::printf(" r%-5d", q);
    std::printf("  host\n");
    for (int r = 0; r < n; ++r) {
      std::printf("rank %-3d", r);
      for (int q = 0; q < n; ++q) std::printf(" %-6.6s", r == q ? "X" : recordOf(r, q)->transport);
      std::printf("  %s\n", headerOf(r)->host);
    }
    // Why, grouped: one line per distinct (transport, reason).
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> why;
    for (int r = 0; r < n; ++r)
      for (int q = 0; q < n; ++q)
        if (r != q)
          why[{recordOf(r, q)->transport, recordOf(r, q)->reason}].push_back(pairName(r, q));
    std::printf("\nWhy (coil tries its transports in order of preference; each pair takes the"
                " first that reaches the peer):\n");
    for (const auto& [key, pairs] : why) {
      std::string list;
      for (size_t i = 0; i < pairs.size() && i < 12; ++i) {
        if (i) list += ' ';
        list += pairs[i];
      }
      if (pairs.size() > 12) {
        char more[48];
        std::snprintf(more, sizeof more, " and %zu more", pairs.size() - 12);
        list += more;
      }
      std::printf("  %s, %s: %s\n", key.first.c_str(), key.second.c_str(), list.c_str());
    }
    std::printf("\nX: the rank itself. COIL_TRANSPORT (or the config's netName) forces one"
                " transport; COIL_DEBUG=INFO logs the same choices at init.\n");
  }
  coilCommDestroy(comm);
  return 0;
}

}  // namespace coil::topo
