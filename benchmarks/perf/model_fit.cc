#include "model_fit.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "algorithms/tree_shape.h"

namespace coil_perf {
namespace {

// Weighted sums of a two-column linear model y = a·x1 + b·x2.
struct Normal {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  void add(double x1, double x2, double y, double w) {
    s11 += w * x1 * x1;
    s12 += w * x1 * x2;
    s22 += w * x2 * x2;
    s1y += w * x1 * y;
    s2y += w * x2 * y;
  }
};

// Weighted sums of a one-column linear model through the origin, y = a·x.
struct Slope {
  double sxy = 0, sxx = 0;
  void add(double x, double y, double w) {
    sxy += w * x * y;
    sxx += w * x * x;
  }
  bool defined() const { return sxx > 0; }
  double value() const { return sxy / sxx; }
};

double relativeWeight(double us) { return 1.0 / (us * us); }

std::string formatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

ModelParams fitAllGather(const std::vector<Sample>& samples, int nranks) {
  if (nranks < 2) throw std::invalid_argument("fitAllGather: needs at least 2 ranks");
  const double n = nranks, f = (n - 1) / n;
  Normal eq;
  double smallest = 0, largest = 0;
  for (const Sample& s : samples) {
    if (!(s.us > 0)) continue;  // a zero time carries no information (and an infinite weight)
    eq.add(n - 1, f * s.bytes, s.us, relativeWeight(s.us));
    smallest = smallest == 0 ? s.bytes : std::min(smallest, s.bytes);
    largest = std::max(largest, s.bytes);
  }
  const double det = eq.s11 * eq.s22 - eq.s12 * eq.s12;
  if (!(largest > smallest) || !(det > 0)) {
    throw std::invalid_argument("fitAllGather: needs timed samples of at least two sizes");
  }
  ModelParams m;
  m.alphaUs = (eq.s1y * eq.s22 - eq.s2y * eq.s12) / det;
  m.betaUsPerByte = (eq.s2y * eq.s11 - eq.s1y * eq.s12) / det;
  if (m.alphaUs < 0) {
    m.alphaUs = 0;
    m.betaUsPerByte = eq.s2y / eq.s22;
  } else if (m.betaUsPerByte < 0) {
    m.betaUsPerByte = 0;
    m.alphaUs = eq.s1y / eq.s11;
  }
  return m;
}

double fitMemoryFactor(const std::vector<Sample>& samples, int nranks, const ModelParams& m,
                       const Predictor& predict) {
  ModelParams fixed = m, scalable = m;
  fixed.betaUsPerByte = fixed.gammaUsPerByte = 0;
  scalable.memoryFactor = 1;
  ModelParams beyond = m;
  beyond.memoryFactor = 2;  // any value != 1 tells which samples it applies to
  Slope fit;
  for (const Sample& s : samples) {
    if (!(s.us > 0) || memoryScale(beyond, nranks, s.bytes) == 1.0) continue;
    const double base = predict(fixed, s.bytes);
    fit.add(predict(scalable, s.bytes) - base, s.us - base, relativeWeight(s.us));
  }
  return fit.defined() ? std::max(0.0, fit.value()) : 1.0;
}

double fitTreeBeta(const std::vector<Sample>& samples, int nranks, const ModelParams& m,
                   size_t chunkBytes) {
  const coil::algo::TreeLoad load = coil::algo::doubleTreeLoad(nranks);
  ModelParams noBeta = m;
  noBeta.betaUsPerByte = 0;
  Slope fit;
  for (const Sample& s : samples) {
    if (!(s.us > 0)) continue;
    const double rest = s.us - predictTreeAllReduceUs(noBeta, nranks, s.bytes, chunkBytes);
    fit.add(load.sentPerByte * s.bytes * memoryScale(m, nranks, s.bytes), rest,
            relativeWeight(s.us));
  }
  if (!fit.defined())
    throw std::invalid_argument("fitTreeBeta: needs timed samples of non-zero size");
  return std::max(0.0, fit.value());
}

double fitRingGamma(const std::vector<Sample>& samples, int nranks, const ModelParams& ab,
                    size_t chunkBytes, double* unclamped) {
  // What α and β explain already; γ must explain the rest.
  ModelParams noGamma = ab;
  noGamma.gammaUsPerByte = 0;
  Slope fit;
  for (const Sample& s : samples) {
    if (!(s.us > 0)) continue;
    const double rest = s.us - predictRingAllReduceUs(noGamma, nranks, s.bytes, chunkBytes);
    fit.add((nranks - 1.0) / nranks * s.bytes * memoryScale(ab, nranks, s.bytes), rest,
            relativeWeight(s.us));
  }
  if (!fit.defined())
    throw std::invalid_argument("fitRingGamma: needs timed samples of non-zero size");
  if (unclamped != nullptr) *unclamped = fit.value();
  return std::max(0.0, fit.value());
}

std::string calibrationLines(const std::string& transport, const Calibration& c) {
  std::string text = transport + " alpha_us=" + formatNumber(c.ring.alphaUs) +
                     " beta_us_per_byte=" + formatNumber(c.ring.betaUsPerByte) +
                     " gamma_us_per_byte=" + formatNumber(c.ring.gammaUsPerByte) +
                     " memory_factor=" + formatNumber(c.ring.memoryFactor);
  if (c.tree.betaUsPerByte != c.ring.betaUsPerByte || c.tree.memoryFactor != c.ring.memoryFactor)
    text += "\n" + transport + "/tree beta_us_per_byte=" + formatNumber(c.tree.betaUsPerByte) +
            " memory_factor=" + formatNumber(c.tree.memoryFactor);
  return text;
}

void writeCalibrationFile(const std::string& path, const std::string& transport,
                          const Calibration& c, int nranks, const std::string& host,
                          const std::string& date) {
  // Keep the other transports' lines, each with the comment that heads it.
  std::vector<std::string> kept;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string first;
      words >> first;
      if (first == transport || first.rfind(transport + "/", 0) == 0) {
        if (!kept.empty() && kept.back().rfind("# coil calibration", 0) == 0) kept.pop_back();
        continue;
      }
      kept.push_back(line);
    }
  }
  kept.push_back("# coil calibration, " + date + ", " + host +
                 ", nranks=" + std::to_string(nranks));
  kept.push_back(calibrationLines(transport, c));

  // Written beside the target and renamed over it: a reader never sees half a file.
  const std::string temporary = path + ".tmp";
  std::FILE* f = std::fopen(temporary.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("--calibrate " + path + ": " + std::strerror(errno));
  bool ok = true;
  for (const std::string& line : kept) ok = ok && std::fprintf(f, "%s\n", line.c_str()) > 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(temporary.c_str());
    throw std::runtime_error("--calibrate " + path + ": write failed: " + std::strerror(saved));
  }
}

Calibration readCalibrationFile(const std::string& path, const std::string& transport) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--model " + path + ": " + std::strerror(errno));
  std::string line;
  int number = 0;
  Calibration c;
  bool found = false;
  double treeBeta = -1, treeMemory = -1;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream words(line);
    std::string first;
    if (!(words >> first) || first[0] == '#') continue;
    const bool main = first == transport, tree = first == transport + "/tree";
    if (!main && !tree) continue;
    const std::string where = "--model " + path + ":" + std::to_string(number) + ": ";
    ModelParams m;
    bool seen[3] = {false, false, false};
    std::string field;
    while (words >> field) {
      const size_t eq = field.find('=');
      const std::string key = field.substr(0, eq);
      char* end = nullptr;
      const double value = eq == std::string::npos ? -1 : std::strtod(field.c_str() + eq + 1, &end);
      if (eq == std::string::npos || *end != '\0' || !(value >= 0) ||
          end == field.c_str() + eq + 1) {
        throw std::runtime_error(where + "'" + field + "' is not key=non-negative-number");
      }
      if (key == "alpha_us" && main)
        m.alphaUs = value, seen[0] = true;
      else if (key == "beta_us_per_byte")
        m.betaUsPerByte = value, seen[1] = true;
      else if (key == "gamma_us_per_byte" && main)
        m.gammaUsPerByte = value, seen[2] = true;
      else if (key == "memory_factor")
        m.memoryFactor = value, treeMemory = tree ? value : treeMemory;
      else
        throw std::runtime_error(where + "unknown parameter '" + key + "'");
    }
    if (tree) {
      if (!seen[1]) throw std::runtime_error(where + "needs beta_us_per_byte");
      treeBeta = m.betaUsPerByte;
      continue;
    }
    if (!seen[0] || !seen[1] || !seen[2]) {
      throw std::runtime_error(where + "needs alpha_us, beta_us_per_byte and gamma_us_per_byte");
    }
    c.ring = m;
    found = true;
  }
  if (!found) throw std::runtime_error("--model " + path + ": no line for transport '" + transport + "'");
  c.tree = c.ring;
  if (treeBeta >= 0) c.tree.betaUsPerByte = treeBeta;
  if (treeMemory >= 0) c.tree.memoryFactor = treeMemory;
  return c;
}

}  // namespace coil_perf
