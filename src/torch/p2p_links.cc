#include "p2p_links.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <utility>

#include "coil_calls.h"
#include "cuda_p2p.h"

namespace coil_torch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHeaderBytes = 2 * sizeof(int64_t);
constexpr int64_t kGoodbye = -1;  // in a header's size: the sender has shut down
// A RecvLink's communicator never times out on its own: the next message
// may be hours away. (Ten years; coil's deadlines are steady_clock based.)
constexpr int64_t kIdleForeverMs = int64_t{10} * 365 * 24 * 3600 * 1000;

// Starts a non-blocking join of a 2-rank communicator (its handle goes to
// `slot` at once, for the owner to revoke and destroy) and polls it until it
// is ready (true), `stop` is set (false), it fails or `limit` passes (throws
// c10::DistBackendError naming `what`).
bool join(const coilUniqueId& id, int rankInPair, const std::string& name,
                int64_t timeoutMs, std::chrono::milliseconds limit, std::atomic<coilComm_t>& slot,
                const std::atomic<bool>& stop, const std::string& what) {
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.timeoutMs = timeoutMs;
  config.commName = name.c_str();
  coilComm_t comm = nullptr;
  coilResult_t r = coilCommInitRankConfig(&comm, 2, id, rankInPair, &config);
  if (r != coilSuccess && r != coilInProgress) check(r, what.c_str());
  slot = comm;
  const Clock::time_point deadline = Clock::now() + limit;
  coilResult_t state = coilInProgress;
  while (!stop.load() && coilCommGetAsyncError(comm, &state) == coilSuccess &&
         state == coilInProgress) {
    if (Clock::now() >= deadline) {
      coilCommRevoke(comm);
      C10_THROW_ERROR(DistBackendError,
                      c10::str("coil backend: ", what, ": Timed out after ", limit.count(),
                               " ms (the peer did not connect)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (stop.load()) return false;
  if (state != coilSuccess)
    C10_THROW_ERROR(DistBackendError, c10::str("coil backend: ", what, " failed (",
                                               coilGetErrorString(state),
                                               "): ", coilGetLastError(comm)));
  return true;
}

}  // namespace

SendLink::SendLink(LinkSettings settings, Announce announce)
    : settings_(std::move(settings)), announce_(std::move(announce)) {
  thread_ = std::thread([this] { loop(); });
  pthread_setname_np(thread_.native_handle(), "coil-torch-send");
}

SendLink::~SendLink() { close(true); }

void SendLink::push(c10::intrusive_ptr<CoilWork> work, at::Tensor data, int64_t tag,
                    std::shared_ptr<CudaOp> copied) {
  std::exception_ptr refused;
  const auto bytes = static_cast<int64_t>(data.numel() * data.element_size());
  Message m{std::move(work), std::move(data), {tag, bytes}, std::move(copied)};
  bool inline_ = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_ || closing_) {
      refused = broken_ ? broken_
                        : backendError("coil backend: send: the process group is shutting down");
    } else if (!busy_ && queue_.empty() && !m.copied && bytes <= kInlineSendBytes &&
               connected_.load() && !revoked_.load()) {
      busy_ = inline_ = true;
    } else {
      queue_.push_back(std::move(m));
    }
  }
  if (refused) {
    m.work->complete(refused);
    return;
  }
  if (inline_) {
    sendOne(m);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    cv_.notify_all();  // the link's thread: messages may have been queued meanwhile
    return;
  }
  cv_.notify_one();
}

bool SendLink::sendOne(Message& m) {
  try {
    if (m.copied && !waitForCopy(*m.copied, settings_.timeout, &revoked_))
      C10_THROW_ERROR(DistBackendError,
                      c10::str("coil backend: send to rank ", settings_.peer, ": ",
                               revoked_.load() ? "the process group was aborted"
                                               : c10::str("Timed out after ",
                                                          settings_.timeout.count(),
                                                          " ms waiting for the GPU to copy the "
                                                          "CUDA tensor out (its stream had not "
                                                          "reached the send)")));
    if (comm_.load() == nullptr) connect();
    coilComm_t comm = comm_.load();
    TORCH_CHECK(comm != nullptr && !revoked_.load(),
                "coil backend: send: the process group was aborted");
    // The receiver is rank 1 of the pair.
    std::vector<Transfer> transfers{Transfer{true, m.header, Elements{coilUint8, kHeaderBytes}, 1}};
    if (m.header[1] > 0)
      transfers.push_back(
          Transfer{true, m.data.data_ptr(), Elements{coilUint8, static_cast<size_t>(m.header[1])}, 1});
    runTransferGroup(transfers, comm);
    m.work->complete(nullptr);
    return true;
  } catch (const c10::Error& e) {
    std::exception_ptr error = backendError(c10::str(
        "coil backend: send to rank ", settings_.peer,
        " failed on the link to it (a 2-rank communicator, where it is rank 1): ",
        e.what_without_backtrace()));
    m.work->complete(error);
    failQueued(error);
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    m.work->complete(error);
    failQueued(error);
  }
  return false;
}

void SendLink::connect() {
  coilUniqueId id;
  check(coilGetUniqueId(&id), "coilGetUniqueId");
  announce_(id);
  const std::string what = c10::str("connecting for point-to-point to rank ", settings_.peer);
  // (comm_ is set as the join starts, for close() to revoke; inline sends
  // wait for connected_.)
  if (join(id, 0, c10::str(settings_.name, " p2p ", settings_.rank, "->", settings_.peer),
           settings_.timeout.count(), settings_.timeout, comm_, revoked_, what))
    connected_ = true;
}

void SendLink::loop() {
  for (;;) {
    Message m;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // (A caller sending inline holds the communicator until it is done.)
      cv_.wait(lock, [&] { return !busy_ && (closing_ || !queue_.empty()); });
      if (queue_.empty()) {  // closing, and everything was sent
        // (No caller sends inline any more: push refuses once closing_.)
        const bool broken = static_cast<bool>(broken_);
        lock.unlock();
        if (!broken) sayGoodbye();
        return;
      }
      m = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const bool sent = sendOne(m);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    if (!sent) return;
  }
}

void SendLink::sayGoodbye() noexcept {
  coilComm_t comm = comm_.load();
  if (comm == nullptr || revoked_.load()) return;
  int64_t header[2] = {0, kGoodbye};
  try {
    runTransferGroup({Transfer{true, header, Elements{coilUint8, kHeaderBytes}, 1}}, comm);
  } catch (...) {
    // The peer is gone already: nobody to tell.
  }
}

void SendLink::failQueued(std::exception_ptr error) {
  std::deque<Message> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_) broken_ = error;
    dropped.swap(queue_);
    if (settings_.anyBroken) settings_.anyBroken->store(true);
  }
  for (Message& m : dropped) m.work->complete(error);
}

void SendLink::close(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  if (!drain) {
    revoked_ = true;
    if (coilComm_t c = comm_.load()) coilCommRevoke(c);
    failQueued(backendError("coil backend: send: the process group was aborted before it ran"));
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // (The thread left its loop only once no caller was sending inline, and
  // push starts none once closing_ is set: the communicator is free.)
  coilCommDestroy(comm_.exchange(nullptr));
}

RecvLink::RecvLink(LinkSettings settings, coilUniqueId id, Mailbox& mailbox)
    : settings_(std::move(settings)), mailbox_(mailbox) {
  thread_ = std::thread([this, id] { loop(id); });
  pthread_setname_np(thread_.native_handle(), "coil-torch-recv");
}

RecvLink::~RecvLink() { close(std::chrono::steady_clock::now()); }

void RecvLink::finished() {
  {
    std::lock_guard<std::mutex> lock(doneMutex_);
    done_ = true;
  }
  doneCv_.notify_all();
}

void RecvLink::loop(coilUniqueId id) {
  const int peer = settings_.peer;
  struct Finish {
    RecvLink* link;
    ~Finish() { link->finished(); }
  } finish{this};
  try {
    if (!join(id, 1, c10::str(settings_.name, " p2p ", peer, "->", settings_.rank),
              kIdleForeverMs, settings_.timeout, comm_, closing_,
              c10::str("accepting point-to-point from rank ", peer)))
      return;  // closed while joining
    coilComm_t comm = comm_.load();
    for (;;) {
      int64_t header[2] = {0, 0};
      runTransferGroup({Transfer{false, header, Elements{coilUint8, kHeaderBytes}, 0}}, comm);
      if (header[1] == kGoodbye) {
        mailbox_.failSource(peer, backendError(c10::str("coil backend: recv from rank ", peer,
                                                   ": that rank has shut down the process group")));
        return;
      }
      Mailbox::Claim claim = mailbox_.claim(peer, header[0], static_cast<size_t>(header[1]));
      try {
        if (header[1] > 0)
          runTransferGroup(
              {Transfer{false, claim.data(), Elements{coilUint8, static_cast<size_t>(header[1])}, 0}},
              comm);
      } catch (...) {
        mailbox_.abandon(std::move(claim), std::current_exception());
        throw;
      }
      mailbox_.deliver(std::move(claim));
    }
  } catch (const c10::Error& e) {
    if (closing_.load()) {
      mailbox_.failSource(peer, backendError(c10::str(
          "coil backend: recv from rank ", peer, ": the process group was shut down or aborted")));
      return;
    }
    if (settings_.anyBroken) settings_.anyBroken->store(true);
    mailbox_.failSource(peer, backendError(c10::str("coil backend: recv from rank ", peer,
                                               ": the link from that rank broke (a 2-rank "
                                               "communicator, where it is rank 0): ",
                                               e.what_without_backtrace())));
  } catch (...) {
    if (settings_.anyBroken) settings_.anyBroken->store(true);
    mailbox_.failSource(peer, std::current_exception());
  }
}

void RecvLink::close(std::chrono::steady_clock::time_point graceUntil) {
  {
    std::unique_lock<std::mutex> lock(doneMutex_);
    doneCv_.wait_until(lock, graceUntil, [&] { return done_; });
  }
  closing_ = true;
  if (coilComm_t c = comm_.load()) coilCommRevoke(c);
  if (thread_.joinable()) thread_.join();
  coilCommDestroy(comm_.exchange(nullptr));
}

}  // namespace coil_torch
