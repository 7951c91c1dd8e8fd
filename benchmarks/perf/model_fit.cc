#include "model_fit.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

double fitRingGamma(const std::vector<Sample>& samples, int nranks, const ModelParams& ab,
                    size_t chunkBytes, double* unclamped) {
  double sxy = 0, sxx = 0;
  for (const Sample& s : samples) {
    if (!(s.us > 0)) continue;
    // What α and β explain already; γ must explain the rest.
    ModelParams noGamma = ab;
    noGamma.gammaUsPerByte = 0;
    const double rest = s.us - predictRingAllReduceUs(noGamma, nranks, s.bytes, chunkBytes);
    const double x = (nranks - 1.0) / nranks * s.bytes;
    const double w = relativeWeight(s.us);
    sxy += w * x * rest;
    sxx += w * x * x;
  }
  if (!(sxx > 0)) throw std::invalid_argument("fitRingGamma: needs timed samples of non-zero size");
  if (unclamped != nullptr) *unclamped = sxy / sxx;
  return std::max(0.0, sxy / sxx);
}

std::string calibrationLine(const std::string& transport, const ModelParams& m) {
  return transport + " alpha_us=" + formatNumber(m.alphaUs) +
         " beta_us_per_byte=" + formatNumber(m.betaUsPerByte) +
         " gamma_us_per_byte=" + formatNumber(m.gammaUsPerByte);
}

void writeCalibrationFile(const std::string& path, const std::string& transport,
                          const ModelParams& m, int nranks, const std::string& host,
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
      if (first == transport) {
        if (!kept.empty() && kept.back().rfind("# coil calibration", 0) == 0) kept.pop_back();
        continue;
      }
      kept.push_back(line);
    }
  }
  kept.push_back("# coil calibration, " + date + ", " + host +
                 ", nranks=" + std::to_string(nranks));
  kept.push_back(calibrationLine(transport, m));

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

ModelParams readCalibrationFile(const std::string& path, const std::string& transport) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--model " + path + ": " + std::strerror(errno));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream words(line);
    std::string first;
    if (!(words >> first) || first[0] == '#' || first != transport) continue;
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
      if (key == "alpha_us")
        m.alphaUs = value, seen[0] = true;
      else if (key == "beta_us_per_byte")
        m.betaUsPerByte = value, seen[1] = true;
      else if (key == "gamma_us_per_byte")
        m.gammaUsPerByte = value, seen[2] = true;
      else
        throw std::runtime_error(where + "unknown parameter '" + key + "'");
    }
    if (!seen[0] || !seen[1] || !seen[2]) {
      throw std::runtime_error(where + "needs alpha_us, beta_us_per_byte and gamma_us_per_byte");
    }
    return m;
  }
  throw std::runtime_error("--model " + path + ": no line for transport '" + transport + "'");
}

}  // namespace coil_perf
