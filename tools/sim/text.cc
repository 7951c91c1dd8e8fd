#include "text.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace coil::sim {
namespace {

std::string title(const Simulation& s) {
  std::string algo = s.request.algorithm->name;
  if (algo == "hier") algo = "hierarchical";
  if (algo == "oneshot") algo = "one-shot";
  std::string coll = algo::collName(s.request.collective);
  if (coll == "allreduce") coll = "all-reduce";
  else if (coll == "allgather") coll = "all-gather";
  else if (coll == "reducescatter") coll = "reduce-scatter";
  else if (coll == "alltoall") coll = "all-to-all";
  std::string t = algo + " " + coll;
  t[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(t[0])));
  return t;
}

}  // namespace

void printHeader(std::FILE* out, const Simulation& s) {
  const Request& r = s.request;
  std::fprintf(out, "%s (%s): %d ranks, %zu elements%s", title(s).c_str(), s.function(),
               r.nranks, r.count,
               r.algorithm->input == algo::Blocks::kPerRank ||
                       r.algorithm->output == algo::Blocks::kPerRank
                   ? " per block"
                   : "");
  if (s.form == Form::kPrimitives) std::fprintf(out, ", chunk %zu elements", r.chunkElems);
  else if (std::string(r.algorithm->name) == "slice")
    std::fprintf(out, ", pieces of %zu elements (slices start on whole elements here, on"
                      " 64-byte lines in the library)", r.chunkElems);
  if (algo::hasRoot(r.collective)) std::fprintf(out, ", root %d", r.root);
  if (!r.hostOf.empty()) {
    std::fprintf(out, ", hosts");
    for (int q = 0; q < r.nranks; ++q) std::fprintf(out, "%s%d", q ? "," : " ", r.hostOf[q]);
    std::fprintf(out, " (host of each rank)");
  }
  std::fprintf(out, "\n%s.\n", s.summary());
}

void printSteps(std::FILE* out, const Simulation& s, const std::vector<RoundCost>* costs) {
  const int n = s.request.nranks;
  if (s.form == Form::kWindow && s.request.algorithm->readsCallerBuffers())
    std::fprintf(out, "Each cell: the primitive and its [offset,+count); slot0 is a rank's input and"
                      " slot1 its output, read in place\n(registered windows: nothing is put),"
                      " post/wait are the step handshake, copyOut q:slot1 reads rank q's output;\n"
                      "blank: the rank waits\n\n");
  else if (s.form == Form::kWindow)
    std::fprintf(out, "Each cell: the primitive and its [offset,+count); put writes this rank's slot,"
                      " post/wait are the step handshake,\nreduceTo* read every rank's slot,"
                      " copyOut q:slot reads rank q's; blank: the rank waits\n\n");
  else if (s.form == Form::kExchange)
    std::fprintf(out, "Each cell: primitive from->rank->to [offset,+count); pack writes this rank's"
                      " record (and its part of the data)\ninto its exchange, send and recvBlock"
                      " start moving whole exchanges, waitAll waits for all of them,\nreduceBlocks"
                      " sums them (n records, then the data), unpack and reduceExchange take this"
                      " rank's\nresult out of the sum; blank: the rank waits\n\n");
  else if (s.form == Form::kFifo)
    std::fprintf(out, "Each cell: primitive from->rank->to [offset,+count); send and recvBlock only"
                      " start a transfer (into block from),\nwaitAll waits for all of them,"
                      " reduceBlocks reduces the n blocks in rank order; blank: the rank waits\n\n");
  else
    std::fprintf(out, "Each cell: primitive from->rank->to [offset,+count); blank: the rank waits\n\n");
  std::vector<std::vector<std::string>> cells(s.rounds, std::vector<std::string>(n));
  size_t width = 8;
  for (const Action& a : s.actions) {
    cells[a.round][a.rank] = algo::describe(a.step, a.rank);
    width = std::max(width, cells[a.round][a.rank].size());
  }
  // Rows are padded to columns, without trailing blanks (docs quote them).
  auto row = [&](std::string label, const std::vector<std::string>& columns, const std::string& tail) {
    char head[16];
    std::snprintf(head, sizeof head, "%-8s", label.c_str());
    std::string line = head;
    for (const auto& c : columns) line += " | " + c + std::string(width - c.size(), ' ');
    if (!tail.empty()) line += " | " + tail;
    line.erase(line.find_last_not_of(' ') + 1);
    std::fprintf(out, "%s\n", line.c_str());
  };
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) names.push_back("rank " + std::to_string(r));
  row("", names, costs ? "alpha us  beta us  gamma us" : "");
  for (int t = 0; t < s.rounds; ++t) {
    char terms[64] = "";
    if (costs)
      std::snprintf(terms, sizeof terms, "%8.3g %8.3g %9.3g", (*costs)[t].alphaUs,
                    (*costs)[t].betaUs, (*costs)[t].gammaUs);
    row("step " + std::to_string(t + 1), cells[t], terms);  // step T: the T-th round
  }
}

void printValues(std::FILE* out, const Simulation& s) {
  const int n = s.request.nranks;
  std::fprintf(out, "\nOutput buffers after each step (digits: the ranks whose input an element holds;"
                    " '.' for a rank not in it yet):\n");
  for (int t = 1; t <= s.rounds; ++t) {
    std::fprintf(out, "after step %d:\n", t);
    for (int r = 0; r < n; ++r) {
      std::fprintf(out, "  rank %d:", r);
      for (Contributors c : s.outputs[t][r]) std::fprintf(out, " %s", contributorsText(c, n).c_str());
      std::fprintf(out, "\n");
    }
  }
}

void printCostSummary(std::FILE* out, const Simulation& s, const std::vector<RoundCost>& costs,
                      const CostParams& p, std::optional<double> tunerUs) {
  RoundCost sum;
  for (const RoundCost& c : costs) {
    sum.alphaUs += c.alphaUs;
    sum.betaUs += c.betaUs;
    sum.gammaUs += c.gammaUs;
  }
  std::fprintf(out,
               "\nCost (%s: alpha %.3g us, beta %.3g us/B, gamma %.3g us/B; %zu-byte elements;"
               " a step costs its slowest rank):\n",
               p.source.c_str(), p.alphaUs, p.betaUsPerB, p.gammaUsPerB, s.request.elementBytes);
  std::fprintf(out, "  sum of the steps: %.4g us = alpha %.4g + beta %.4g + gamma %.4g\n",
               sum.total(), sum.alphaUs, sum.betaUs, sum.gammaUs);
  if (tunerUs)
    std::fprintf(out, "  the tuner's formula for this call: %.4g us (src/tune/tuner.cc)\n", *tunerUs);
}

bool printVerdict(std::FILE* out, const Simulation& s) {
  if (s.deadlocked) {
    std::fprintf(out, "\nDEADLOCK: no rank can run its next step.\n");
    return false;
  }
  if (!s.wrong.empty()) {
    std::fprintf(out, "\nWRONG RESULT:\n");
    for (const auto& w : s.wrong) std::fprintf(out, "  %s\n", w.c_str());
    return false;
  }
  std::fprintf(out, "\nEvery rank's output is what %s defines (%d steps, %zu messages).\n",
               algo::collName(s.request.collective), s.rounds, s.messages.size());
  return true;
}

}  // namespace coil::sim
