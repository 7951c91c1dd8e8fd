#include "tests/transport/rank_harness.h"

#include <cstdio>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "launch/forked_ranks.h"

namespace coil::transport::testing {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* failureName(WaitFailure why) {
  switch (why) {
    case WaitFailure::Timeout: return "Timeout";
    case WaitFailure::PeerClosed: return "PeerClosed";
    case WaitFailure::PeerDied: return "PeerDied";
    case WaitFailure::Aborted: return "Aborted";
  }
  return "?";
}

// ---- data pattern: an independent reference for every byte ------------------

namespace {
uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

void fillPattern(uint8_t* p, uint32_t n, int src, int dst, uint32_t k) {
  const uint64_t seed = mix((uint64_t(src) << 48) ^ (uint64_t(dst) << 32) ^ k);
  for (uint32_t i = 0; i < n; i += 8) {
    uint64_t w = mix(seed + i);
    std::memcpy(p + i, &w, std::min<uint32_t>(8, n - i));
  }
}

uint64_t tagFor(int src, int dst, uint32_t k) {
  return (uint64_t(src) << 48) | (uint64_t(dst) << 32) | k;
}

uint32_t messageBytes(uint32_t k, uint32_t slotBytes) {
  const uint32_t sizes[] = {0, 1, slotBytes - 1, slotBytes, slotBytes / 2, 4097, 37, 65536};
  return std::min(sizes[k % 8], slotBytes);
}

// ---- the rank harness ---------------------------------------------------------

WaitWatch RankEnv::watch(int64_t ms) const { return WaitWatch{Deadline::after(ms), &shared->abortAll}; }

RankEnv::~RankEnv() {
  if (transport) transport->shutdown();
  byPeer.clear();
  transport.reset();
  if (boot) boot->close();
}

TransportMaker byName(const std::string& name) {
  return [name](int) { return createTransport(name); };
}

std::vector<int> allOthers(int rank, int nranks) {
  std::vector<int> others;
  for (int r = 0; r < nranks; ++r)
    if (r != rank) others.push_back(r);
  return others;
}

std::vector<std::string> transportsUnderTest() {
  // Every transport of the build that can run here: ib only where a device
  // is (the rxe suite boots a kernel that has one).
  static const std::vector<std::string> usable = [] {
  std::vector<std::string> names;
  for (const std::string& name : registeredTransports()) {
    auto t = createTransport(name);
    if (!t->unusable().empty()) {
      std::fprintf(stderr, "transport %s: not tested here: %s\n", name.c_str(),
                   t->unusable().c_str());
      continue;
    }
    names.push_back(name);
  }
  return names;
  }();
  return usable;
}

std::string joined(const std::vector<std::string>& errors) {
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  return all;
}

std::string failedProcesses(const std::vector<int>& status) {
  std::string failed;
  for (size_t r = 0; r < status.size(); ++r)
    if (status[r] == -1 || !WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0)
      failed += "rank " + std::to_string(r) + ": wait status " + std::to_string(status[r]) +
                " (see its stderr)\n";
  return failed;
}

std::unique_ptr<RankEnv> setUpRank(const UniqueIdData& id, int rank, int nranks, Shared* shared,
                                   const TransportMaker& make, const PeerSelector& select) {
  auto env = std::make_unique<RankEnv>();
  env->rank = rank;
  env->nranks = nranks;
  env->shared = shared;
  env->boot = Bootstrap::create(id, rank, nranks, Deadline::after(kTimeoutMs), &shared->abortAll);
  std::vector<PeerInfo> peers(static_cast<size_t>(nranks));
  peers[static_cast<size_t>(rank)] = PeerInfo{kHostHash, static_cast<int32_t>(getpid()), rank};
  env->boot->allGather(peers.data(), sizeof(PeerInfo));
  env->transport = make(rank);
  std::vector<Address> addresses(static_cast<size_t>(nranks));
  addresses[static_cast<size_t>(rank)] = env->transport->localAddress(*env->boot);
  env->boot->allGather(addresses.data(), sizeof(Address));
  const std::vector<int> others = select(rank, nranks);
  for (int r : others)
    REQUIRE(env->transport->canReach(Endpoint{peers[size_t(rank)], addresses[size_t(rank)]},
                                     Endpoint{peers[size_t(r)], addresses[size_t(r)]}),
            "peer unreachable");
  env->peers = others;
  // The label must be unique per communicator (shm names segments after it),
  // also across test binaries running side by side: the id's nonce is.
  SetupContext ctx{*env->boot, rank, nranks, peers, Deadline::after(kTimeoutMs),
                   &shared->abortAll, "tt" + std::to_string(id.nonce), &addresses};
  auto conns = env->transport->connect(ctx, others);
  REQUIRE(conns.size() == others.size(), "connect returned " + std::to_string(conns.size()));
  env->byPeer.resize(static_cast<size_t>(nranks));
  for (size_t i = 0; i < conns.size(); ++i) {
    REQUIRE(conns[i]->peer() == others[i], "connection " + std::to_string(i) + " has the wrong peer");
    REQUIRE(std::string(conns[i]->traits().name) == env->transport->name(), "transport name");
    env->byPeer[size_t(others[i])] = std::move(conns[i]);
  }
  // As a communicator's init does (more bootstrap steps follow connect): no
  // rank closes its bootstrap while a peer may still be connecting, which
  // the peer would take for a death (Bootstrap::checkRing).
  env->boot->barrier();
  shared->connected.fetch_add(1);
  return env;
}

UniqueIdData startLoopbackRoot() {
  return startRoot(SocketAddress::parse("127.0.0.1:0"), kTimeoutMs);
}

std::vector<std::string> runThreads(const UniqueIdData& id, int n, const TransportMaker& make,
                                    const RankBody& body, const PeerSelector& select, Shared* shared) {
  Shared local;
  if (shared == nullptr) shared = &local;
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto env = setUpRank(id, r, n, shared, make, select);
        body(*env);
      } catch (const std::exception& e) {
        errors[size_t(r)] = std::string("rank ") + std::to_string(r) + ": " + e.what();
        shared->abortAll.store(true);  // the others stop waiting for us
      }
    });
  for (auto& t : threads) t.join();
  errors.erase(std::remove(errors.begin(), errors.end(), std::string()), errors.end());
  return errors;
}

std::vector<int> runProcesses(int n, const TransportMaker& make, const RankBody& body,
                              const std::function<void(const std::vector<pid_t>&, Shared&)>& parent) {
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error("mmap failed");
  Shared* shared = new (page) Shared;
  std::vector<int> status;
  {
    // The root starts after the fork: the children are single-threaded copies.
    ForkedRanks forked(0, n);
    if (forked.isChild()) {
      const int r = forked.rank();
      UniqueIdData id;
      int code = 1;
      if (forked.receive(&id, sizeof id) == ForkedRanks::Handover::Received) {
        try {
          auto env = setUpRank(id, r, n, shared, make);
          body(*env);
          code = 0;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d (pid %d) failed: %s\n", r, getpid(), e.what());
        }
      }
      ForkedRanks::exitChild(code);
    }
    const UniqueIdData id = startLoopbackRoot();
    forked.share(&id, sizeof id);
    if (parent) parent(forked.pids(), *shared);
    forked.reapAll(ForkedRanks::Clock::now() + std::chrono::milliseconds(2 * kTimeoutMs));
    for (const ForkedRank& c : forked.children()) status.push_back(c.overstayed ? -1 : c.status);
  }
  munmap(page, sizeof(Shared));
  return status;
}
// ---- bodies -----------------------------------------------------------------

void sendStream(RankEnv& env, int peer, uint32_t messages) {
  Connection& c = env.to(peer);
  SlotFifo& f = c.sendFifo();
  for (uint32_t k = 0; k < messages; ++k) {
    WaitFailure why{};
    void* slot = f.acquire(env.watch(), &why);
    REQUIRE(slot != nullptr, std::string("acquire to rank ") + std::to_string(peer) + ": " + failureName(why));
    uint32_t bytes = messageBytes(k, f.slotBytes());
    fillPattern(static_cast<uint8_t*>(slot), bytes, env.rank, peer, k);
    f.publish(bytes, tagFor(env.rank, peer, k));
    c.kick();
  }
}

void recvStream(RankEnv& env, int peer, uint32_t messages) {
  Connection& c = env.to(peer);
  SlotFifo& f = c.recvFifo();
  std::vector<uint8_t> expected(f.slotBytes());
  for (uint32_t k = 0; k < messages; ++k) {
    // Stall now and then so that the sender runs into a full FIFO.
    if (k % 7 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RecvSlot s{};
    WaitFailure why{};
    REQUIRE(f.peek(&s, env.watch(), &why),
            std::string("peek from rank ") + std::to_string(peer) + ": " + failureName(why));
    const std::string what = "message " + std::to_string(k) + " from rank " + std::to_string(peer);
    const uint32_t bytes = messageBytes(k, f.slotBytes());
    REQUIRE(s.bytes == bytes, what + ": " + std::to_string(s.bytes) + " bytes, expected " + std::to_string(bytes));
    REQUIRE(s.tag == tagFor(peer, env.rank, k), what + ": wrong tag " + std::to_string(s.tag));
    fillPattern(expected.data(), bytes, peer, env.rank, k);
    if (std::memcmp(s.data, expected.data(), bytes) != 0) {
      const auto* got = static_cast<const uint8_t*>(s.data);
      size_t at = 0;
      while (got[at] == expected[at]) ++at;
      REQUIRE(false, what + ": data differs at byte " + std::to_string(at));
    }
    f.release();
    c.kick();
  }
}

/// Every ordered pair streams `messages`; one sender and one receiver thread
/// per peer, all blocking on the FIFOs.
void streamAllPairs(RankEnv& env, uint32_t messages) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(2 * static_cast<size_t>(env.nranks));
  for (int p : env.peers) {
    threads.emplace_back([&, p] {
      try { sendStream(env, p, messages); } catch (const std::exception& e) { errors[2 * size_t(p)] = e.what(); }
    });
    threads.emplace_back([&, p] {
      try { recvStream(env, p, messages); } catch (const std::exception& e) { errors[2 * size_t(p) + 1] = e.what(); }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) REQUIRE(e.empty(), e);
  // Nobody tears down (dropping unsent data) before everybody received all.
  env.boot->barrier();
}

}  // namespace coil::transport::testing
