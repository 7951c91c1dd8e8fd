#!/usr/bin/env bash
# coil-sim's pictures, checked in a real browser: the --html page is stepped
# in headless Chromium (its "#press=next,next" fragment clicks the buttons)
# and the DOM it shows must hold what coil-sim's text mode prints for the
# same state (a ring all-reduce, then the one-shot across hosts); the --svg
# diagram must be well-formed XML with one arrow per message; a screenshot
# of the stepped page must be a real PNG.
#
# Usage: coil_sim_html_test.sh path/to/coil-sim
# Environment: CHROMIUM names the browser (default: chromium or
# chromium-browser on PATH). Without one the test is skipped (exit 77),
# except with CI=true, where a missing browser fails it (exit 1).
# Exit: 0 pass, 1 fail, 2 bad usage, 77 skipped.
set -uo pipefail
sim=${1:-}
if [ -z "$sim" ] || [ ! -x "$sim" ]; then
  echo "usage: coil_sim_html_test.sh path/to/coil-sim (got '${sim}')" >&2
  exit 2
fi

find_chromium() {
  if [ -n "${CHROMIUM:-}" ]; then command -v "$CHROMIUM"; return; fi
  command -v chromium || command -v chromium-browser
}
chromium=$(find_chromium)
if [ -z "$chromium" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: chromium is missing (CI=true: install the Debian package 'chromium'," \
      "tools/lib/install-deps.sh)"
    exit 1
  fi
  echo "SKIP: chromium is not installed (Debian package 'chromium'); the HTML page needs a browser"
  exit 77
fi
command -v python3 >/dev/null || { echo "FAIL: python3 is needed to read the pages"; exit 1; }

tmp=$(mktemp -d /tmp/coil-sim-html-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
failed() { echo "FAIL: $*"; fail=1; }

# A profile of its own: parallel tests must not share Chromium's profile lock.
browse() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --no-default-browser-check --user-data-dir="$tmp/profile" "$@" \
    2>>"$tmp/chromium.log"
}
dump() {  # fragment (after #) -> the DOM after the page ran and was stepped
  browse --virtual-time-budget=5000 --dump-dom "file://$tmp/p.html#$1"
}

"$sim" allreduce --algo ring -n 3 --count 6 --values --html "$tmp/p.html" --svg "$tmp/p.svg" \
  >"$tmp/text.txt" || { cat "$tmp/text.txt"; failed "coil-sim exited $?"; exit 1; }

# ---- The text mode's states, the reference the page must agree with. ----
# Read by order, not by label: the N-th "after step" block is the state
# after N+1 rounds, the page's "step N+1".
cat >"$tmp/read.py" <<'EOF'
import html.parser, json, re, sys

def text_states(path):
    """[(rank texts per rank)] per round, the step table's rows, the totals."""
    states, actions, totals = [], [], None
    for line in open(path, encoding="utf-8"):
        if line.startswith("after step"):
            states.append([])
        elif states and re.match(r"\s+rank \d+:", line):
            states[-1].append(line.split(":", 1)[1].split())
        elif re.match(r"step \d+\s+\|", line):
            actions.append([c.strip() for c in line.rstrip("\n").split("|")[1:]])
        m = re.search(r"\((\d+) steps, (\d+) messages\)", line)
        if m:
            totals = (int(m.group(1)), int(m.group(2)))
    return states, actions, totals

class Dom(html.parser.HTMLParser):
    """What the stepped page shows: #step, #cost, #play, the buffer table's
    cells and action column, the #messages list items."""
    def __init__(self):
        super().__init__()
        self.ids, self.rows, self.actions, self.messages = {}, {}, {}, []
        self.where = None  # (kind, key) of the element whose text is collected
        self.rank = None
        self.in_messages = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") in ("step", "cost", "play", "total"):
            self.where = ("id", a["id"]); self.ids[a["id"]] = ""
        elif a.get("id") == "messages":
            self.in_messages = True
        elif tag == "li" and self.in_messages and "data-msg" in a:
            self.where = ("msg", len(self.messages)); self.messages.append("")
        elif tag == "tr" and "data-rank" in a:
            self.rank = int(a["data-rank"]); self.rows[self.rank] = []
        elif tag == "td" and self.rank is not None and "data-elem" in a:
            self.where = ("elem", self.rank); self.rows[self.rank].append("")
        elif tag == "td" and self.rank is not None and a.get("data-col") == "action":
            self.where = ("action", self.rank); self.actions[self.rank] = ""
    def handle_endtag(self, tag):
        if tag in ("span", "button", "p", "td"):
            if not (self.where and self.where[0] == "msg"):
                self.where = None
        if tag == "li":
            self.where = None
        if tag == "ul":
            self.in_messages = False
        if tag == "tr":
            self.rank = None
    def handle_data(self, data):
        if not self.where:
            return
        kind, key = self.where
        if kind == "id": self.ids[key] += data
        elif kind == "msg": self.messages[key] += data
        elif kind == "elem": self.rows[key][-1] += data
        elif kind == "action": self.actions[key] += data

def page(path):
    d = Dom()
    d.feed(open(path, encoding="utf-8").read())
    return {"step": d.ids.get("step", ""), "cost": d.ids.get("cost", ""),
            "play": d.ids.get("play", ""), "total": d.ids.get("total", ""),
            "rows": [d.rows[r] for r in sorted(d.rows)],
            "actions": [d.actions.get(r, "") for r in sorted(d.rows)],
            "messages": d.messages}

if __name__ == "__main__":
    if sys.argv[1] == "text":
        print(json.dumps(dict(zip(("states", "actions", "totals"), text_states(sys.argv[2])))))
    else:
        print(json.dumps(page(sys.argv[2])))
EOF
python3 "$tmp/read.py" text "$tmp/text.txt" >"$tmp/text.json" ||
  { failed "cannot read coil-sim's text output"; cat "$tmp/text.txt"; exit 1; }

# ---- The page, stepped. ----
check_step() {  # name, fragment, python assertions on `p` (the page) and `t` (the text)
  local name=$1 fragment=$2 assertions=$3
  dump "$fragment" >"$tmp/dom.html" || { failed "$name: chromium exited $?"; return; }
  python3 "$tmp/read.py" page "$tmp/dom.html" >"$tmp/dom.json" ||
    { failed "$name: cannot read the dumped DOM"; return; }
  if python3 - "$tmp/text.json" "$tmp/dom.json" <<EOF
import json, sys
t = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
R, M = t["totals"]
assert len(t["states"]) == R, ("text mode: %d states for %d steps" % (len(t["states"]), R))
def state(T):  # what the text mode says every rank holds after T rounds
    return t["states"][T - 1]
try:
$(sed 's/^/    /' <<<"$assertions")
except AssertionError as e:
    print("   ", e, "\n    page:", json.dumps(p)); sys.exit(1)
EOF
  then echo "PASS: $name"; else failed "$name"; fi
}

check_step "three clicks on next show step 3 as the text mode has it" "press=next,next,next" '
assert p["step"] == "step 3 of %d" % R, "step shows %r" % p["step"]
assert p["rows"] == state(3), "buffers %r, text mode %r" % (p["rows"], state(3))
assert any(e == "012" for row in p["rows"] for e in row), "no element complete after 3 rounds"
assert not all(e == "012" for row in p["rows"] for e in row), "all complete after 3 of 5 rounds"
assert p["actions"] == t["actions"][2], "actions %r, text %r" % (p["actions"], t["actions"][2])
assert p["cost"].startswith("step 3:"), "cost line %r" % p["cost"]
assert "total" in p["total"] and R and M
# The ring: round 3 delivers the 3 messages of round 2 and sends 3 more.
assert len(p["messages"]) == 6, "messages %r" % p["messages"]
for q in range(3):
    assert any(m.startswith("rank %d -> rank %d [" % (q, (q + 1) % 3)) for m in p["messages"]), q
'
check_step "prev steps back" "press=next,next,next,prev" '
assert p["step"] == "step 2 of %d" % R, p["step"]
assert p["rows"] == state(2), (p["rows"], state(2))
'
check_step "the last step: every element holds every rank's input" \
  "press=next,next,next,next,next,next,next" '
assert p["step"] == "step %d of %d" % (R, R), p["step"]
assert p["rows"] == state(R)
assert all(e == "012" for row in p["rows"] for e in row), p["rows"]
assert len(p["rows"]) == 3 and all(len(row) == 6 for row in p["rows"])
'
check_step "step 0: before the first round" "press=prev" '
assert p["step"] == "step 0 of %d" % R, p["step"]
assert all(e == "..." for row in p["rows"] for e in row), p["rows"]
'
check_step "play runs to the end and stops" "press=play" '
assert p["step"] == "step %d of %d" % (R, R), p["step"]
assert p["play"] == "play", "the button says %r after the last step" % p["play"]
'

# ---- Self-contained: nothing loaded from anywhere. ----
if grep -Eqi '<(link|img|iframe)\b|\b(src|href)=|@import|url\((http|//)' "$tmp/p.html" ||
   grep -o 'https\?://[^"]*' "$tmp/p.html" | grep -qv '^http://www.w3.org/2000/svg$'; then
  failed "the page refers to an external resource"
else
  echo "PASS: the page is self-contained"
fi

# ---- The SVG: well-formed, one arrow per message, each along the ring. ----
if python3 - "$tmp/p.svg" "$tmp/text.json" <<'EOF'
import json, sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
R, M = json.load(open(sys.argv[2]))["totals"]
arrows = [e for tag in ("path", "line") for e in doc.getElementsByTagName(tag)
          if e.getAttribute("class") == "msg"]
assert len(arrows) == M == 12, "%d arrows, %d messages (a 3-rank ring all-reduce sends 12)" % (
    len(arrows), M)
for a in arrows:
    assert a.getAttribute("marker-end"), "an arrow without an arrowhead"
    f, t = int(a.getAttribute("data-from")), int(a.getAttribute("data-to"))
    assert t == (f + 1) % 3, "a ring message from %d to %d" % (f, t)
cells = [e for e in doc.getElementsByTagName("rect") if e.getAttribute("class") == "cell"]
assert len(cells) == 3 * R, "%d cells for 3 ranks x %d steps" % (len(cells), R)
EOF
then echo "PASS: the SVG is well-formed XML with one arrow per message"
else failed "the SVG diagram"; fi

# ---- A screenshot of the stepped page. ----
browse --hide-scrollbars --screenshot="$tmp/shot.png" --window-size=1200,800 \
  "file://$tmp/p.html#press=next,next" >/dev/null
if python3 - "$tmp/shot.png" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1200, 800), "a %dx%d PNG" % (w, h)
# A blank page compresses to a few KB; the stepped page has text and colour.
assert len(data) > 20000, "a %d-byte PNG: the page looks empty" % len(data)
EOF
then echo "PASS: the screenshot is a 1200x800 PNG"
else failed "the screenshot"; fi

# ---- The one-shot across hosts (over FIFOs): its one wait takes every ----
# block in one step, and the page shows them all arriving there.
"$sim" allreduce --algo oneshot --hosts 1,1,1 --count 2 --values --html "$tmp/p.html" \
  >"$tmp/text.txt" || { cat "$tmp/text.txt"; failed "coil-sim oneshot --hosts exited $?"; exit 1; }
python3 "$tmp/read.py" text "$tmp/text.txt" >"$tmp/text.json" ||
  { failed "cannot read coil-sim's text output for oneshot --hosts"; exit 1; }
check_step "oneshot across hosts: the waitAll step receives all 6 inputs" \
  "press=next,next,next,next,next" '
assert (R, M) == (6, 6), (R, M)
assert p["step"] == "step 5 of 6", p["step"]
assert p["actions"] == t["actions"][4] == ["waitAll"] * 3, p["actions"]
assert p["rows"] == state(5) and all(e == "..." for row in p["rows"] for e in row), p["rows"]
assert len(p["messages"]) == 6, "messages %r" % p["messages"]
'
check_step "oneshot across hosts: reduceBlocks completes every element" \
  "press=next,next,next,next,next,next" '
assert p["rows"] == state(6) and all(e == "012" for row in p["rows"] for e in row), p["rows"]
'

if [ "$fail" -ne 0 ]; then
  echo "chromium: $chromium; its log:"
  tail -20 "$tmp/chromium.log"
fi
exit $fail
