// The per-user secret file (secret_file.h).
//
// Creation writes a temporary file and then link()s it to the final name.
// link, unlike rename, fails with EEXIST instead of replacing: with rename,
// two ranks racing would each install and use their own secret, and the
// last one would silently win the file but not the other's memory. A
// reader never sees a half-written file, because the final name only ever
// points at a complete one. link is atomic on NFS too, where a retried
// request can report failure for a link that was made; the link count of
// the temporary file tells the truth then.
#include "bootstrap/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "net/auth.h"
#include "core/error.h"
#include "core/owned_fd.h"

namespace coil {
namespace {

constexpr size_t kGeneratedBytes = 32;

std::string hex(const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

[[noreturn]] void failIo(const std::string& what, const std::string& path, int err) {
  fail(coilSystemError, what, " the secret file ", path, ": ", std::strerror(err), " (errno ",
       err, ")");
}

// The ssh-style checks, on the file actually opened (fstat), so that a
// swap between a check and the read cannot slip past them.
void checkSafe(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode))
    fail(coilInvalidUsage, "the secret file ", path,
         " is not a regular file; point COIL_SECRET_FILE at a file, or remove what is there");
  if (st.st_uid != geteuid())
    fail(coilInvalidUsage, "the secret file ", path, " is owned by uid ", st.st_uid,
         ", not by this user (uid ", geteuid(),
         "): a file someone else controls cannot hold your secret; remove it (coil then writes "
         "a new one) or set COIL_SECRET_FILE to a file of your own");
  if ((st.st_mode & 077) != 0)
    fail(coilInvalidUsage, "the secret file ", path, " has permissions ", octal(st.st_mode),
         ": group or others can read or change it, so its secret may be known. Run 'chmod 600 ",
         path, "', and if someone may have read it, delete it instead so that coil writes a "
         "new one");
  if (st.st_size > static_cast<off_t>(kMaxSecretFileBytes))
    fail(coilInvalidUsage, "the secret file ", path, " holds ", st.st_size,
         " bytes, more than the ", kMaxSecretFileBytes, " a secret file may hold: is it the "
         "right file?");
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' ||
                        s.back() == '\t'))
    s.pop_back();
  return s;
}

}  // namespace

std::optional<std::string> readSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO planted at the path must not hang the open.
  OwnedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    failIo("cannot open", path, errno);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) failIo("cannot stat", path, errno);
  checkSafe(st, path);

  std::string content;
  char buf[1024];
  while (content.size() <= kMaxSecretFileBytes) {
    ssize_t k = ::read(fd.get(), buf, sizeof buf);
    if (k < 0) {
      if (errno == EINTR) continue;
      failIo("cannot read", path, errno);
    }
    if (k == 0) break;
    content.append(buf, static_cast<size_t>(k));
  }
  if (content.size() > kMaxSecretFileBytes)  // it grew after fstat
    fail(coilInvalidUsage, "the secret file ", path, " holds more than the ",
         kMaxSecretFileBytes, " bytes a secret file may hold: is it the right file?");
  content = trimmed(std::move(content));
  if (content.size() < kMinSecretFileBytes)
    fail(coilInvalidUsage, "the secret file ", path, " holds ", content.size(),
         " bytes (without trailing whitespace); a secret needs at least ", kMinSecretFileBytes,
         ": delete it so that coil writes a new one, or put at least ", kMinSecretFileBytes,
         " random characters in it");
  return content;
}

void createSecretFile(const std::string& path) {
  if (path.empty() || path.front() != '/')
    fail(coilInvalidUsage, "the secret file path '", path, "' is not absolute");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  // Only the last directory (~/.coil): a missing home is not ours to make.
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    failIo("cannot make the directory " + dir + " for", path, errno);

  uint8_t random[kGeneratedBytes];
  auth::randomBytes(random, sizeof random);
  const std::string content = hex(random, sizeof random) + "\n";
  uint8_t tag[8];
  auth::randomBytes(tag, sizeof tag);
  // Unique across the hosts that share the directory, without asking them.
  const std::string tmp = path + ".tmp-" + hex(tag, sizeof tag);

  OwnedFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) failIo("cannot create", path, errno);
  int err = 0;
  // Exactly 0600 whatever the umask; the mode at open already kept others out.
  if (fchmod(fd.get(), 0600) != 0) err = errno;
  for (size_t done = 0; err == 0 && done < content.size();) {
    ssize_t k = ::write(fd.get(), content.data() + done, content.size() - done);
    if (k < 0 && errno != EINTR) err = errno;
    if (k > 0) done += static_cast<size_t>(k);
  }
  if (err == 0 && fsync(fd.get()) != 0) err = errno;
  if (int closeErr = fd.close(); err == 0) err = closeErr;
  if (err != 0) {
    ::unlink(tmp.c_str());
    failIo("cannot write", path, err);
  }

  if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    err = errno;
    struct stat st;
    const bool madeAnyway = ::stat(tmp.c_str(), &st) == 0 && st.st_nlink == 2;
    if (!madeAnyway) {
      ::unlink(tmp.c_str());
      fail(coilSystemError, "cannot create the secret file ", path, ": link: ",
           std::strerror(err), " (errno ", err, "). If this file system has no hard links, "
           "create the file yourself: mode 0600, at least ", kMinSecretFileBytes,
           " random characters");
    }
  }
  // Won the race or lost it: either way the final name holds a whole file.
  ::unlink(tmp.c_str());
}

std::string readOrCreateSecretFile(const std::string& path) {
  if (auto s = readSecretFile(path)) return *s;
  createSecretFile(path);
  if (auto s = readSecretFile(path)) return *s;
  fail(coilSystemError, "the secret file ", path, " vanished right after it was created");
}

}  // namespace coil
