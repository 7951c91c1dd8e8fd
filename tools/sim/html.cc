// renderHtml: one self-contained page that steps through a Simulation
// (render.h).
//
// Everything the page shows is computed here and embedded as JSON; the
// inline script only picks the step's entries and puts them in the DOM, so
// the page and coil-sim's text mode cannot disagree about a value. No
// external resources: the page works from a file:// URL with no network.
//
// Step T (0..rounds) is the state after T rounds: T = 0 is before the
// first round, and the messages and costs shown at step T are round T-1's.
//
// For tests and screenshots, a URL fragment "#press=next,next,prev" clicks
// those buttons in order once the page is set up (tests/tools/coil_sim_html_test.sh).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "render.h"
#include "result_colours.h"

namespace coil::sim {


namespace {

/// A JSON string literal. '<', '>' and '&' are escaped too, so no text can
/// close the <script> element the JSON sits in.
std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

/// Microseconds as the page prints them (%.4g: deterministic, C locale).
std::string us(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// The items with `separator` between them.
std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out;
}

/// A JSON array of already-encoded items. Appended piecewise: GCC 12 warns
/// (-Wrestrict, a false positive) on "[" + std::string&& at -O3.
std::string jsonArray(const std::vector<std::string>& items) {
  std::string out = "[";
  out += join(items, ",");
  out += "]";
  return out;
}

std::string valuesText(const Message& m, int nranks) {
  std::vector<std::string> texts;
  for (Contributors c : m.values) texts.push_back(contributorsText(c, nranks));
  return join(texts, " ");
}

/// "rank 0 -> rank 1 [4,+2): 0.. 0.." and what happens to it in round
/// `round`: sent (in flight), exchanged (sent and received in one round),
/// delivered (sent earlier), or never received.
std::string messageJson(const Simulation& s, size_t index, int round) {
  const Message& m = s.messages[index];
  std::string state, note;
  if (m.sentRound == round && m.receivedRound == round) {
    state = "exchanged";
    note = "sent and received in this step";
  } else if (m.sentRound == round) {
    state = m.receivedRound < 0 ? "lost" : "sent";
    note = m.receivedRound < 0 ? "never received"
                               : "in flight, received in step " +
                                     std::to_string(m.receivedRound + 1);
  } else {
    state = "delivered";
    note = "sent in step " + std::to_string(m.sentRound + 1) + ", received now";
  }
  const std::string text = "rank " + std::to_string(m.from) + " -> rank " + std::to_string(m.to) +
                           " " + span(m.offset, m.count) + ": " + valuesText(m, s.request.nranks);
  return "{\"msg\":" + std::to_string(index) + ",\"state\":" + jsonString(state) +
         ",\"text\":" + jsonString(text) + ",\"note\":" + jsonString(note) + "}";
}

/// What each rank did in round `round`: its primitive, "waits" (it has
/// more to do but could not run), or "done".
std::vector<std::string> roundActions(const Simulation& s, int round) {
  const int n = s.request.nranks;
  std::vector<std::string> out(n);
  std::vector<int> last(n, -1);
  for (const Action& a : s.actions) last[a.rank] = std::max(last[a.rank], a.round);
  for (int r = 0; r < n; ++r) out[r] = round > last[r] ? "done" : "waits";
  for (const Action& a : s.actions)
    if (a.round == round) out[a.rank] = algo::describe(a.step, a.rank);
  return out;
}

std::string stringArray(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) quoted.push_back(jsonString(item));
  return jsonArray(quoted);
}

/// The cost line of step `t`: round t-1's α, β and γ terms and the sum of
/// rounds 0..t-1.
std::string costText(const std::vector<RoundCost>& costs, int t) {
  if (t == 0) return "before the first step: 0 \u00b5s";
  double running = 0;
  for (int k = 0; k < t && k < static_cast<int>(costs.size()); ++k) running += costs[k].total();
  if (t > static_cast<int>(costs.size())) return "step " + std::to_string(t) + ": no cost";
  const RoundCost& c = costs[t - 1];
  return "step " + std::to_string(t) + ": \u03b1 " + us(c.alphaUs) + " + \u03b2 " + us(c.betaUs) +
         " + \u03b3 " + us(c.gammaUs) + " = " + us(c.total()) + " \u00b5s; total so far " +
         us(running) + " \u00b5s";
}

/// One step's entry of the page's data: buffers, their shares of the
/// result, the ranks' actions, the messages and the cost.
std::string stepJson(const Simulation& s, const std::vector<std::vector<Contributors>>& want,
                     const std::vector<RoundCost>& costs, int t) {
  const int n = s.request.nranks;
  std::vector<std::string> buffers, shares;
  for (int r = 0; r < n; ++r) {
    const std::vector<Contributors>& out = s.outputs[t][r];
    std::vector<std::string> texts, pcts;
    for (size_t i = 0; i < out.size(); ++i) {
      texts.push_back(contributorsText(out[i], n));
      pcts.push_back(std::to_string(resultPercent({out[i]}, {want[r][i]})));
    }
    buffers.push_back(stringArray(texts));
    shares.push_back(jsonArray(pcts));
  }
  std::vector<std::string> messages;
  for (size_t m = 0; t > 0 && m < s.messages.size(); ++m)
    if (s.messages[m].sentRound == t - 1 || s.messages[m].receivedRound == t - 1)
      messages.push_back(messageJson(s, m, t - 1));
  const std::vector<std::string> actions =
      t > 0 ? roundActions(s, t - 1) : std::vector<std::string>(n, "");
  return "{\"buffers\":" + jsonArray(buffers) + ",\"shares\":" + jsonArray(shares) +
         ",\"actions\":" + stringArray(actions) + ",\"messages\":" + jsonArray(messages) +
         ",\"cost\":" + jsonString(costText(costs, t)) + "}";
}

std::string dataJson(const Simulation& s, const std::vector<RoundCost>& costs) {
  const int n = s.request.nranks;
  std::vector<std::vector<Contributors>> want(n, std::vector<Contributors>(s.outputElems));
  for (int r = 0; r < n; ++r)
    for (size_t o = 0; o < s.outputElems; ++o) want[r][o] = wantedContributors(s, r, o);
  std::vector<std::string> palette;
  for (int pct = 0; pct <= 100; ++pct) palette.push_back(resultColour(pct));
  std::string out = "{\"nranks\":" + std::to_string(n) +
                    ",\"rounds\":" + std::to_string(s.rounds) +
                    ",\"outputElems\":" + std::to_string(s.outputElems) +
                    ",\"palette\":" + stringArray(palette) +
                    ",\"unspecified\":" + jsonString(resultColour(-1));
  std::vector<std::string> steps;
  for (int t = 0; t <= s.rounds; ++t) steps.push_back(stepJson(s, want, costs, t));
  return out + ",\"steps\":[\n" + join(steps, ",\n") + "]}";
}

std::string titleText(const Simulation& s) {
  const Request& r = s.request;
  return std::string(algo::collName(r.collective)) + ", " + r.algorithm->name + " (" +
         s.function() + "): " + std::to_string(r.nranks) + " ranks, count " +
         std::to_string(r.count) + ", chunk " + std::to_string(r.chunkElems);
}

std::string totalText(const Simulation& s, const std::vector<RoundCost>& costs,
                      const CostParams& p) {
  RoundCost sum;
  for (const RoundCost& c : costs) {
    sum.alphaUs += c.alphaUs;
    sum.betaUs += c.betaUs;
    sum.gammaUs += c.gammaUs;
  }
  char params[160];
  std::snprintf(params, sizeof params,
                "\u03b1 %.4g \u00b5s, \u03b2 %.4g \u00b5s/B, \u03b3 %.4g \u00b5s/B, %zu-byte elements",
                p.alphaUs, p.betaUsPerB, p.gammaUsPerB, s.request.elementBytes);
  return "total over " + std::to_string(s.rounds) + " steps: " + us(sum.total()) +
         " \u00b5s = \u03b1 " + us(sum.alphaUs) + " + \u03b2 " + us(sum.betaUs) + " + \u03b3 " +
         us(sum.gammaUs) + " (" + params + "; " + (p.source.empty() ? "defaults" : p.source) +
         "; a step costs its slowest rank)";
}

/// What the page says when the run did not end as the collective defines.
std::string verdictHtml(const Simulation& s) {
  if (s.deadlocked) return "<p class=\"verdict bad\">DEADLOCK: no rank can run its next step.</p>\n";
  if (s.wrong.empty())
    return "<p class=\"verdict\">Every rank's output is what " +
           std::string(algo::collName(s.request.collective)) + " defines (" +
           std::to_string(s.rounds) + " steps, " + std::to_string(s.messages.size()) +
           " messages).</p>\n";
  std::string out = "<div class=\"verdict bad\">WRONG RESULT:<ul>";
  for (const std::string& w : s.wrong) out += "<li>" + xmlEscape(w) + "</li>";
  return out + "</ul></div>\n";
}

std::string headerRow(const Simulation& s) {
  std::string row = "<tr><th>rank</th><th data-col=\"action\">primitive in this step</th>";
  for (size_t i = 0; i < s.outputElems; ++i) row += "<th>" + std::to_string(i) + "</th>";
  return row + "</tr>";
}

constexpr const char* kStyle = R"css(
body { font-family: sans-serif; margin: 16px; color: #111; }
h1 { font-size: 18px; margin: 0 0 4px; }
.summary { color: #444; margin: 0 0 12px; }
.controls button { font-size: 14px; min-width: 64px; margin-right: 4px; }
#step { font-weight: bold; margin-left: 8px; }
#buffers { border-collapse: collapse; margin: 12px 0; }
#buffers th, #buffers td { border: 1px solid #bbb; padding: 3px 6px; }
#buffers td[data-elem] { font-family: monospace; text-align: center; }
#buffers td.dark { color: #fff; }
#buffers td[data-col="action"] { font-family: monospace; white-space: nowrap; }
#messages { font-family: monospace; }
#messages .note { color: #666; font-family: sans-serif; }
.verdict.bad { color: #b00; font-weight: bold; }
#cost, #total { font-family: monospace; }
#diagram { margin-top: 16px; overflow-x: auto; }
#diagram rect.col.current { stroke: #e6550d; stroke-width: 3; }
)css";

// The stepper. Step state lives in `step`; render() redraws from the data.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('coil-sim-data').textContent);
  const $ = (id) => document.getElementById(id);
  const R = data.rounds;
  let step = 0;
  let timer = null;

  function buildRows() {
    const body = $('buffers').tBodies[0];
    for (let r = 0; r < data.nranks; ++r) {
      const tr = document.createElement('tr');
      tr.dataset.rank = String(r);
      const th = document.createElement('th');
      th.textContent = 'rank ' + r;
      tr.appendChild(th);
      const action = document.createElement('td');
      action.dataset.col = 'action';
      tr.appendChild(action);
      for (let i = 0; i < data.outputElems; ++i) {
        const td = document.createElement('td');
        td.dataset.elem = String(i);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
  }

  function renderBuffers(s) {
    for (const tr of $('buffers').tBodies[0].rows) {
      const r = Number(tr.dataset.rank);
      tr.querySelector('td[data-col="action"]').textContent = s.actions[r];
      for (const td of tr.querySelectorAll('td[data-elem]')) {
        const i = Number(td.dataset.elem);
        const pct = s.shares[r][i];
        td.textContent = s.buffers[r][i];
        td.style.backgroundColor = pct < 0 ? data.unspecified : data.palette[pct];
        td.classList.toggle('dark', pct >= 60);
        td.title = pct < 0 ? 'no result expected' : pct + '% of its result';
      }
    }
  }

  function renderMessages(s) {
    const list = $('messages');
    list.replaceChildren();
    for (const m of s.messages) {
      const li = document.createElement('li');
      li.dataset.msg = String(m.msg);
      li.dataset.state = m.state;
      li.textContent = m.text + ' ';
      const note = document.createElement('span');
      note.className = 'note';
      note.textContent = '(' + m.note + ')';
      li.appendChild(note);
      list.appendChild(li);
    }
    if (s.messages.length === 0) {
      const li = document.createElement('li');
      li.className = 'none';
      li.textContent = step === 0 ? 'none yet: before the first step' : 'none';
      list.appendChild(li);
    }
  }

  function highlightColumn() {
    for (const col of document.querySelectorAll('#diagram rect.col'))
      col.classList.toggle('current', Number(col.dataset.round) === step - 1);
  }

  function render() {
    const s = data.steps[step];
    $('step').textContent = 'step ' + step + ' of ' + R;
    $('cost').textContent = s.cost;
    renderBuffers(s);
    renderMessages(s);
    highlightColumn();
  }

  function go(t) {
    step = Math.max(0, Math.min(R, t));
    render();
  }

  function stopPlaying() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    $('play').textContent = 'play';
  }

  function togglePlay() {
    if (timer !== null) return stopPlaying();
    if (step >= R) go(0);  // play again from the start
    $('play').textContent = 'pause';
    timer = setInterval(() => {
      go(step + 1);
      if (step >= R) stopPlaying();
    }, 700);
  }

  $('prev').addEventListener('click', () => go(step - 1));
  $('next').addEventListener('click', () => go(step + 1));
  $('play').addEventListener('click', togglePlay);
  document.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === 'ArrowRight') $('next').click();
    else if (e.key === 'ArrowLeft') $('prev').click();
  });

  buildRows();
  render();

  // "#press=next,next,prev": real clicks, so a headless browser can step
  // the page before it dumps the DOM or takes a screenshot.
  const pressed = /^#press=([a-z,]*)$/.exec(location.hash);
  if (pressed)
    for (const id of pressed[1].split(','))
      if (id === 'prev' || id === 'next' || id === 'play') $(id).click();
})();
)js";

}  // namespace

std::string renderHtml(const Simulation& s, const std::vector<RoundCost>& costs,
                       const CostParams& params) {
  const std::string title = titleText(s);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<title>coil-sim: " + xmlEscape(title) + "</title>\n<style>" + kStyle + "</style>\n";
  out += "</head>\n<body>\n<h1>" + xmlEscape(title) + "</h1>\n";
  out += "<p class=\"summary\">" + xmlEscape(s.summary()) + "</p>\n";
  out += verdictHtml(s);
  out += "<div class=\"controls\"><button id=\"prev\" type=\"button\">prev</button>"
         "<button id=\"next\" type=\"button\">next</button>"
         "<button id=\"play\" type=\"button\">play</button>"
         "<span id=\"step\">step 0 of " + std::to_string(s.rounds) + "</span>"
         " <small>(keys: \u2190 \u2192)</small></div>\n";
  out += "<p id=\"cost\"></p>\n";
  out += "<p>Output buffers after the step: each cell lists the ranks whose input the element "
         "holds ('.' for a rank not in it yet); its colour, the share of the collective's "
         "result it holds.</p>\n";
  out += "<table id=\"buffers\"><thead>" + headerRow(s) + "</thead><tbody></tbody></table>\n";
  out += "<p>Messages sent or received in this step:</p>\n<ul id=\"messages\"></ul>\n";
  out += "<p id=\"total\">" + xmlEscape(totalText(s, costs, params)) + "</p>\n";
  out += "<noscript><p>The stepper needs JavaScript; the diagram below shows every step.</p>"
         "</noscript>\n";
  out += "<div id=\"diagram\">\n" + renderSvg(s) + "</div>\n";
  out += "<script id=\"coil-sim-data\" type=\"application/json\">" + dataJson(s, costs) +
         "</script>\n";
  out += std::string("<script>") + kScript + "</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace coil::sim
