#!/usr/bin/env python3
"""README's table of environment variables is the code's table.

src/core/variables.cc registers every COIL_* variable (env::get refuses the
others; the first init warns about unknown names). This checks that

  1. README's "Environment variables" table lists exactly the registered
     variables of scope kLibrary and kTorch (kDevelopment ones are the
     repository's own tests and scripts, documented where they are read);
  2. every COIL_ name that C++, Python or meson code in the repository
     quotes as a string (getenv("COIL_X"), os.environ.get("COIL_X"),
     env : {'COIL_X' : ...}) is registered, so a reader that bypasses
     env::get (the torch adapter, python/, tools/, benchmarks/, tests/)
     cannot add an unregistered variable either.

usage: variables_table_test.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# A table entry: helper(kScope, "COIL_NAME", ...), as src/core/variables.cc writes them.
ENTRY = re.compile(r'\b(?:integer|byteSize|boolean|oneOf|listOf|text|path)\('
                   r'\s*(k\w+),\s*"(COIL_[A-Z0-9_]+)"')
README_ROW = re.compile(r"^\|\s*`COIL_")
QUOTED = re.compile(r"[\"'](COIL_[A-Z0-9_]+)[\"']")
SCANNED = ["src", "transports", "python", "tools", "benchmarks", "tests"]
# Quoted C macro names (tests that check the header's spelling), not variables.
NOT_VARIABLES = {"COIL_CONFIG_INITIALIZER", "COIL_SIM_INFO_INITIALIZER"}
# Files that quote unregistered names on purpose.
DELIBERATE = {"tests/env/variables_test.cc", "tests/tools/variables_table_test.py"}


def code_table(root):
    text = (root / "src/core/variables.cc").read_text()
    entries = ENTRY.findall(text)
    if len(entries) < 10:
        sys.exit("src/core/variables.cc: found only %d table entries; did the helpers' "
                 "names change? (update ENTRY here)" % len(entries))
    return {name: scope for scope, name in entries}


def readme_table(root):
    lines = (root / "README.md").read_text().splitlines()
    try:
        start = lines.index("## Environment variables")
    except ValueError:
        sys.exit("README.md: no '## Environment variables' section")
    names = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if README_ROW.match(line):
            first_cell = line.split("|")[1]
            names += re.findall(r"`(COIL_[A-Z0-9_]+)`", first_cell)
    return names


def quoted_names(root):
    """{name: first file quoting it} over the code of the repository."""
    found = {}
    for top in SCANNED:
        for f in sorted((root / top).rglob("*")):
            rel = f.relative_to(root).as_posix()
            if not f.is_file() or rel in DELIBERATE:
                continue
            if not (f.suffix in (".cc", ".h", ".cu", ".py") or f.name == "meson.build"
                    or rel == "tools/compare"):
                continue
            for name in QUOTED.findall(f.read_text(errors="replace")):
                found.setdefault(name, rel)
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    table = code_table(root)
    documented = {n for n, scope in table.items() if scope in ("kLibrary", "kTorch")}
    readme = readme_table(root)
    problems = []
    for name in sorted({n for n in readme if readme.count(n) > 1}):
        problems.append(f"README.md lists {name} twice")
    for name in sorted(documented - set(readme)):
        problems.append(f"{name} is registered ({table[name]}) but has no row in README.md's table")
    for name in sorted(set(readme) - set(table)):
        problems.append(f"README.md lists {name}, which src/core/variables.cc does not register")
    for name in sorted(set(readme) & (set(table) - documented)):
        problems.append(f"README.md lists {name}, registered as {table[name]} (not for users)")
    for name, where in sorted(quoted_names(root).items()):
        if name not in table and name not in NOT_VARIABLES:
            problems.append(f"{where} reads {name}, which src/core/variables.cc does not register")
    if problems:
        sys.exit("\n".join(problems))
    print(f"{len(table)} variables registered, {len(documented)} in README.md's table: they agree")


if __name__ == "__main__":
    main()
