#include "tune/tuner.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/env.h"
#include "core/error.h"

namespace coil::tune {
namespace {

using algo::CollKind;

double log2ceil(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

// Parses "shm:alpha=2,beta=0.0001;tcp:alpha=30" for one transport.
void applyOverride(const std::string& transport, LinkModel* m) {
  auto spec = env::get("COIL_TUNE");
  if (!spec) return;
  std::stringstream entries(*spec);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    auto colon = entry.find(':');
    if (colon == std::string::npos || entry.substr(0, colon) != transport) continue;
    std::stringstream fields(entry.substr(colon + 1));
    std::string field;
    while (std::getline(fields, field, ',')) {
      auto eq = field.find('=');
      if (eq == std::string::npos) fail(coilInvalidUsage, "COIL_TUNE: bad field '", field, "'");
      std::string key = field.substr(0, eq);
      double value = std::strtod(field.c_str() + eq + 1, nullptr);
      if (key == "alpha") m->alphaUs = value;
      else if (key == "beta") m->betaUsPerB = value;
      else if (key == "gamma") m->gammaUsPerB = value;
      else fail(coilInvalidUsage, "COIL_TUNE: unknown parameter '", key, "' (alpha, beta, gamma)");
    }
  }
}

CollKind kindOf(const std::string& name) {
  static const std::map<std::string, CollKind> names = {
      {"allreduce", CollKind::AllReduce},   {"broadcast", CollKind::Broadcast},
      {"reduce", CollKind::Reduce},         {"allgather", CollKind::AllGather},
      {"reducescatter", CollKind::ReduceScatter}, {"alltoall", CollKind::AllToAll},
      {"gather", CollKind::Gather},         {"scatter", CollKind::Scatter}};
  auto it = names.find(name);
  if (it == names.end()) fail(coilInvalidUsage, "COIL_ALGO: unknown collective '", name, "'");
  return it->second;
}

bool has(CollKind kind, const std::string& algorithm) {
  for (const auto& a : algorithmsFor(kind))
    if (a == algorithm) return true;
  return false;
}

}  // namespace

LinkModel linkModel(const std::string& transport) {
  // Measured with coil_perf on the 2-core reference machine (docs/performance.md).
  LinkModel m{5.0, 1.0 / 6000.0, 1.0 / 8000.0};  // shm: 5 µs, 6 GB/s, reduce 8 GB/s
  if (transport == "tcp") m = {25.0, 1.0 / 1500.0, 1.0 / 8000.0};
  applyOverride(transport, &m);
  return m;
}

const std::vector<std::string>& algorithmsFor(CollKind kind) {
  static const std::map<CollKind, std::vector<std::string>> table = {
      {CollKind::AllReduce, {"ring", "tree"}},   {CollKind::Broadcast, {"ring", "tree"}},
      {CollKind::Reduce, {"chain"}},             {CollKind::AllGather, {"ring"}},
      {CollKind::ReduceScatter, {"ring"}},       {CollKind::AllToAll, {"pairwise"}},
      {CollKind::Gather, {"direct"}},            {CollKind::Scatter, {"direct"}},
      {CollKind::Barrier, {"ring"}},             {CollKind::SendRecv, {"direct"}}};
  return table.at(kind);
}

double predictUs(CollKind kind, const std::string& a, size_t bytes, int n, size_t chunkBytes,
                 const LinkModel& m) {
  const double S = static_cast<double>(bytes), N = n, C = std::max<double>(1, chunkBytes);
  if (n == 1) return S * m.betaUsPerB;  // a local copy
  const double f = (N - 1) / N;
  switch (kind) {
    case CollKind::AllReduce:
    case CollKind::Barrier:
      if (a == "ring") {
        double rounds = std::max(1.0, std::ceil(S / (N * C)));
        return 2 * (N - 1) * rounds * m.alphaUs + 2 * f * S * m.betaUsPerB + f * S * m.gammaUsPerB;
      } else {  // double binary tree: log depth, pipelined chunks, ~2S sent per rank
        double chunks = std::max(1.0, std::ceil(S / (2 * C)));
        return (2 * log2ceil(n) + chunks) * m.alphaUs + 2 * S * m.betaUsPerB + S * m.gammaUsPerB;
      }
    case CollKind::Broadcast: {
      double chunks = std::max(1.0, std::ceil(S / C));
      if (a == "ring") return (N - 1 + chunks - 1) * (m.alphaUs + C * m.betaUsPerB);
      return (log2ceil(n) + chunks) * m.alphaUs + 2 * S * m.betaUsPerB;  // a parent sends twice
    }
    case CollKind::Reduce: {
      double chunks = std::max(1.0, std::ceil(S / C));
      return (N - 1 + chunks - 1) * (m.alphaUs + C * (m.betaUsPerB + m.gammaUsPerB));
    }
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
      return (N - 1) * m.alphaUs + f * S * m.betaUsPerB +
             (kind == CollKind::ReduceScatter ? f * S * m.gammaUsPerB : 0.0);
    default:  // all-to-all, gather, scatter, send/recv: (n-1) blocks of S/n
      return (N - 1) * m.alphaUs + f * S * m.betaUsPerB;
  }
}

AlgorithmOverride::AlgorithmOverride(const std::string& spec) {
  if (spec.empty()) return;
  if (spec.find(':') == std::string::npos) {
    bool known = false;
    for (CollKind k : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce,
                       CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                       CollKind::Gather, CollKind::Scatter})
      known = known || has(k, spec);
    if (!known) fail(coilInvalidUsage, "COIL_ALGO=", spec, ": no collective has that algorithm");
    all_ = spec;
    return;
  }
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    auto colon = entry.find(':');
    if (colon == std::string::npos)
      fail(coilInvalidUsage, "COIL_ALGO: expected collective:algorithm, got '", entry, "'");
    CollKind kind = kindOf(entry.substr(0, colon));
    std::string algorithm = entry.substr(colon + 1);
    if (!has(kind, algorithm))
      fail(coilInvalidUsage, "COIL_ALGO: ", entry.substr(0, colon), " has no algorithm '",
           algorithm, "'");
    per_[kind] = algorithm;
  }
}

std::string AlgorithmOverride::forced(CollKind kind) const {
  auto it = per_.find(kind);
  if (it != per_.end()) return it->second;
  if (!all_.empty() && has(kind, all_)) return all_;
  return "";
}

std::string choose(CollKind kind, size_t bytes, int nranks, size_t chunkBytes, const LinkModel& m,
                   const AlgorithmOverride& forced, std::vector<Prediction>* predictions) {
  std::string best;
  double bestUs = 0;
  for (const auto& a : algorithmsFor(kind)) {
    double us = predictUs(kind, a, bytes, nranks, chunkBytes, m);
    if (predictions) predictions->push_back({a, us});
    if (best.empty() || us < bestUs) best = a, bestUs = us;
  }
  std::string f = forced.forced(kind);
  return f.empty() ? best : f;
}

}  // namespace coil::tune
