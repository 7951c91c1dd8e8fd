// A POSIX shared-memory segment (shm_open + mmap), owned or attached.
//
// Lifetime rule: the creator unlinks the name as soon as every peer has
// mapped it (the transport does this after a bootstrap barrier), so nothing
// is left in /dev/shm after a normal exit, an abort, or a crash after setup.
// If setup itself fails, the creator's destructor unlinks the name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace coil::transport {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ~ShmSegment();

  /// Creates (exclusively) and maps a zero-filled segment. With `reserve`,
  /// its pages are allocated now, so that a full /dev/shm fails here rather
  /// than with SIGBUS at the first touch of a page. Throws coilSystemError.
  static ShmSegment create(const std::string& name, size_t bytes, bool reserve = false);
  /// Maps an existing segment of exactly `bytes`. Throws coilSystemError.
  static ShmSegment attach(const std::string& name, size_t bytes);

  /// Removes the name (mapping stays valid). Idempotent.
  void unlink() noexcept;
  void* base() const { return base_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;  // must unlink
};

/// While a communicator's ranks exchange segment names, a rank may die
/// after creating its segment and before unlinking it. If the exchange
/// fails (leaves this scope by an exception), nobody will attach any more:
/// the survivors remove every name the ranks made or were about to make,
/// so nothing of the dead rank's is left in /dev/shm.
///
/// The exchange can also succeed on the survivors and still leave a name:
/// a rank killed after the final barrier but before it unlinked its own
/// segment (the barrier completes on its peers whether or not the rank then
/// lives). So once that barrier is passed, every rank calls unlinkAll():
/// each removes every name, its own and its peers' (ENOENT for the ones
/// already gone), and a name outlives its creator only if all the ranks die.
class UnlinkNamesOnFailure {
 public:
  explicit UnlinkNamesOnFailure(std::vector<std::string> names);
  ~UnlinkNamesOnFailure();
  UnlinkNamesOnFailure(const UnlinkNamesOnFailure&) = delete;
  UnlinkNamesOnFailure& operator=(const UnlinkNamesOnFailure&) = delete;

  /// Removes every name now: call it when every rank has attached, or when
  /// none will. Idempotent.
  void unlinkAll() noexcept;

 private:
  std::vector<std::string> names_;
  int exceptionsAtStart_;
};

}  // namespace coil::transport
