#include "p2p.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "coil.h"
#include "coil_calls.h"
#include "tensor_args.h"
#include "work_queue.h"

namespace coil_torch {
namespace {

std::exception_ptr errorWith(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

struct Op {
  at::Tensor tensor;  // a send's: contiguous
  int64_t tag = 0;
  size_t bytes = 0;
  PointToPoint::Done done;
};

std::string describe(bool isSend, int peer, int64_t tag, size_t bytes) {
  return c10::str(isSend ? "send to rank " : "recv from rank ", peer, " with tag ", tag, " (",
                  bytes, " bytes)");
}

// Copies a message into a receive and completes it, or fails it when the
// sizes differ.
void deliver(Op& op, const void* data, size_t bytes, int peer) {
  if (bytes != op.bytes) {
    op.done(errorWith(c10::str(
        "coil backend: ", describe(false, peer, op.tag, op.bytes), ": the message has ", bytes,
        " bytes but the receive has ", op.bytes, " bytes (element count ", op.tensor.numel(),
        " of ", op.tensor.scalar_type(), ")")));
    return;
  }
  try {
    Staged staged(op.tensor);
    if (bytes) std::memcpy(staged.data(), data, bytes);
    staged.writeBack();
  } catch (...) {
    op.done(std::current_exception());
    return;
  }
  op.done(nullptr);
}

// Takes the first op with `tag` out of `ops`.
std::optional<Op> takeFirst(std::deque<Op>& ops, int64_t tag) {
  for (auto it = ops.begin(); it != ops.end(); ++it)
    if (it->tag == tag) {
      Op op = std::move(*it);
      ops.erase(it);
      return op;
    }
  return std::nullopt;
}

}  // namespace

struct PointToPoint::Channel {
  // Fixed at creation.
  bool outgoing = false;
  int self = 0;
  int peer = 0;
  std::string storeKey;
  std::string commName;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Op> ops;  // outgoing: sends not yet started; incoming: receives waiting
  std::map<int64_t, std::deque<std::vector<uint8_t>>> early;  // incoming: arrived, unmatched
  bool stopping = false;
  std::exception_ptr abortError;  // set by abort
  std::exception_ptr broken;      // the error that ended this direction
  coilComm_t comm = nullptr;      // under mutex: abort revokes it from another thread
  std::thread thread;

  void run();
  void ensureComm();
  void transfer(bool isSend, void* data, size_t bytes, int64_t tag, size_t messageBytes);
  void sendOne(Op& op);
  void receiveOne();
  /// Ends the direction: every waiting op fails with `error`.
  void fail(std::exception_ptr error);
  void destroyComm();
};

void PointToPoint::Channel::ensureComm() {
  if (comm) return;
  coilUniqueId id;
  if (outgoing) {
    check(coilGetUniqueId(&id), "coilGetUniqueId");
    store->set(storeKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<uint8_t> bytes = store->get(storeKey);  // the store's timeout
    TORCH_CHECK(bytes.size() == sizeof id.internal, "coil backend: the unique id under store key '",
                storeKey, "' has ", bytes.size(), " bytes, expected ", sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  coilConfig_t config = COIL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.timeoutMs = timeout.count();
  config.commName = commName.c_str();
  coilComm_t c = nullptr;
  // Rank 0 of the pair sends, rank 1 receives.
  check(coilCommInitRankConfig(&c, 2, id, outgoing ? 0 : 1, &config), "coilCommInitRankConfig");
  std::lock_guard<std::mutex> lock(mutex);
  comm = c;
  if (abortError) coilCommRevoke(comm);  // aborted while joining: fail below, as the others
}

void PointToPoint::Channel::transfer(bool isSend, void* data, size_t bytes, int64_t tag,
                                     size_t messageBytes) {
  const int other = outgoing ? 1 : 0;
  try {
    if (isSend)
      check(coilSend(data, bytes, coilUint8, other, comm, nullptr), "coilSend");
    else
      check(coilRecv(data, bytes, coilUint8, other, comm, nullptr), "coilRecv");
  } catch (const c10::Error& e) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("coil backend: ", describe(isSend, peer, tag, messageBytes),
                             " failed: ", e.what_without_backtrace()));
  }
}

void PointToPoint::Channel::sendOne(Op& op) {
  int64_t header[2] = {op.tag, static_cast<int64_t>(op.bytes)};
  transfer(true, header, sizeof header, op.tag, op.bytes);
  if (op.bytes) transfer(true, op.tensor.data_ptr(), op.bytes, op.tag, op.bytes);
  op.done(nullptr);
}

void PointToPoint::Channel::receiveOne() {
  // The next message from the peer; a receive is waiting, so one comes
  // (or the deadline passes).
  int64_t header[2] = {0, 0};
  transfer(false, header, sizeof header, -1, sizeof header);
  const int64_t tag = header[0];
  TORCH_CHECK(header[1] >= 0, "coil backend: recv from rank ", peer,
              ": a message header with a negative size (", header[1], ")");
  const auto bytes = static_cast<size_t>(header[1]);
  std::optional<Op> op;
  {
    std::lock_guard<std::mutex> lock(mutex);
    op = takeFirst(ops, tag);
  }
  if (op && op->bytes == bytes) {
    // Straight into the receive's tensor (its contiguous stand-in otherwise).
    std::optional<Staged> staged;
    try {
      staged.emplace(op->tensor);
      if (bytes) transfer(false, staged->data(), bytes, tag, bytes);
      staged->writeBack();
    } catch (...) {
      op->done(std::current_exception());
      throw;
    }
    op->done(nullptr);
    return;
  }
  std::vector<uint8_t> message(bytes);
  try {
    if (bytes) transfer(false, message.data(), bytes, tag, bytes);
  } catch (...) {
    if (op) op->done(std::current_exception());
    throw;
  }
  if (op) {  // sizes differ: that receive fails; the stream stays in step
    deliver(*op, message.data(), bytes, peer);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    op = takeFirst(ops, tag);  // posted while the payload came in?
    if (!op) {
      early[tag].push_back(std::move(message));
      return;
    }
  }
  deliver(*op, message.data(), bytes, peer);
}

void PointToPoint::Channel::fail(std::exception_ptr error) {
  std::deque<Op> failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!broken) broken = error;
    failed.swap(ops);
    early.clear();
  }
  for (Op& op : failed) op.done(error);
}

void PointToPoint::Channel::destroyComm() {
  coilComm_t c;
  {
    std::lock_guard<std::mutex> lock(mutex);
    c = comm;
    comm = nullptr;
  }
  if (c) coilCommDestroy(c);
}

void PointToPoint::Channel::run() {
  for (;;) {
    std::optional<Op> sending;
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return stopping || !ops.empty(); });
      if (ops.empty()) break;  // stopping, nothing left
      if (outgoing) {
        sending = std::move(ops.front());
        ops.pop_front();
      }
    }
    try {
      try {
        ensureComm();
      } catch (const c10::Error& e) {
        int64_t tag = 0;
        size_t bytes = 0;
        if (sending) {
          tag = sending->tag, bytes = sending->bytes;
        } else {
          std::lock_guard<std::mutex> lock(mutex);
          if (!ops.empty()) tag = ops.front().tag, bytes = ops.front().bytes;
        }
        C10_THROW_ERROR(DistBackendError,
                        c10::str("coil backend: ", describe(outgoing, peer, tag, bytes),
                                 ": connecting to rank ", peer, " failed: ",
                                 e.what_without_backtrace()));
      }
      if (sending)
        sendOne(*sending);
      else
        receiveOne();
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (abortError) error = abortError;
      }
      if (sending && sending->done) {
        // receiveOne completes its own op; a send's is here.
        Op op = std::move(*sending);
        op.done(error);
      }
      fail(error);
      break;
    }
  }
  destroyComm();
}

PointToPoint::PointToPoint(int rank, int size, c10::intrusive_ptr<c10d::Store> store,
                           std::string key, std::string commName,
                           std::chrono::milliseconds timeout)
    : rank_(rank),
      store_(std::move(store)),
      key_(std::move(key)),
      commName_(std::move(commName)),
      timeout_(timeout) {
  out_.resize(size);
  in_.resize(size);
}

PointToPoint::~PointToPoint() { shutdown(); }

std::shared_ptr<PointToPoint::Channel> PointToPoint::channel(int peer, bool outgoing) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!closed_, "coil backend: the process group has been shut down or aborted");
  if (peer == rank_) outgoing = false;  // to self: one queue, no thread
  std::shared_ptr<Channel>& slot = (outgoing ? out_ : in_).at(peer);
  if (slot) return slot;
  auto ch = std::make_shared<Channel>();
  ch->outgoing = outgoing;
  ch->self = rank_;
  ch->peer = peer;
  const int src = outgoing ? rank_ : peer, dst = outgoing ? peer : rank_;
  ch->storeKey = c10::str(key_, "/p2p/", src, "-", dst);
  ch->commName = c10::str(commName_, " p2p ", src, "->", dst);
  ch->timeout = timeout_;
  ch->store = store_;
  if (peer != rank_) {
    ch->thread = std::thread([ch] { ch->run(); });
    pthread_setname_np(ch->thread.native_handle(), outgoing ? "coil-torch-send" : "coil-torch-recv");
  }
  slot = ch;
  return ch;
}

void PointToPoint::send(const at::Tensor& tensor, int peer, int64_t tag, Done done) {
  Op op;
  op.tag = tag;
  op.bytes = byteCount(tensor);
  op.done = std::move(done);
  std::shared_ptr<Channel> ch;
  try {
    op.tensor = tensor.contiguous();
    ch = channel(peer, true);
  } catch (...) {
    op.done(std::current_exception());
    return;
  }
  if (peer == rank_) {
    // To self: delivered here, to a waiting receive or kept for the next one.
    std::optional<Op> recv;
    {
      std::lock_guard<std::mutex> lock(ch->mutex);
      recv = takeFirst(ch->ops, tag);
      if (!recv) {
        const auto* p = static_cast<const uint8_t*>(op.tensor.data_ptr());
        ch->early[tag].emplace_back(p, p + op.bytes);
      }
    }
    if (recv) deliver(*recv, op.tensor.data_ptr(), op.bytes, rank_);
    op.done(nullptr);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(ch->mutex);
    if (!ch->broken && !ch->abortError) {
      ch->ops.push_back(std::move(op));
      ch->cv.notify_one();
      return;
    }
  }
  op.done(ch->abortError ? ch->abortError : ch->broken);
}

void PointToPoint::recv(const at::Tensor& tensor, int peer, int64_t tag, Done done) {
  Op op;
  op.tensor = tensor;
  op.tag = tag;
  op.bytes = byteCount(tensor);
  op.done = std::move(done);
  std::shared_ptr<Channel> ch;
  try {
    ch = channel(peer, false);
  } catch (...) {
    op.done(std::current_exception());
    return;
  }
  std::vector<uint8_t> message;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(ch->mutex);
    auto early = ch->early.find(tag);
    if (early != ch->early.end() && !early->second.empty()) {
      message = std::move(early->second.front());
      early->second.pop_front();
      if (early->second.empty()) ch->early.erase(early);
    } else if (ch->broken || ch->abortError) {
      error = ch->abortError ? ch->abortError : ch->broken;
    } else {
      ch->ops.push_back(std::move(op));
      ch->cv.notify_one();
      return;
    }
  }
  if (error)
    op.done(error);
  else
    deliver(op, message.data(), message.size(), peer);
}

void PointToPoint::stopAll(std::exception_ptr abortError) {
  std::vector<std::shared_ptr<Channel>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ && !abortError) return;
    closed_ = true;
    for (auto* v : {&out_, &in_})
      for (auto& ch : *v)
        if (ch) all.push_back(ch);
  }
  for (auto& ch : all) {
    std::deque<Op> failed;
    {
      std::lock_guard<std::mutex> lock(ch->mutex);
      ch->stopping = true;
      if (abortError && !ch->abortError) {
        ch->abortError = abortError;
        failed.swap(ch->ops);
        if (ch->comm) coilCommRevoke(ch->comm);  // a blocked call returns within ~100 ms
      }
      if (ch->peer == ch->self && !ch->ops.empty()) {
        // Receives from self that no send matched: nothing else will come.
        for (Op& op : ch->ops) failed.push_back(std::move(op));
        ch->ops.clear();
      }
    }
    ch->cv.notify_all();
    for (Op& op : failed)
      op.done(abortError ? abortError
                         : errorWith(c10::str("coil backend: ", describe(false, ch->peer, op.tag,
                                                                         op.bytes),
                                              ": the process group was shut down before a "
                                              "message with this tag came")));
  }
  GilReleasedIfHeld released;  // a thread may be completing a future with a Python callback
  for (auto& ch : all) {
    if (!ch->thread.joinable()) continue;
    if (ch->thread.get_id() == std::this_thread::get_id())
      ch->thread.detach();  // a callback on that thread dropped the backend; it ends by itself
    else
      ch->thread.join();
  }
}

void PointToPoint::shutdown() { stopAll(nullptr); }

void PointToPoint::abort(std::exception_ptr error) { stopAll(error); }

}  // namespace coil_torch
