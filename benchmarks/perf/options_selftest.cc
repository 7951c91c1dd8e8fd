// The flags coil_perf shares with nccl-tests' *_perf programs mean what
// they mean there (-a -m -z -T -N -t -g -p -G -c -J -R), coil's own flags
// keep out of nccl-tests' letters, and --help names every flag.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "options.h"
#include "units.h"

namespace coil_perf {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "coil_perf");
  return parseOptions(static_cast<int>(args.size()), const_cast<char**>(args.data()));
}

std::string usageText() {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  printUsage(out, "coil_perf");
  std::fclose(out);
  std::string s(text, size);
  std::free(text);
  return s;
}

std::string usageErrorOf(std::vector<const char*> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(NcclTestsFlags, DefaultsAreNcclTestsDefaults) {
  const Options o = parse({});
  EXPECT_EQ(o.average, Average::Mean);  // nccl-tests' -a 1
  EXPECT_EQ(o.aggIters, 1);
  EXPECT_EQ(o.blocking, 0);
  EXPECT_EQ(o.timeoutSeconds, 0);
  EXPECT_EQ(o.runCycles, 1);
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.checkIters, 1);
  EXPECT_EQ(o.cudaGraphLaunches, 0);
  EXPECT_EQ(o.nprocs, 0);  // not given
  EXPECT_FALSE(o.version);
}

TEST(NcclTestsFlags, ShortForms) {
  const Options o = parse({"-a", "3", "-m", "4", "-z", "1", "-T", "30", "-N", "0", "-t", "2",
                           "-g", "1", "-p", "1", "-G", "5", "-c", "2", "-J", "rows.json", "-R",
                           "1"});
  EXPECT_EQ(o.average, Average::Max);
  EXPECT_EQ(o.aggIters, 4);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.timeoutSeconds, 30);
  EXPECT_EQ(o.runCycles, 0);  // 0: until stopped
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.cudaGraphLaunches, 5);
  EXPECT_EQ(o.checkIters, 2);
  EXPECT_EQ(o.jsonPath, "rows.json");
  EXPECT_TRUE(o.registerBuffers);
  EXPECT_FALSE(o.windowBuffers);
  EXPECT_TRUE(parse({"-R", "2"}).windowBuffers);
  EXPECT_FALSE(parse({"-R", "2"}).registerBuffers);
  EXPECT_EQ(parse({"-a", "0"}).average, Average::Rank0);
  EXPECT_EQ(parse({"-a", "2"}).average, Average::Min);
  EXPECT_EQ(parse({"-c", "0"}).checkIters, 0);
}

TEST(NcclTestsFlags, LongForms) {
  const Options o = parse({"--average=2", "--agg_iters", "3", "--blocking", "3", "--timeout=5",
                           "--run_cycles", "4", "--nthreads", "3", "--ngpus", "1",
                           "--parallel_init", "0", "--cudagraph", "0", "--output_file", "x.json",
                           "--local_register", "1", "--check", "3"});
  EXPECT_EQ(o.average, Average::Min);
  EXPECT_EQ(o.aggIters, 3);
  EXPECT_EQ(o.blocking, 3);
  EXPECT_EQ(o.timeoutSeconds, 5);
  EXPECT_EQ(o.runCycles, 4);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.jsonPath, "x.json");
  EXPECT_TRUE(o.registerBuffers);
  EXPECT_EQ(o.checkIters, 3);
}

TEST(NcclTestsFlags, DashNIsRunCyclesAndForkedProcessesAreDashP) {
  const Options o = parse({"-N", "3", "-P", "4"});
  EXPECT_EQ(o.runCycles, 3);
  EXPECT_EQ(o.nprocs, 4);
  EXPECT_EQ(parse({"--nprocs", "2"}).nprocs, 2);
}

TEST(NcclTestsFlags, RejectsValuesNcclTestsWouldNotMeanHere) {
  for (std::vector<const char*> bad : std::vector<std::vector<const char*>>{
           {"-a", "4"}, {"-m", "0"}, {"-z", "4"}, {"-T", "-1"}, {"-N", "-1"}, {"-t", "0"},
           {"-g", "2"}, {"-p", "2"}, {"-P", "0"}, {"-G", "-1"}, {"-c", "-1"}, {"--version=1"},
           {"-t", "2", "--calibrate", "c.txt"}, {"-t", "2", "--baseline", "mpi"}}) {
    EXPECT_THROW(parse(bad), UsageError) << bad[0] << " " << bad.back();
  }
  // One GPU per thread is all a host has: the message says what to use.
  EXPECT_NE(usageErrorOf({"-g", "2"}).find("-t"), std::string::npos) << usageErrorOf({"-g", "2"});
}

TEST(NcclTestsFlags, NcclTestsFlagsCoilPerfLacksAreNamedAsSuch) {
  for (const char* flag : {"-y", "-S", "-x", "-D", "-V", "-M", "-u", "-I", "-K"}) {
    const std::string why = usageErrorOf({flag, "1"});
    EXPECT_NE(why.find("nccl-tests"), std::string::npos) << flag << ": " << why;
    EXPECT_NE(why.find(flag), std::string::npos) << flag << ": " << why;
  }
}

TEST(MemoryFlag, HostDeviceOrLeftToMain) {
  EXPECT_EQ(parse({}).memory, Memory::Default);  // main probes for a usable device
  EXPECT_EQ(parse({"--memory", "host"}).memory, Memory::Host);
  EXPECT_EQ(parse({"--memory=device"}).memory, Memory::Device);
  EXPECT_NE(usageErrorOf({"--memory", "bogus"}).find("--memory: 'bogus'"), std::string::npos)
      << usageErrorOf({"--memory", "bogus"});
  EXPECT_NE(usageErrorOf({"--memory"}).find("needs a value"), std::string::npos);
  // Long form only: -M stays nccl-tests' (memory_report), refused by name.
  EXPECT_NE(usageErrorOf({"-M", "device"}).find("nccl-tests"), std::string::npos);
  // The MPI baseline and the model tools use host buffers.
  const std::string mpi = usageErrorOf({"--memory", "device", "--baseline", "mpi"});
  EXPECT_NE(mpi.find("the MPI baseline uses host buffers; run it with --memory host"),
            std::string::npos) << mpi;
  EXPECT_EQ(usageErrorOf({"--memory", "host", "--baseline", "mpi"}), "(accepted)");
  EXPECT_NE(usageErrorOf({"--memory", "device", "--calibrate", "f"}).find("host buffers"),
            std::string::npos);
}

TEST(NcclTestsFlags, VersionFlag) {
  EXPECT_TRUE(parse({"--version"}).version);
}

TEST(Help, ListsEveryFlag) {
  const std::string usage = usageText();
  for (const std::string& spelling : flagSpellings()) {
    EXPECT_NE(usage.find(spelling), std::string::npos) << spelling << " is not in --help";
  }
  // And the table is complete: every flag the parser knows is spelled.
  for (const char* known :
       {"-b", "-e", "-f", "-i", "-n", "-m", "-w", "-N", "-p", "-c", "-o", "-d", "-r", "-z",
        "-T", "-G", "-J", "-a", "-R", "-t", "-g", "-C", "-P", "-h", "--transport", "--baseline",
        "--memory",
        "--calibrate", "--predict", "--model", "--version", "--help"}) {
    bool found = false;
    for (const std::string& s : flagSpellings()) found = found || s == known;
    EXPECT_TRUE(found) << known;
  }
}

// band, bor and bxor take integer types only: named alone for float types
// they are a usage error that names the way out; -o all skips them there.
TEST(NcclTestsFlags, BitwiseOpsNeedAnIntegerType) {
  EXPECT_NE(usageErrorOf({"-d", "float", "-o", "bxor"}).find("-o bxor takes integer types only"),
            std::string::npos);
  EXPECT_NE(usageErrorOf({"-o", "band"}).find("-o band"), std::string::npos);  // -d float default
  EXPECT_EQ(usageErrorOf({"-d", "float,int32", "-o", "sum,bor"}), "(accepted)");
  EXPECT_EQ(usageErrorOf({"-d", "all", "-o", "bxor"}), "(accepted)");
  const Options all = parse({"-d", "float", "-o", "all"});
  EXPECT_TRUE(all.allOpsAsked);
  EXPECT_EQ(all.ops.size(), 8u);
}

}  // namespace
}  // namespace coil_perf
