// Passing file descriptors between processes of one host: SCM_RIGHTS over a
// Unix-domain socket.
//
// A descriptor means nothing in another process until the kernel installs
// the same open file there, and only SCM_RIGHTS does that without ptrace
// rights (pidfd_getfd needs them). CUDA IPC's preferred handles are such
// descriptors (cuMem allocations exported as POSIX file descriptors), as
// are memfd segments; NCCL and UCX pass them the same way.
//
// A process that receives opens an FdMailbox: a listening SOCK_SEQPACKET
// socket in Linux's abstract namespace ("\0coil-fd-" + name). No file is
// made or removed, and the name goes with the socket, so a crash leaves
// nothing behind. Abstract names are per network namespace: processes in
// different namespaces cannot reach each other's mailboxes.
//
// A send is one connection and one message (a tag, then up to kMaxFds
// descriptors as ancillary data), answered by a one-byte acknowledgement:
// a sender learns that the message arrived, and a receiver that died
// before taking it is an error on the sender, not a silent loss.
// Messages that arrive before their receive() waits for them are kept, so
// two transfers between the same pair may be received in either order.
//
// Every wait takes a Deadline, an abort flag, and a check the caller may
// use to notice a dead peer (it throws); a slice is at most kWaitSliceMs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "core/owned_fd.h"

namespace coil {

class FdMailbox {
 public:
  /// Descriptors in one message at most (the kernel allows 253).
  static constexpr size_t kMaxFds = 64;
  /// Called between waits; throws to give up (a dead peer, say).
  using Check = std::function<void()>;

  /// Listens on `name` (at most 90 characters); coilSystemError when the
  /// name is taken (another mailbox of that name on this host).
  explicit FdMailbox(const std::string& name);
  FdMailbox(const FdMailbox&) = delete;
  FdMailbox& operator=(const FdMailbox&) = delete;
  const std::string& name() const { return name_; }

  /// Sends `fds` (copies of them: the caller keeps its own) under `tag` to
  /// the mailbox `to`, and waits for its acknowledgement. A mailbox that is
  /// not there is retried until the deadline (it may not be open yet).
  static void send(const std::string& to, uint64_t tag, std::span<const int> fds,
                   const Deadline& deadline, const std::atomic<bool>* abortFlag = nullptr,
                   const Check& check = {});

  /// The descriptors of the message under `tag` (close-on-exec), waiting
  /// for it until the deadline. Each tag is received once.
  std::vector<OwnedFd> receive(uint64_t tag, const Deadline& deadline,
                               const std::atomic<bool>* abortFlag = nullptr,
                               const Check& check = {});

 private:
  struct Message {
    uint64_t tag;
    std::vector<OwnedFd> fds;
  };
  // Takes one message from an accepted connection and acknowledges it.
  Message take(int connection, const Deadline& deadline, const std::atomic<bool>* abortFlag,
               const Check& check);

  std::string name_;
  OwnedFd listener_;
  std::vector<Message> early_;  // arrived before their receive()
};

}  // namespace coil
