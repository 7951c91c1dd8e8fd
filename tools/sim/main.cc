// coil-sim: watch any of coil's collective algorithms run, step by step,
// without a network. It runs the library's own programs (the registry in
// src/algorithms/registry.h) under the tracing executor on every rank and
// replays them in steps (simulation.h).
//
//   coil-sim --list                                   every collective and algorithm
//   coil-sim allreduce --algo tree -n 5 --count 20    the step table
//   coil-sim -n 4 --count 8 --values                  ring all-reduce, and what every
//                                                     element holds after each step
//   coil-sim allreduce --algo hier --hosts 3,2 --count 10
//   coil-sim allreduce --algo oneshot --hosts 1,1,1 --count 4   across hosts: over FIFOs
//   coil-sim broadcast --algo ring -n 4 --count 16 --chunk 4 --cost --transport tcp
//   coil-sim reducescatter -n 3 --count 2 --svg ring.svg --html ring.html
//   coil-sim allreduce -n 2 --count 262144 --cost --measure
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "measure.h"
#include "model.h"
#include "render.h"
#include "simulation.h"
#include "text.h"

using namespace coil;
using namespace coil::sim;

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
      "usage: coil-sim [COLLECTIVE] [--algo NAME] [-n RANKS] [--count ELEMENTS] [--chunk ELEMENTS]\n"
      "                [--root RANK] [--hosts R,R,...] [--values] [--cost] [--transport NAME]\n"
      "                [--alpha US] [--beta US_PER_BYTE] [--gamma US_PER_BYTE] [--svg FILE]\n"
      "                [--html FILE] [--measure [--iters N]] [--list]\n"
      "Runs one of coil's collective algorithms on every rank and shows it step by step.\n"
      "  COLLECTIVE     allreduce (default), broadcast, reduce, allgather, reducescatter,\n"
      "                 alltoall, gather, scatter, barrier\n"
      "  --algo NAME    as COIL_ALGO spells it (default: the collective's first); --list shows all\n"
      "  -n, --ranks    ranks (default 4)      --count  elements (per block where a buffer holds\n"
      "                                                 one block per rank, as the C API's count)\n"
      "  --chunk        most elements one step moves (default: one round)\n"
      "  --hosts 3,2    ranks per host, numbered host by host (hier: default 2 hosts; oneshot:\n"
      "                 default one host, the window program; on more hosts there is no\n"
      "                 window, and it shows the one-shot over FIFOs, as the library runs it)\n"
      "  --values       after each step, which ranks' inputs every output element holds\n"
      "  --cost         alpha, beta, gamma per step and in total, beside the tuner's formula;\n"
      "                 parameters from --transport (default shm) or --alpha/--beta/--gamma\n"
      "  --svg FILE     a space-time diagram     --html FILE  a page that steps through it\n"
      "  --measure      run it on the real engine (ranks as threads, over --transport) and\n"
      "                 print the measured time next to the prediction\n"
      "Exit status: 0 when every rank ends as the collective defines, 1 when not, 2 for bad usage.\n");
}

void listAlgorithms() {
  std::printf("%-14s %-9s %-24s %s\n", "collective", "algorithm", "program", "what each rank does");
  for (const auto& a : algo::algorithmPrograms()) {
    std::printf("%-14s %-9s %-24s %s\n", algo::collName(a.collective), a.name, a.function, a.summary);
    if (a.hasFifoForm())
      std::printf("%-14s %-9s %-24s %s (--hosts)\n", algo::collName(a.collective), a.name,
                  a.withoutWindow.function, a.withoutWindow.summary);
  }
  std::printf("%-14s %-9s %-24s %s\n", "barrier", "ring", "ringAllReduce",
              "an all-reduce of one element");
}

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "coil-sim: %s\n", what.c_str());
  std::exit(2);
}

std::vector<int> hostsOf(const std::string& spec, int nranks, bool ranksGiven) {
  std::vector<int> perHost;
  if (spec.empty()) {
    perHost = {nranks - nranks / 2, nranks / 2};
    if (perHost[1] == 0) perHost.pop_back();
  } else {
    for (size_t at = 0; at <= spec.size();) {
      const size_t comma = std::min(spec.find(',', at), spec.size());
      const int k = std::atoi(spec.substr(at, comma - at).c_str());
      if (k < 1) bad("--hosts wants ranks per host, e.g. 2,2 (got '" + spec + "')");
      perHost.push_back(k);
      at = comma + 1;
    }
  }
  std::vector<int> hostOf;
  for (size_t h = 0; h < perHost.size(); ++h)
    for (int k = 0; k < perHost[h]; ++k) hostOf.push_back(static_cast<int>(h));
  if (ranksGiven && !spec.empty() && static_cast<int>(hostOf.size()) != nranks)
    bad("--hosts adds up to " + std::to_string(hostOf.size()) + " ranks, -n says " +
        std::to_string(nranks));
  return hostOf;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) bad("cannot write " + path);
}

double number(const char* text, const char* flag) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end || v < 0) bad(std::string(flag) + " wants a number >= 0, not '" + text + "'");
  return v;
}

}  // namespace

int run(int argc, char** argv) {
  Request req;
  std::string algoName, hostsSpec, transport = "shm", svgPath, htmlPath;
  bool values = false, cost = false, doMeasure = false, ranksGiven = false;
  CostParams given;
  bool alphaGiven = false, betaGiven = false, gammaGiven = false;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) bad(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-n" || arg == "--ranks") req.nranks = std::atoi(next()), ranksGiven = true;
    else if (arg == "--algo") algoName = next();
    else if (arg == "--count") req.count = std::strtoull(next(), nullptr, 10);
    else if (arg == "--chunk") req.chunkElems = std::strtoull(next(), nullptr, 10);
    else if (arg == "--root") req.root = std::atoi(next());
    else if (arg == "--hosts") hostsSpec = next();
    else if (arg == "--values") values = true;
    else if (arg == "--cost") cost = true;
    else if (arg == "--transport") transport = next();
    else if (arg == "--alpha") given.alphaUs = number(next(), "--alpha"), alphaGiven = true;
    else if (arg == "--beta") given.betaUsPerB = number(next(), "--beta"), betaGiven = true;
    else if (arg == "--gamma") given.gammaUsPerB = number(next(), "--gamma"), gammaGiven = true;
    else if (arg == "--svg") svgPath = next();
    else if (arg == "--html") htmlPath = next();
    else if (arg == "--measure") doMeasure = true;
    else if (arg == "--iters") iters = std::atoi(next());
    else if (arg == "--list") return listAlgorithms(), 0;
    else if (arg == "-h" || arg == "--help") return usage(stdout), 0;
    else if (arg[0] != '-' && i == 1) {
      if (!algo::parseCollective(arg, &req.collective)) bad("unknown collective '" + arg + "' (see --list)");
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (algoName.empty())
    for (const auto& a : algo::algorithmPrograms())
      if (a.collective == (req.collective == algo::CollKind::Barrier ? algo::CollKind::AllReduce
                                                                      : req.collective)) {
        algoName = a.name;
        break;
      }
  req.algorithm = algo::findProgram(req.collective, algoName);
  if (!req.algorithm) {
    bad(std::string(algo::collName(req.collective)) + " has no algorithm '" + algoName +
        "' (see --list)");
  }
  if (req.collective == algo::CollKind::Barrier) req.count = 1;
  // hier follows the hosts (two by default); a window program runs on one
  // host unless --hosts spreads the ranks (then its FIFO form runs, if any).
  const bool hostsMatter = req.algorithm->onWindow() || req.algorithm->isRootedOneShot();
  if (algoName == "hier" || (hostsMatter && !hostsSpec.empty())) {
    req.hostOf = hostsOf(hostsSpec, req.nranks, ranksGiven);
    req.nranks = static_cast<int>(req.hostOf.size());
  } else if (!hostsSpec.empty()) {
    bad("--hosts is for --algo hier, the window programs (oneshot, slice) and the rooted "
        "one-shot");
  }
  if (req.nranks < 1 || req.nranks > 64) bad("-n must be in [1, 64]");
  if (req.root < 0 || req.root >= req.nranks) bad("--root must be a rank in [0, " + std::to_string(req.nranks - 1) + "]");
  if (iters < 1) bad("--iters must be at least 1");

  Simulation s;
  try {
    s = simulate(req);
  } catch (const std::exception& e) {
    bad(e.what());
  }
  CostParams params;
  try {
    params = algorithmCosts(transport, s);
  } catch (const std::exception& e) {
    bad(e.what());
  }
  if (alphaGiven || betaGiven || gammaGiven) {
    if (alphaGiven) params.alphaUs = given.alphaUs;
    if (betaGiven) params.betaUsPerB = given.betaUsPerB;
    if (gammaGiven) params.gammaUsPerB = given.gammaUsPerB;
    params.source = "--alpha/--beta/--gamma over " + params.source;
  }
  const std::vector<RoundCost> costs = roundCosts(s, params);

  printHeader(stdout, s);
  printSteps(stdout, s, cost ? &costs : nullptr);
  if (values) printValues(stdout, s);
  if (cost || doMeasure) printCostSummary(stdout, s, costs, params, tunerPredictionUs(s, params));
  if (doMeasure) {
    const Measurement m = measure(s, transport, iters);
    if (m.ran)
      std::printf("  measured: %.4g us per call (mean of %d, %d ranks as threads over %s;"
                  " the engine picks its own chunk)\n",
                  m.microseconds, m.iterations, req.nranks, transport.c_str());
    else
      std::printf("  measured: not run: %s\n", m.why.c_str());
  }
  const bool ok = printVerdict(stdout, s);
  if (!svgPath.empty()) writeFile(svgPath, renderSvg(s));
  if (!htmlPath.empty()) writeFile(htmlPath, renderHtml(s, costs, params));
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  // Whatever escapes (a bad COIL_* variable the engine's parts read, an
  // unwritable --svg path): one line naming it, not std::terminate.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    bad(e.what());
  }
}
