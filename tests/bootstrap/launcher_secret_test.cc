// The secret of a launcher-started communicator (readLauncherEnv): a stranger
// who knows the rendezvous address and the job id must not be able to
// authenticate whenever a real secret is available (COIL_SECRET, the
// per-user secret file), and a WARN line must say so when none is.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "net/auth.h"
#include "bootstrap/launcher_env.h"
#include "net/sha256.h"
#include "core/error.h"
#include "temp_dir.h"
#include "test_util.h"

namespace coil {
namespace {

constexpr const char* kAddr = "127.0.0.1";
constexpr const char* kPort = "29555";
constexpr const char* kJob = "4242";

// A Slurm-style launch of rank `rank`, with HOME in `home` (empty: unset).
struct Launch {
  test::EnvGuard env;
  explicit Launch(const std::string& home, int rank = 0)
      : env({"SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "MASTER_ADDR", "MASTER_PORT",
             "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "TORCHELASTIC_RUN_ID", "COIL_SOCKET_IFNAME", "COIL_COMM_ID", "COIL_SECRET",
             "COIL_SECRET_FILE", "HOME", "COIL_TIMEOUT_MS"}) {
    env.set("SLURM_PROCID", std::to_string(rank));
    env.set("SLURM_NTASKS", "2");
    env.set("SLURM_JOB_ID", kJob);
    env.set("SLURM_STEP_ID", "0");
    env.set("MASTER_ADDR", kAddr);
    env.set("MASTER_PORT", kPort);
    if (!home.empty()) env.set("HOME", home);
  }
};

// What a stranger computes from public facts: the derivation of
// uniqueIdForFixedRoot with no secret (length-prefixed "coil-fixed-root",
// empty key material, root text, job id), written out independently.
void strangersKey(uint8_t* out) {
  Sha256 h;
  for (const std::string& f : {std::string("coil-fixed-root"), std::string(),
                               std::string(kAddr) + ":" + kPort, std::string(kJob)}) {
    uint8_t len[4] = {static_cast<uint8_t>(f.size() >> 24), static_cast<uint8_t>(f.size() >> 16),
                      static_cast<uint8_t>(f.size() >> 8), static_cast<uint8_t>(f.size())};
    h.update(len, 4);
    h.update(f);
  }
  Sha256Digest d = h.finish();
  std::memcpy(out, d.data(), auth::kSecretBytes);
}

struct HandshakeResult {
  bool ok = false;
  std::string clientError;
};

// A real handshake over loopback: `client` proves itself to a server that
// holds `server`.
HandshakeResult handshake(const uint8_t* client, const uint8_t* server) {
  Socket listener = Socket::listen(test::loopback());
  Socket c = Socket::connect(listener.localAddress(), Deadline::after(5000));
  Socket s = listener.accept(Deadline::after(5000));
  bool serverOk = false;
  std::thread t([&] {
    try {
      auth::verifyAsServer(s, server, "root", Deadline::after(5000));
      serverOk = true;
    } catch (const Error&) {
      s.reset();  // as the root does: drop the stranger
    }
  });
  HandshakeResult r;
  try {
    auth::proveAsClient(c, client, "root", Deadline::after(5000));
  } catch (const Error& e) {
    r.clientError = e.what();
  }
  t.join();
  r.ok = serverOk && r.clientError.empty();
  return r;
}

int countWarnLines(const std::string& err) {
  int n = 0;
  for (size_t at = err.find(" coil WARN "); at != std::string::npos;
       at = err.find(" coil WARN ", at + 1))
    ++n;
  return n;
}

void writeFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

TEST(LauncherSecret, AStrangerWhoKnowsAddressAndJobIdCannotAuthenticate) {
  test::TempDir home;
  Launch launch(home.path());
  LaunchInfo info = readLauncherEnv();
  uint8_t key[auth::kSecretBytes];
  strangersKey(key);
  EXPECT_NE(std::memcmp(key, info.id.secret, sizeof key), 0)
      << "the secret is what anyone can compute from " << kAddr << ":" << kPort << " and job "
      << kJob;
  EXPECT_FALSE(handshake(key, info.id.secret).ok);
  // The ranks themselves (same home) still agree.
  EXPECT_TRUE(handshake(readLauncherEnv().id.secret, info.id.secret).ok);
}

TEST(LauncherSecret, TheSecretFileIsMadePrivateOnFirstUse) {
  test::TempDir home;
  Launch launch(home.path());
  testing::internal::CaptureStderr();
  LaunchInfo info = readLauncherEnv();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(test::modeOf(home / ".coil"), 0700);
  EXPECT_EQ(test::modeOf(home / ".coil/secret"), 0600);
  EXPECT_EQ(countWarnLines(err), 0) << err;
  // Same file, same id; and the id is what COIL_SECRET with the file's
  // content gives, so a host without the shared home can be given the
  // secret by COIL_SECRET=$(cat ~/.coil/secret).
  std::string content;
  std::getline(std::ifstream(home / ".coil/secret"), content);
  EXPECT_EQ(content.size(), 64u);
  Launch other("");
  other.env.set("COIL_SECRET", content);
  UniqueIdData viaEnv = readLauncherEnv().id;
  EXPECT_EQ(std::memcmp(viaEnv.secret, info.id.secret, sizeof viaEnv.secret), 0);
  EXPECT_EQ(viaEnv.nonce, info.id.nonce);
}

TEST(LauncherSecret, CoilSecretComesFirstAndTheFileIsNotTouched) {
  test::TempDir home;
  Launch launch(home.path());
  launch.env.set("COIL_SECRET", "correct horse battery staple");
  testing::internal::CaptureStderr();
  LaunchInfo info = readLauncherEnv();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(countWarnLines(err), 0) << err;
  EXPECT_EQ(test::modeOf(home / ".coil"), -1) << "no file is needed with COIL_SECRET";
  // Even an unsafe file does not matter then.
  ASSERT_EQ(mkdir((home / ".coil").c_str(), 0700), 0);
  writeFile(home / ".coil/secret", "0123456789abcdef0123456789abcdef\n", 0644);
  UniqueIdData again = readLauncherEnv().id;
  EXPECT_EQ(std::memcmp(again.secret, info.id.secret, sizeof again.secret), 0);
}

TEST(LauncherSecret, AFileOthersCanReadIsRefusedNamingIt) {
  test::TempDir home;
  Launch launch(home.path());
  ASSERT_EQ(mkdir((home / ".coil").c_str(), 0700), 0);
  writeFile(home / ".coil/secret", "0123456789abcdef0123456789abcdef\n", 0644);
  try {
    readLauncherEnv();
    ADD_FAILURE() << "a world-readable secret file was used";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage) << e.what();
    std::string m = e.what();
    EXPECT_NE(m.find(home / ".coil/secret"), std::string::npos) << m;
    EXPECT_NE(m.find("0644"), std::string::npos) << m;
    EXPECT_NE(m.find("chmod 600"), std::string::npos) << m;
  }
}

TEST(LauncherSecret, WithoutAnySecretTheKeyIsDerivableAndOneWarningSaysSo) {
  for (const char* how : {"COIL_SECRET_FILE=none", "HOME unset", "home cannot hold the file"}) {
    SCOPED_TRACE(how);
    test::TempDir home;
    Launch launch(std::string(how) == "HOME unset" ? "" : home.path());
    if (std::string(how) == "COIL_SECRET_FILE=none") launch.env.set("COIL_SECRET_FILE", "none");
    if (std::string(how) == "home cannot hold the file")
      launch.env.set("HOME", home / "missing");  // mkdir of .coil fails
    testing::internal::CaptureStderr();
    LaunchInfo info = readLauncherEnv();
    std::string err = testing::internal::GetCapturedStderr();
    uint8_t key[auth::kSecretBytes];
    strangersKey(key);
    EXPECT_TRUE(handshake(key, info.id.secret).ok) << "expected the derivable key";
    EXPECT_EQ(countWarnLines(err), 1) << err;
    EXPECT_NE(err.find("not against attackers"), std::string::npos) << err;
    EXPECT_NE(err.find("COIL_SECRET"), std::string::npos) << err;
    EXPECT_NE(err.find(".coil/secret"), std::string::npos) << err;
  }
}

TEST(LauncherSecret, AnExplicitSecretFileMustBeUsable) {
  test::TempDir dir;
  Launch launch(dir.path());
  launch.env.set("COIL_SECRET_FILE", "relative/secret");
  try {
    readLauncherEnv();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("COIL_SECRET_FILE"), std::string::npos) << e.what();
  }
  // Named, but its directory cannot be made: an error, not the derivable key.
  launch.env.set("COIL_SECRET_FILE", dir / "no/such/dir/secret");
  try {
    readLauncherEnv();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilSystemError) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir / "no/such/dir/secret"), std::string::npos)
        << e.what();
  }
  launch.env.set("COIL_SECRET_FILE", dir / "mine");
  readLauncherEnv();
  EXPECT_EQ(test::modeOf(dir / "mine"), 0600);
  EXPECT_EQ(test::modeOf(dir / ".coil"), -1) << "the default file is not used then";
}

TEST(LauncherSecret, HostsWithDifferentSecretFilesFailNamingTheFile) {
  // Two "hosts" without a shared home: each made its own secret file.
  test::TempDir homeA, homeB;
  UniqueIdData a, b;
  {
    Launch launch(homeA.path(), 0);
    a = readLauncherEnv().id;
  }
  {
    Launch launch(homeB.path(), 1);
    b = readLauncherEnv().id;
  }
  HandshakeResult r = handshake(b.secret, a.secret);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.clientError.find(homeB / ".coil/secret"), std::string::npos) << r.clientError;
  EXPECT_NE(r.clientError.find("shared"), std::string::npos) << r.clientError;
}

}  // namespace
}  // namespace coil
