#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace coil_perf {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string wrongValue(long long wrong) { return wrong < 0 ? "null" : std::to_string(wrong); }

void writeMeasure(std::ostringstream& o, const char* prefix, const Measure& m, bool present) {
  const auto value = [present](const std::string& text) { return present ? text : "null"; };
  o << ", \"" << prefix << "_time_us\": " << value(number(m.timeUs)) << ", \"" << prefix
    << "_algbw\": " << value(number(m.algbw)) << ", \"" << prefix
    << "_busbw\": " << value(number(m.busbw)) << ", \"" << prefix
    << "_wrong\": " << value(wrongValue(m.wrong));
}

}  // namespace

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
               const RunSummary& summary) {
  std::ostringstream o;
  o << "{\"tool\": " << jsonString(info.tool) << ", \"nranks\": " << info.nranks
    << ", \"transport\": " << jsonString(info.transport) << ", \"launcher\": "
    << jsonString(info.launcher) << ", \"min_bytes\": " << info.minBytes
    << ", \"max_bytes\": " << info.maxBytes << ", \"factor\": " << number(info.factor)
    << ", \"step_bytes\": " << info.stepBytes << ", \"warmup\": " << info.warmup
    << ", \"iters\": " << info.iters << ", \"check\": " << (info.check ? "true" : "false")
    << ", \"baseline\": " << (info.baselineName.empty() ? "null" : jsonString(info.baselineName));
  if (!info.memory.empty()) o << ", \"memory\": " << jsonString(info.memory);
  o << ",\n \"collectives\": [";
  if (info.collectives.empty()) o << jsonString("allreduce");
  for (size_t c = 0; c < info.collectives.size(); ++c) {
    o << (c ? ", " : "") << jsonString(info.collectives[c]);
  }
  o << "],\n \"ranks\": [";
  for (size_t r = 0; r < info.ranks.size(); ++r) o << (r ? ", " : "") << jsonString(info.ranks[r]);
  o << "],\n \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    o << (i ? ",\n  " : "\n  ") << "{\"collective\": " << jsonString(row.collective)
      << ", \"size\": " << row.bytes << ", \"count\": " << row.count
      << ", \"type\": " << jsonString(row.type) << ", \"op\": " << jsonString(row.op)
      << ", \"root\": " << (row.root >= 0 ? std::to_string(row.root) : "null")
      << ", \"nranks\": " << info.nranks << ", \"transport\": " << jsonString(info.transport);
    writeMeasure(o, "oop", row.outOfPlace, true);
    writeMeasure(o, "ip", row.inPlace, row.hasInPlace);
    if (!info.baselineName.empty()) {
      const BaselineCell& b = row.baseline;
      o << ", \"baseline\": " << jsonString(info.baselineName)
        << ", \"baseline_time_us\": " << (b.measured ? number(b.timeUs) : "null")
        << ", \"baseline_busbw\": " << (b.measured ? number(b.busbw) : "null")
        << ", \"baseline_ratio\": " << (b.measured ? number(b.ratio) : "null")
        << ", \"baseline_note\": " << (b.note.empty() ? "null" : jsonString(b.note));
    }
    o << "}";
  }
  o << "],\n \"avg_busbw\": " << number(summary.avgBusbw)
    << ", \"wrong_total\": " << wrongValue(summary.wrongTotal)
    << ", \"ok\": " << (summary.ok ? "true" : "false")
    << ", \"error\": " << (summary.error.empty() ? "null" : jsonString(summary.error)) << "}\n";

  const std::string text = o.str();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("--json " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) {
    throw std::runtime_error("--json " + path + ": write failed: " + std::strerror(errno));
  }
}

}  // namespace coil_perf
