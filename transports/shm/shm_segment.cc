#include "transports/shm/shm_segment.h"

#include <exception>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"
#include "topo/placement.h"

namespace coil::transport {

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    base_ = o.base_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    o.base_ = nullptr;
    o.size_ = 0;
    o.owner_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  unlink();
  if (base_) munmap(base_, size_);
  base_ = nullptr;
}

namespace {
void* mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) failErrno("mmap of shared-memory segment " + name, errno);
  return p;
}
}  // namespace

ShmSegment ShmSegment::create(const std::string& name, size_t bytes, bool reserve) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) failErrno("shm_open(create " + name + ")", errno);
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    failErrno("ftruncate of shared-memory segment " + name + " (is /dev/shm full?)", err);
  }
  try {
    seg.base_ = mapFd(fd, bytes, name);
  } catch (...) {
    close(fd);
    shm_unlink(name.c_str());
    throw;
  }
  seg.size_ = bytes;
  // On a machine with several NUMA nodes, the pages go to this (the
  // creating) rank's node (topo/placement.h): set before any page exists,
  // since the reservation below already allocates them. A no-op with one node.
  topo::placeOnCallersNode(seg.base_, bytes, name.c_str());
  // Reserve the pages now: a full /dev/shm then fails here, with a message,
  // instead of killing a rank with SIGBUS at its first touch of a page.
  const int err = reserve ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  close(fd);
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL)
    failErrno("reserving " + std::to_string(bytes) + " bytes of shared memory for " + name +
                  " (is /dev/shm full?)",
              err);  // seg's destructor unmaps and unlinks
  return seg;
}

ShmSegment ShmSegment::attach(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) failErrno("shm_open(attach " + name + ")", errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    fail(coilInternalError, "shared-memory segment ", name, " has an unexpected size");
  }
  ShmSegment seg;
  seg.name_ = name;
  try {
    seg.base_ = mapFd(fd, bytes, name);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  seg.size_ = bytes;
  return seg;
}

void ShmSegment::unlink() noexcept {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

UnlinkNamesOnFailure::UnlinkNamesOnFailure(std::vector<std::string> names)
    : names_(std::move(names)), exceptionsAtStart_(std::uncaught_exceptions()) {}

UnlinkNamesOnFailure::~UnlinkNamesOnFailure() {
  if (std::uncaught_exceptions() > exceptionsAtStart_) unlinkAll();
}

void UnlinkNamesOnFailure::unlinkAll() noexcept {
  for (const std::string& name : names_) shm_unlink(name.c_str());
  names_.clear();
}

}  // namespace coil::transport
