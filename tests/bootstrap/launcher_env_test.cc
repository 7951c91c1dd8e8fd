// readLauncherEnv: torchrun, Open MPI, MPICH/Intel MPI (hydra) and Slurm variables, the +1 port rule
// under torchrun, and messages that name what is missing.
#include "bootstrap/launcher_env.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "test_util.h"

namespace coil {
namespace {

using test::messageOf;

std::vector<std::string> launcherVars() {
  std::vector<std::string> v = test::bootstrapVars();
  for (const char* n :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_RANK",
        "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
        "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST",
        "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURMD_NODENAME"})
    v.push_back(n);
  return v;
}

void expectSameId(const UniqueIdData& a, const UniqueIdData& b) {
  EXPECT_EQ(a.root.toString(), b.root.toString());
  EXPECT_EQ(std::memcmp(a.secret, b.secret, sizeof a.secret), 0);
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_EQ(a.rootHostedByRank0, b.rootHostedByRank0);
}

TEST(LauncherEnv, TorchrunStyleWithoutElasticUsesMasterPort) {
  test::EnvGuard env(launcherVars());
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_RANK", "1");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.nranks, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_TRUE(info.id.rootHostedByRank0);
  EXPECT_EQ(info.id.root.toString(), "127.0.0.1:29500");
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:29500"), ""));
}

// torchrun without the agent's store (torch 2.4's c10d rendezvous): the
// root's port comes from the run and MASTER_PORT, below the kernel's
// ephemeral ports (MASTER_PORT+1 was often a local port of torchrun's own
// connections; torchrun_test.py shows it).
TEST(LauncherEnv, UnderTorchElasticWithoutItsStoreTheRootPortComesFromTheRun) {
  test::EnvGuard env(launcherVars());
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "localhost");
  env.set("MASTER_PORT", "29500");
  env.set("TORCHELASTIC_RUN_ID", "run-42");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.localRank, -1);
  const int port = info.id.root.port();
  EXPECT_EQ(port, launcherJobPort("run-42:29500"));
  EXPECT_GE(port, 20000);
  EXPECT_LT(port, 32000);
  expectSameId(info.id, uniqueIdForFixedRoot(info.id.root, "run-42"));

  // Another run, or another MASTER_PORT (a concurrent launch), another port.
  env.set("TORCHELASTIC_RUN_ID", "run-43");
  EXPECT_NE(readLauncherEnv().id.root.port(), port);
  env.set("TORCHELASTIC_RUN_ID", "run-42");
  env.set("MASTER_PORT", "29501");
  EXPECT_NE(readLauncherEnv().id.root.port(), port);
  // Any MASTER_PORT will do, the last one too.
  env.set("MASTER_PORT", "65535");
  EXPECT_EQ(readLauncherEnv().id.root.port(), launcherJobPort("run-42:65535"));
}

// torchrun's default: the agent's store on MASTER_PORT carries the id.
TEST(LauncherEnv, UnderTorchrunWithTheAgentStoreTheIdGoesThroughTheStore) {
  test::EnvGuard env(launcherVars());
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  env.set("TORCHELASTIC_RUN_ID", "run-42");
  env.set("TORCHELASTIC_RESTART_COUNT", "2");
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  LaunchInfo info = readLauncherEnv();
  ASSERT_TRUE(info.store.has_value());
  EXPECT_EQ(info.store->store.toString(), "127.0.0.1:29500");
  EXPECT_EQ(info.store->keyPrefix, "/coil/run-42/2");
  EXPECT_EQ(info.rank, 1);
  // COIL_COMM_ID still names a root instead.
  env.set("COIL_COMM_ID", "127.0.0.1:6000");
  info = readLauncherEnv();
  EXPECT_FALSE(info.store.has_value());
  EXPECT_EQ(info.id.root.port(), 6000);
  // Without the agent's store, a root at a port from the run.
  unsetenv("COIL_COMM_ID");  // the guard restores it
  env.set("TORCHELASTIC_USE_AGENT_STORE", "False");
  info = readLauncherEnv();
  EXPECT_FALSE(info.store.has_value());
  EXPECT_EQ(info.id.root.port(), launcherJobPort("run-42:29500"));
}

TEST(LauncherEnv, OpenMpi) {
  test::EnvGuard env(launcherVars());
  env.set("OMPI_COMM_WORLD_RANK", "5");
  env.set("OMPI_COMM_WORLD_SIZE", "6");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  env.set("OMPI_MCA_ess_base_jobid", "12345");
  env.set("MASTER_ADDR", "::1");
  env.set("MASTER_PORT", "4000");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.launcher, "Open MPI");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.nranks, 6);
  EXPECT_EQ(info.localRank, 2);
  EXPECT_EQ(info.id.root.toString(), "[::1]:4000");
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("[::1]:4000"), "12345"));
}

TEST(LauncherEnv, Slurm) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_LOCALID", "0");
  env.set("SLURM_JOB_ID", "777");
  env.set("SLURM_STEP_ID", "0");
  env.set("MASTER_ADDR", "127.0.0.2");
  env.set("MASTER_PORT", "5000");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.nranks, 4);
  EXPECT_EQ(info.localRank, 0);
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.2:5000"), "777"));
  // A different job gets a different secret.
  env.set("SLURM_JOB_ID", "778");
  EXPECT_NE(std::memcmp(readLauncherEnv().id.secret, info.id.secret, 16), 0);
}

TEST(LauncherEnv, CommIdReplacesMasterAddrAndPort) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "2");
  env.set("SLURM_JOB_ID", "9");
  env.set("SLURM_STEP_ID", "0");
  env.set("COIL_COMM_ID", "127.0.0.1:6000");
  LaunchInfo info = readLauncherEnv();
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:6000"), "9"));
  // Used as given: no +1 under torchrun either.
  test::EnvGuard env2(launcherVars());
  env2.set("RANK", "0");
  env2.set("WORLD_SIZE", "1");
  env2.set("TORCHELASTIC_RUN_ID", "r");
  env2.set("COIL_COMM_ID", "127.0.0.1:6000");
  EXPECT_EQ(readLauncherEnv().id.root.port(), 6000);
}

TEST(LauncherEnv, DetectionOrder) {
  test::EnvGuard env(launcherVars());
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "5000");
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "3");
  env.set("SLURM_STEP_ID", "0");
  env.set("OMPI_COMM_WORLD_RANK", "2");
  env.set("OMPI_COMM_WORLD_SIZE", "3");
  EXPECT_EQ(readLauncherEnv().launcher, "Open MPI");
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "3");
  EXPECT_EQ(readLauncherEnv().launcher, "torchrun");
  EXPECT_EQ(readLauncherEnv().rank, 0);
}

TEST(LauncherEnv, MissingVariablesAreNamed) {
  test::EnvGuard env(launcherVars());
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  EXPECT_EQ(messageOf([] { readLauncherEnv(); }, coilInvalidUsage),
            "torchrun-style launch needs MASTER_PORT (RANK and WORLD_SIZE "
            "are set)");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(messageOf([] { readLauncherEnv(); }, coilInvalidUsage),
            "torchrun-style launch needs WORLD_SIZE (RANK is set)");

  test::EnvGuard env2(launcherVars());
  env2.set("SLURM_PROCID", "0");
  env2.set("SLURM_NTASKS", "2");
  env2.set("SLURM_STEP_ID", "3");
  env2.set("SLURM_JOB_ID", "41");
  env2.set("MASTER_PORT", "5000");
  EXPECT_EQ(messageOf([] { readLauncherEnv(); }, coilInvalidUsage),
            "Slurm launch needs MASTER_ADDR, or SLURM_STEP_NODELIST to take its first node "
            "from (SLURM_PROCID and SLURM_NTASKS are set)");

  test::EnvGuard env3(launcherVars());
  env3.set("OMPI_COMM_WORLD_SIZE", "2");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("Open MPI"), std::string::npos) << m;
  EXPECT_NE(m.find("OMPI_COMM_WORLD_RANK"), std::string::npos) << m;
}

TEST(LauncherEnv, MalformedVariablesAreNamed) {
  test::EnvGuard env(launcherVars());
  env.set("RANK", "one");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "5000");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("RANK='one'"), std::string::npos) << m;
  EXPECT_NE(m.find("torchrun"), std::string::npos) << m;

  env.set("RANK", "2");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos) << m;

  env.set("RANK", "1");
  env.set("MASTER_PORT", "70000");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("MASTER_PORT='70000'"), std::string::npos) << m;

  env.set("MASTER_PORT", "5000");
  env.set("MASTER_ADDR", "[bad");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("MASTER_ADDR"), std::string::npos) << m;

  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("WORLD_SIZE", "0");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("WORLD_SIZE='0'"), std::string::npos) << m;
}

// In an sbatch script (the batch step) and in an salloc shell Slurm sets
// SLURM_PROCID=0 and SLURM_NTASKS (the job's task count), but no step id:
// the process is not one of srun's tasks, and no other rank will come. Taken
// for rank 0 of N, it waited for the others until the init deadline (found
// with a real sbatch job: coil_perf hung there instead of forking its ranks).
TEST(LauncherEnv, SlurmBatchScriptOrSallocShellIsNotALaunch) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "2");
  env.set("SLURM_LOCALID", "0");
  env.set("SLURM_JOB_ID", "5");
  env.set("SLURM_JOB_NODELIST", "vm");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "5000");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("no launcher detected"), std::string::npos) << m;
  EXPECT_NE(m.find("SLURM_STEP_ID"), std::string::npos) << m;
  EXPECT_NE(m.find("srun"), std::string::npos) << m;
  // salloc's shell: SLURM_NTASKS alone.
  unsetenv("SLURM_PROCID");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("SLURM_STEP_ID"), std::string::npos) << m;
  // srun's tasks have the step id (SLURM_STEPID before Slurm 20.11 had both).
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_STEPID", "0");
  EXPECT_EQ(readLauncherEnv().launcher, "Slurm");
  EXPECT_EQ(readLauncherEnv().rank, 1);
}

// `srun -N 2 -n 8 ./app` without MASTER_ADDR or MASTER_PORT: rank 0 (task
// 0, on the step's first node) hosts the root on a port taken from the job
// and step ids, so two steps of one job, or two jobs, rarely meet on one.
TEST(LauncherEnv, SlurmWithoutMasterAddrUsesTheStepsFirstNode) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_PROCID", "2");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_JOB_ID", "123");
  env.set("SLURM_STEP_ID", "1");
  env.set("SLURM_STEP_NODELIST", "localhost,node[2-3]");
  env.set("SLURM_JOB_NODELIST", "ignored[1-9]");
  LaunchInfo info = readLauncherEnv();
  const int port = slurmStepPort(123, 1);
  EXPECT_EQ(info.id.root.toString(), "127.0.0.1:" + std::to_string(port));
  expectSameId(info.id, uniqueIdForFixedRoot(
                            SocketAddress::parse("127.0.0.1:" + std::to_string(port)), "123"));
  // Each given variable still wins.
  env.set("MASTER_PORT", "5001");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.1:5001");
  env.set("MASTER_ADDR", "127.0.0.3");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.3:5001");
  unsetenv("MASTER_PORT");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.3:" + std::to_string(port));
  // Without the step's list (older Slurm), the job's.
  unsetenv("MASTER_ADDR");
  unsetenv("SLURM_STEP_NODELIST");
  env.set("SLURM_JOB_NODELIST", "localhost");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.1:" + std::to_string(port));
}

// Rank 0 must run on the node it would host the root on; with a task layout
// that puts it elsewhere (srun -m arbitrary) it says so at once instead of
// leaving the others to wait for a root that never listens.
TEST(LauncherEnv, SlurmRankZeroOffTheFirstNodeIsNamed) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "2");
  env.set("SLURM_JOB_ID", "8");
  env.set("SLURM_STEP_ID", "0");
  env.set("SLURM_STEP_NODELIST", "localhost,nodeb");
  env.set("SLURMD_NODENAME", "nodeb");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("rank 0 runs on nodeb"), std::string::npos) << m;
  EXPECT_NE(m.find("MASTER_ADDR"), std::string::npos) << m;
  env.set("SLURMD_NODENAME", "localhost");
  EXPECT_EQ(readLauncherEnv().rank, 0);
  // A malformed list is named.
  env.set("SLURM_STEP_NODELIST", "node[1-");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("SLURM_STEP_NODELIST='node[1-'"), std::string::npos) << m;
}

TEST(LauncherEnv, SlurmStepPortsStayBelowTheEphemeralRange) {
  for (uint64_t job : {0ull, 1ull, 123ull, 4294967295ull, 18446744073709551615ull})
    for (uint64_t step : {0ull, 1ull, 15ull, 4294967294ull}) {
      int p = slurmStepPort(job, step);
      EXPECT_GE(p, 20000);
      EXPECT_LT(p, 32000);
    }
  // Consecutive steps of a job get different ports.
  EXPECT_NE(slurmStepPort(7, 0), slurmStepPort(7, 1));
  EXPECT_NE(slurmStepPort(7, 0), slurmStepPort(8, 0));
}

// `mpirun -np 4 ./app` on one host, as the README's example says: no
// MASTER_ADDR or MASTER_PORT. The root listens on loopback, on a port from
// the job id (Open MPI 4's OMPI_MCA_ess_base_jobid, Open MPI 5's
// PMIX_NAMESPACE), the same on every rank.
TEST(LauncherEnv, OpenMpiOnOneHostNeedsNoMasterAddrOrPort) {
  test::EnvGuard env(launcherVars());
  env.set("OMPI_COMM_WORLD_RANK", "1");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  env.set("OMPI_MCA_ess_base_jobid", "1671364609");
  LaunchInfo info = readLauncherEnv();
  const int port = launcherJobPort("1671364609");
  EXPECT_EQ(info.id.root.toString(), "127.0.0.1:" + std::to_string(port));
  expectSameId(info.id, uniqueIdForFixedRoot(info.id.root, "1671364609"));
  // Another job, another port (almost always) and another secret.
  env.set("OMPI_MCA_ess_base_jobid", "1671364610");
  LaunchInfo other = readLauncherEnv();
  EXPECT_NE(other.id.root.port(), port);
  EXPECT_NE(std::memcmp(other.id.secret, info.id.secret, 16), 0);
  // Open MPI 5 names the job by its PMIx namespace.
  unsetenv("OMPI_MCA_ess_base_jobid");
  env.set("PMIX_NAMESPACE", "prterun-vm-4242@1");
  info = readLauncherEnv();
  EXPECT_EQ(info.id.root.toString(),
            "127.0.0.1:" + std::to_string(launcherJobPort("prterun-vm-4242@1")));
  expectSameId(info.id, uniqueIdForFixedRoot(info.id.root, "prterun-vm-4242@1"));
  // Each given variable still wins.
  env.set("MASTER_PORT", "5002");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.1:5002");
  env.set("MASTER_ADDR", "127.0.0.4");
  unsetenv("MASTER_PORT");
  EXPECT_EQ(readLauncherEnv().id.root.toString(),
            "127.0.0.4:" + std::to_string(launcherJobPort("prterun-vm-4242@1")));
}

// Across hosts nobody knows rank 0's host: the message says to export it.
TEST(LauncherEnv, OpenMpiAcrossHostsNeedsMasterAddr) {
  test::EnvGuard env(launcherVars());
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  env.set("OMPI_MCA_ess_base_jobid", "77");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("needs MASTER_ADDR"), std::string::npos) << m;
  EXPECT_NE(m.find("OMPI_COMM_WORLD_LOCAL_SIZE=2"), std::string::npos) << m;
  EXPECT_NE(m.find("mpirun -x MASTER_ADDR="), std::string::npos) << m;
  // Without the local size coil cannot tell: MASTER_ADDR is needed too.
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("needs MASTER_ADDR"), std::string::npos) << m;
  // No job id and no MASTER_PORT: the port is named.
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  unsetenv("OMPI_MCA_ess_base_jobid");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("needs MASTER_PORT"), std::string::npos) << m;
}

TEST(LauncherEnv, JobPortsStayBelowTheEphemeralRange) {
  for (const char* job : {"", "0", "1671364609", "prterun-vm-4242@1", "x"}) {
    int p = launcherJobPort(job);
    EXPECT_GE(p, 20000) << job;
    EXPECT_LT(p, 32000) << job;
  }
}

// MPICH's and Intel MPI's mpiexec (hydra) set PMI_RANK, PMI_SIZE and
// MPI_LOCALRANKID/MPI_LOCALNRANKS, and no job id: MASTER_PORT is needed,
// MASTER_ADDR only across hosts.
TEST(LauncherEnv, MpichHydra) {
  test::EnvGuard env(launcherVars());
  env.set("PMI_RANK", "2");
  env.set("PMI_SIZE", "3");
  env.set("MPI_LOCALRANKID", "2");
  env.set("MPI_LOCALNRANKS", "3");
  env.set("MASTER_PORT", "5003");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.launcher, "MPICH hydra");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.nranks, 3);
  EXPECT_EQ(info.localRank, 2);
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:5003"), ""));
  env.set("MASTER_ADDR", "127.0.0.5");
  EXPECT_EQ(readLauncherEnv().id.root.toString(), "127.0.0.5:5003");
  unsetenv("MASTER_PORT");
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("needs MASTER_PORT"), std::string::npos) << m;
  EXPECT_NE(m.find("-genv MASTER_PORT"), std::string::npos) << m;
  env.set("MASTER_PORT", "5003");
  unsetenv("MASTER_ADDR");
  env.set("MPI_LOCALNRANKS", "1");
  m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  EXPECT_NE(m.find("needs MASTER_ADDR"), std::string::npos) << m;
  EXPECT_NE(m.find("MPI_LOCALNRANKS=1"), std::string::npos) << m;
}

// mpiexec (hydra) inside an sbatch job starts its proxies with srun, one
// task per node: the ranks inherit that step's SLURM_PROCID (the node's
// index), SLURM_NTASKS (here the job's 4) and SLURM_STEP_ID, as seen under
// the slurm suite's Slurm 22.05. hydra's PMI_* are the ranks, on every rank
// (rank 0's SLURM_PROCID and SLURM_NTASKS happen to agree with its PMI_*).
// Under `srun --mpi=pmi2` (no MPI_LOCAL*) the PMI_* are Slurm's own, and
// Slurm's defaults apply.
TEST(LauncherEnv, HydraUnderSlurmTakesPmiRanks) {
  test::EnvGuard env(launcherVars());
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_STEP_ID", "0");
  env.set("SLURM_JOB_ID", "55");
  env.set("PMI_SIZE", "4");
  env.set("MPI_LOCALNRANKS", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "5004");
  for (int rank : {0, 1, 2, 3}) {
    env.set("SLURM_PROCID", std::to_string(rank / 2).c_str());
    env.set("PMI_RANK", std::to_string(rank).c_str());
    env.set("MPI_LOCALRANKID", std::to_string(rank % 2).c_str());
    LaunchInfo info = readLauncherEnv();
    EXPECT_EQ(info.launcher, "MPICH hydra") << rank;
    EXPECT_EQ(info.rank, rank);
    EXPECT_EQ(info.nranks, 4);
    EXPECT_EQ(info.localRank, rank % 2);
    expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:5004"), ""));
  }
  unsetenv("MPI_LOCALNRANKS");
  unsetenv("MPI_LOCALRANKID");
  env.set("SLURM_PROCID", "1");
  env.set("PMI_RANK", "1");
  LaunchInfo info = readLauncherEnv();
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_EQ(info.rank, 1);
  expectSameId(info.id, uniqueIdForFixedRoot(SocketAddress::parse("127.0.0.1:5004"), "55"));
}

TEST(LauncherEnv, NoLauncherSaysWhatWasLookedFor) {
  test::EnvGuard env(launcherVars());
  std::string m = messageOf([] { readLauncherEnv(); }, coilInvalidUsage);
  for (const char* var : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    EXPECT_NE(m.find(var), std::string::npos) << var << " not in: " << m;
}

}  // namespace
}  // namespace coil
