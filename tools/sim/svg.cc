// renderSvg: the space-time diagram of a Simulation (render.h).
//
// Ranks are rows and steps (rounds) are columns; every action is a box in
// its cell, every message an arrow from the sender's cell to the receiver's.
// A cell's fill says how much of the collective's result the rank's output
// holds after that step, so a reduction can be watched spreading.
//
// The output is deterministic (integer coordinates, no clocks, no maps
// keyed by pointers): the same Simulation always gives the same bytes,
// which keeps the docs' pictures and the tests stable.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "render.h"
#include "result_colours.h"

namespace coil::sim {


namespace {

using K = algo::PrimitiveKind;

// The grid, in pixels.
constexpr int kMargin = 16;
constexpr int kTitleH = 44;   // title and summary lines
constexpr int kHeaderH = 22;  // "step t" column headers
constexpr int kLabelW = 72;   // "rank r" row labels
constexpr int kCellW = 124;
constexpr int kCellH = 64;
constexpr int kBoxW = 46;     // an action's box, centred in its cell
constexpr int kBoxH = 24;
constexpr int kExchangeBulge = 14;  // a same-step arrow's curve beside the boxes
constexpr int kLegendItemW = 176;
constexpr int kLegendRowH = 24;

/// Short names that fit a box; the legend spells them out.
const char* abbreviation(K kind) {
  switch (kind) {
    case K::Send: return "send";
    case K::Recv: return "recv";
    case K::RecvReduceSend: return "rrs";
    case K::RecvReduceCopySend: return "rrcs";
    case K::RecvCopySend: return "rcs";
    case K::RecvReduceCopy: return "rrc";
    case K::RecvReduce: return "rr";
    case K::Copy: return "copy";
    case K::SendRecv: return "sr";
    case K::RecvBlock: return "rcvBlk";
    case K::WaitAll: return "wtAll";
    case K::ReduceBlocks: return "redBlk";
    case K::PackExchange: return "pack";
    case K::UnpackExchange: return "unpack";
    case K::ReduceExchange: return "redEx";
    case K::Put: return "put";
    case K::Post: return "post";
    case K::Wait: return "wait";
    case K::ReduceToOutput: return "r>out";
    case K::ReduceToSlot: return "r>slot";
    case K::CopyOut: return "c>out";
  }
  return "?";
}

constexpr K kAllKinds[] = {K::Send,           K::Recv,         K::RecvReduceSend,
                           K::RecvReduceCopySend, K::RecvCopySend, K::RecvReduceCopy,
                           K::RecvReduce,     K::Copy,         K::SendRecv,
                           K::RecvBlock,      K::WaitAll,      K::ReduceBlocks,
                           K::PackExchange,   K::UnpackExchange, K::ReduceExchange,
                           K::Put,            K::Post,         K::Wait,
                           K::ReduceToOutput, K::ReduceToSlot, K::CopyOut};

std::string num(int v) { return std::to_string(v); }

std::string titleLine(const Simulation& s) {
  const Request& r = s.request;
  std::string t = std::string(algo::collName(r.collective)) + ", " + r.algorithm->name + " (" +
                  s.function() + "): " + num(r.nranks) + " ranks, count " +
                  std::to_string(r.count) + ", chunk " + std::to_string(r.chunkElems);
  if (algo::hasRoot(r.collective)) t += ", root " + num(r.root);
  if (s.deadlocked) t += " - DEADLOCK";
  else if (!s.wrong.empty()) t += " - WRONG RESULT";
  return t;
}

// Pixel geometry of the grid.
struct Grid {
  int columns, rows, width, height;
  int top() const { return kMargin + kTitleH + kHeaderH; }
  int cellX(int round) const { return kMargin + kLabelW + round * kCellW; }
  int cellY(int rank) const { return top() + rank * kCellH; }
  int centreX(int round) const { return cellX(round) + kCellW / 2; }
  int centreY(int rank) const { return cellY(rank) + kCellH / 2; }
};

void emitHeader(std::string& out, const Simulation& s, const Grid& g) {
  out += "<text class=\"title\" x=\"" + num(kMargin) + "\" y=\"" + num(kMargin + 14) +
         "\" font-size=\"15\" font-weight=\"bold\">" + xmlEscape(titleLine(s)) + "</text>\n";
  out += "<text class=\"summary\" x=\"" + num(kMargin) + "\" y=\"" + num(kMargin + 34) +
         "\" font-size=\"12\" fill=\"#444\">" + xmlEscape(s.summary()) +
         "</text>\n";
  for (int t = 0; t < g.columns; ++t)
    out += "<text class=\"colhead\" x=\"" + num(g.centreX(t)) + "\" y=\"" + num(g.top() - 7) +
           "\" text-anchor=\"middle\" font-size=\"12\">step " + num(t + 1) + "</text>\n";
  for (int r = 0; r < g.rows; ++r)
    out += "<text class=\"rowhead\" x=\"" + num(kMargin + 4) + "\" y=\"" + num(g.centreY(r) + 4) +
           "\" font-size=\"13\">rank " + num(r) + "</text>\n";
}

// One rect per (rank, step), filled by how much of its result the rank holds.
void emitCells(std::string& out, const Simulation& s, const Grid& g) {
  const int n = s.request.nranks;
  std::vector<std::vector<Contributors>> want(n, std::vector<Contributors>(s.outputElems));
  for (int r = 0; r < n; ++r)
    for (size_t o = 0; o < s.outputElems; ++o) want[r][o] = wantedContributors(s, r, o);
  out += "<g class=\"cells\" stroke=\"#bbbbbb\" stroke-width=\"1\">\n";
  for (int t = 0; t < g.columns; ++t)
    for (int r = 0; r < n; ++r) {
      const int pct = resultPercent(s.outputs[t + 1][r], want[r]);
      const std::string held =
          pct < 0 ? "no result expected" : num(pct) + "% of its result";
      out += "<rect class=\"cell\" data-rank=\"" + num(r) + "\" data-round=\"" + num(t) +
             "\" x=\"" + num(g.cellX(t)) + "\" y=\"" + num(g.cellY(r)) + "\" width=\"" +
             num(kCellW) + "\" height=\"" + num(kCellH) + "\" fill=\"" + resultColour(pct) +
             "\"><title>rank " + num(r) + " after step " + num(t + 1) + ": " + held +
             "</title></rect>\n";
    }
  out += "</g>\n";
  // Outlines of whole columns: invisible here, the HTML page highlights the
  // current step's by its data-round.
  out += "<g class=\"columns\" fill=\"none\">\n";
  for (int t = 0; t < g.columns; ++t)
    out += "<rect class=\"col\" data-round=\"" + num(t) + "\" x=\"" + num(g.cellX(t)) +
           "\" y=\"" + num(g.top()) + "\" width=\"" + num(kCellW) + "\" height=\"" +
           num(g.rows * kCellH) + "\"/>\n";
  out += "</g>\n";
}

void emitActions(std::string& out, const Simulation& s, const Grid& g) {
  out += "<g class=\"actions\" font-size=\"12\" font-family=\"monospace\">\n";
  for (const Action& a : s.actions) {
    const int x = g.centreX(a.round) - kBoxW / 2, y = g.centreY(a.rank) - kBoxH / 2;
    out += "<g class=\"action\" data-rank=\"" + num(a.rank) + "\" data-round=\"" + num(a.round) +
           "\"><title>" + xmlEscape(algo::describe(a.step, a.rank)) + "</title><rect x=\"" +
           num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(kBoxW) + "\" height=\"" +
           num(kBoxH) + "\" rx=\"4\" fill=\"#ffffff\" stroke=\"#333333\"/><text x=\"" +
           num(g.centreX(a.round)) + "\" y=\"" + num(g.centreY(a.rank) + 4) +
           "\" text-anchor=\"middle\">" + abbreviation(a.step.kind) + "</text></g>\n";
  }
  out += "</g>\n";
}

// A message's arrow as an SVG path, and where its label goes.
struct Arrow {
  std::string d;
  int labelX, labelY;
  const char* labelAnchor;
  bool lost;  // never received (a deadlock): drawn dashed to the next step
};

Arrow arrowFor(const Message& m, const Grid& g) {
  Arrow a{};
  a.lost = m.receivedRound < 0;
  const int toRound = a.lost ? m.sentRound + 1 : m.receivedRound;
  const int y1 = g.centreY(m.from), y2 = g.centreY(m.to);
  if (toRound == m.sentRound) {
    // A sendRecv's half, received in its own step: a curve beside the
    // column's boxes, left of them going down and right going up, so the
    // two halves of an exchange never overlap; the bulge varies with the
    // pair so that exchanges sharing a column stay apart.
    const bool down = y2 > y1;
    const int side = down ? -1 : 1;
    const int x = g.centreX(m.sentRound) + side * kBoxW / 2;
    const int bulge = side * (kExchangeBulge + 8 * (std::min(m.from, m.to) % 3));
    a.d = "M" + num(x) + "," + num(y1) + " C" + num(x + bulge) + "," + num(y1) + " " +
          num(x + bulge) + "," + num(y2) + " " + num(x) + "," + num(y2);
    // Like a straight arrow's: at the start, on the side away from the curve.
    a.labelX = x + side * 3;
    a.labelY = down ? y1 - 5 : y1 + 13;
    a.labelAnchor = down ? "end" : "start";
    return a;
  }
  const int x1 = g.centreX(m.sentRound) + kBoxW / 2, x2 = g.centreX(toRound) - kBoxW / 2;
  a.d = "M" + num(x1) + "," + num(y1) + " L" + num(x2) + "," + num(y2);
  // The label sits at the arrow's start, on the side the arrow leaves
  // from: an action sends at most one message, so labels never collide
  // (midpoints would, where a ring's arrows cross).
  a.labelX = x1 + 3;
  a.labelY = y2 > y1 ? y1 - 5 : y1 + 13;
  a.labelAnchor = "start";
  return a;
}

// Arrows go under the action boxes (drawn after them), labels over both.
void emitArrows(std::string& out, const Simulation& s, const Grid& g) {
  out += "<g class=\"messages\" stroke=\"#222222\" stroke-width=\"1.4\" fill=\"none\">\n";
  for (size_t i = 0; i < s.messages.size(); ++i) {
    const Message& m = s.messages[i];
    const Arrow a = arrowFor(m, g);
    out += "<path class=\"msg\" data-msg=\"" + std::to_string(i) + "\" data-from=\"" +
           num(m.from) + "\" data-to=\"" + num(m.to) + "\" d=\"" + a.d + "\"" +
           (a.lost ? " stroke-dasharray=\"4 3\"" : "") +
           " marker-end=\"url(#coil-sim-arrow)\"><title>rank " + num(m.from) + " -&gt; rank " +
           num(m.to) + " " + span(m.offset, m.count) + std::string(a.lost ? ", never received" : "") +
           "</title></path>\n";
  }
  out += "</g>\n";
}

// With a white halo, so no line crosses a label unreadably.
void emitArrowLabels(std::string& out, const Simulation& s, const Grid& g) {
  out += "<g class=\"spans\" font-size=\"10\" font-family=\"monospace\" stroke=\"#ffffff\" "
         "stroke-width=\"3\" paint-order=\"stroke\" fill=\"#111111\">\n";
  for (size_t i = 0; i < s.messages.size(); ++i) {
    const Arrow a = arrowFor(s.messages[i], g);
    out += "<text data-msg=\"" + std::to_string(i) + "\" x=\"" + num(a.labelX) + "\" y=\"" +
           num(a.labelY) + "\" text-anchor=\"" + a.labelAnchor + "\">" +
           span(s.messages[i].offset, s.messages[i].count) + "</text>\n";
  }
  out += "</g>\n";
}

// Whether some rank's whole output is unspecified (its cells are grey).
bool someOutputUnspecified(const Simulation& s) {
  for (int r = 0; r < s.request.nranks; ++r) {
    bool wantsSomething = false;
    for (size_t o = 0; o < s.outputElems && !wantsSomething; ++o)
      wantsSomething = wantedContributors(s, r, o) != 0;
    if (!wantsSomething) return true;
  }
  return false;
}

// Returns the legend's height. Lists the primitives the run uses, the
// colour scale, and (when a rank's output is unspecified) its grey.
int emitLegend(std::string& out, const Simulation& s, int y, int width) {
  std::vector<K> used;
  for (K k : kAllKinds)
    if (std::any_of(s.actions.begin(), s.actions.end(),
                    [k](const Action& a) { return a.step.kind == k; }))
      used.push_back(k);
  const int perRow = std::max(1, (width - 2 * kMargin) / kLegendItemW);
  const int y0 = y;
  out += "<g class=\"legend\" font-size=\"11\">\n";
  out += "<text x=\"" + num(kMargin) + "\" y=\"" + num(y + 12) +
         "\" font-weight=\"bold\">primitives (boxes); arrows: messages, labelled "
         "[offset,+count)</text>\n";
  y += 18;
  for (size_t i = 0; i < used.size(); ++i) {
    const int x = kMargin + static_cast<int>(i % perRow) * kLegendItemW;
    const int ry = y + static_cast<int>(i / perRow) * kLegendRowH;
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(ry) + "\" width=\"" + num(kBoxW - 6) +
           "\" height=\"18\" rx=\"3\" fill=\"#ffffff\" stroke=\"#333333\"/><text x=\"" +
           num(x + (kBoxW - 6) / 2) + "\" y=\"" + num(ry + 13) +
           "\" text-anchor=\"middle\" font-family=\"monospace\">" + abbreviation(used[i]) +
           "</text><text x=\"" + num(x + kBoxW) + "\" y=\"" + num(ry + 13) + "\">" +
           algo::primitiveName(used[i]) + "</text>\n";
  }
  y += static_cast<int>((used.size() + perRow - 1) / perRow) * kLegendRowH + 6;
  out += "<text x=\"" + num(kMargin) + "\" y=\"" + num(y + 12) +
         "\" font-weight=\"bold\">cell colour: share of the collective's result the rank's "
         "output holds after the step</text>\n";
  y += 18;
  int x = kMargin;
  for (int pct = 0; pct <= 100; pct += 25, x += 64)
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"22\" height=\"16\" fill=\"" +
           resultColour(pct) + "\" stroke=\"#999999\"/><text x=\"" + num(x + 26) + "\" y=\"" +
           num(y + 12) + "\">" + num(pct) + "%</text>\n";
  if (someOutputUnspecified(s))
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"22\" height=\"16\" fill=\"" +
           resultColour(-1) + "\" stroke=\"#999999\"/><text x=\"" + num(x + 26) + "\" y=\"" +
           num(y + 12) + "\">no result expected (output unspecified)</text>\n";
  y += kLegendRowH;
  out += "</g>\n";
  return y - y0;
}

}  // namespace

std::string renderSvg(const Simulation& s) {
  Grid g{};
  g.columns = s.rounds;
  g.rows = s.request.nranks;
  // Wide enough for the legend's colour scale and a few primitives.
  g.width = std::max(kMargin * 2 + kLabelW + g.columns * kCellW, 2 * kMargin + 3 * kLegendItemW);
  const int legendTop = g.top() + g.rows * kCellH + 14;

  std::string body;
  emitHeader(body, s, g);
  emitCells(body, s, g);
  emitArrows(body, s, g);
  emitActions(body, s, g);
  emitArrowLabels(body, s, g);
  const int legendH = emitLegend(body, s, legendTop, g.width);
  g.height = legendTop + legendH + kMargin;

  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"coil-sim\" width=\"" +
                    num(g.width) + "\" height=\"" + num(g.height) + "\" viewBox=\"0 0 " +
                    num(g.width) + " " + num(g.height) +
                    "\" font-family=\"sans-serif\">\n<title>" + xmlEscape(titleLine(s)) +
                    "</title>\n<defs><marker id=\"coil-sim-arrow\" viewBox=\"0 0 10 10\" "
                    "refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
                    "orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#222222\"/></marker>"
                    "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += body;
  out += "</svg>\n";
  return out;
}

}  // namespace coil::sim
