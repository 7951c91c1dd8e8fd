#!/usr/bin/env python3
"""coil-topo run as a user runs it: on this machine, on an hwloc XML file,
with a fake /sys tree, with --json (parsed), and with wrong arguments.

usage: coil_topo_test.py COIL_TOPO TWO_SOCKETS_XML [--no-hwloc]
With --no-hwloc (coil built without hwloc) --xml must fail saying so.
"""
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(condition, what, output=""):
    if not condition:
        failures.append(what)
        print("FAIL:", what)
        if output:
            print("---- output ----\n" + output + "----------------")


def run(*args, rc=0):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)
    check(p.returncode == rc, f"coil-topo {' '.join(args)}: exit {p.returncode}, expected {rc}",
          p.stdout + p.stderr)
    return p


def load_json(p, what):
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        check(False, f"{what}: not JSON ({e})", p.stdout)
        return {}


def this_machine():
    text = run().stdout
    for part in ("coil-topo: ", "Host: ", "Packages: ", "NUMA nodes: ", "Cores: ", "PUs: ", "L3: ",
                 "\nNUMA nodes:\n", "  node ", "GPUs and NICs", "RDMA devices"):
        check(part in text, f"this machine: text has {part!r}", text)
    doc = load_json(run("--json"), "this machine --json")
    for key in ("source", "host", "packages", "cores", "pus", "numa_nodes", "numa_distances",
                "l3_caches", "pci_known", "gpus", "nics", "matrix", "rdma", "absent", "missing"):
        check(key in doc, f"this machine --json: key {key}", json.dumps(doc, indent=1))
    if not doc:
        return
    check(doc["pus"] and doc["pus"] >= 1, "this machine: at least one PU")
    check(len(doc["numa_nodes"]) >= 1, "this machine: at least one NUMA node")
    n = len(doc["gpus"]) + len(doc["nics"])
    check(len(doc["matrix"]["devices"]) == n and len(doc["matrix"]["paths"]) == n,
          "this machine: matrix is GPUs + NICs square", json.dumps(doc["matrix"]))
    # What the text says when the machine has no GPU / no RDMA device, as this VM.
    if not doc["gpus"] and doc["pci_known"]:
        check("no GPU found (hwloc saw no NVIDIA PCI display device)" in text,
              "this machine: says there is no GPU", text)
    ib = "/sys/class/infiniband"
    if not (os.path.isdir(ib) and os.listdir(ib)):
        check("no RDMA device under /sys/class/infiniband" in text,
              "this machine: says there is no RDMA device", text)
        check(doc["rdma"]["devices"] == [], "this machine --json: no RDMA devices")


def fake_sysfs(root):
    """mlx5_0 on the XML's ConnectX-6 (0000:1b:00.0), RoCE on ens1f0np0 (MTU 9000),
    and rxe0 over ens2 (MTU 1500)."""
    def write(rel, text):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text + "\n")
    mlx = "class/infiniband/mlx5_0/"
    os.makedirs(os.path.join(root, mlx))
    os.symlink("../../../0000:1b:00.0", os.path.join(root, mlx, "device"))
    for dev, iface in ((mlx, "ens1f0np0"), ("class/infiniband/rxe0/", "ens2")):
        port = dev + "ports/1/"
        write(port + "state", "4: ACTIVE")
        write(port + "phys_state", "5: LinkUp")
        write(port + "link_layer", "Ethernet")
        write(port + "gids/0", "fe80:0000:0000:0000:ba3f:d2ff:fe00:0001")
        write(port + "gids/1", "0000:0000:0000:0000:0000:ffff:0a00:0001")
        write(port + "gids/2", "0000:0000:0000:0000:0000:0000:0000:0000")
        write(port + "gid_attrs/types/0", "IB/RoCE v1")
        write(port + "gid_attrs/types/1", "RoCE v2")
        write(port + "gid_attrs/ndevs/0", iface)
        write(port + "gid_attrs/ndevs/1", iface)
    write("class/infiniband/rxe0/parent", "ens2")
    write("class/net/ens1f0np0/mtu", "9000")
    write("class/net/ens2/mtu", "1500")


def xml_file():
    text = run("--xml", XML).stdout
    for part in ("Host: testbox\n",
                 "Packages: 2   NUMA nodes: 2   Cores: 4   PUs: 8   L3: 2 x 32 MiB\n",
                 "GPU0    X      PIX    SYS   0-3             0\n",
                 "NIC1    SYS    SYS    X     4-7             1\n",
                 "RDMA ports not read (the topology comes from " + XML):
        check(part in text, f"--xml: text has {part!r}", text)
    doc = load_json(run("--xml", XML, "--json"), "--xml --json")
    if doc:
        check(doc["packages"] == 2 and doc["pus"] == 8, "--xml --json: packages, PUs")
        check(doc["numa_distances"] == {"nodes": [0, 1], "values": [[10, 21], [21, 10]]},
              "--xml --json: distances", json.dumps(doc["numa_distances"]))
        want = [["X", "PIX", "SYS"], ["PIX", "X", "SYS"], ["SYS", "SYS", "X"]]
        check(doc["matrix"]["paths"] == want, "--xml --json: matrix", json.dumps(doc["matrix"]))
        check([g["bus_id"] for g in doc["gpus"]] == ["0000:1a:00.0"], "--xml --json: GPU bus id")
        check(doc["nics"][0]["ib_devices"] == ["mlx5_0"], "--xml --json: NIC0's verbs device")
        check(doc["rdma"]["read"] is False, "--xml --json: RDMA not read without --sysfs")

    with tempfile.TemporaryDirectory() as root:
        fake_sysfs(root)
        text = run("--xml", XML, "--sysfs", root).stdout
        for part in ("  mlx5_0: PCI 0000:1b:00.0, NIC0 (named by hwloc)\n",
                     "  rxe0: software device over ens2, NIC1 (over ens2)\n",
                     "active MTU 4096 (from ens1f0np0's MTU 9000)",
                     "active MTU 1024 (from ens2's MTU 1500)", "RoCE v2", "IB/RoCE v1"):
            check(part in text, f"--xml --sysfs: text has {part!r}", text)
        doc = load_json(run("--xml", XML, "--sysfs", root, "--json"), "--xml --sysfs --json")
        if doc:
            devs = {d["name"]: d for d in doc["rdma"]["devices"]}
            check(sorted(devs) == ["mlx5_0", "rxe0"], "--sysfs --json: devices", json.dumps(devs))
            if "rxe0" in devs:
                port = devs["rxe0"]["ports"][0]
                check(devs["rxe0"]["nic"] == "NIC1", "--sysfs --json: rxe0 on NIC1")
                check(port["state"] == "ACTIVE" and port["link_layer"] == "Ethernet"
                      and port["active_mtu"] == 1024, "--sysfs --json: rxe0 port", json.dumps(port))
                gids = [(g["index"], g["type"]) for g in port["gids"]]
                check(gids == [(0, "IB/RoCE v1"), (1, "RoCE v2")], "--sysfs --json: rxe0 GIDs",
                      json.dumps(port["gids"]))


def arguments():
    p = run("--help")
    check(p.stdout.startswith("usage: coil-topo"), "--help prints the usage", p.stdout)
    p = run("--bogus", rc=2)
    check("unknown argument '--bogus'" in p.stderr, "unknown argument named", p.stderr)
    p = run("--xml", rc=2)
    check("--xml needs a value" in p.stderr, "--xml without a file", p.stderr)
    p = run("--xml", "/nonexistent/topo.xml", rc=1)
    check(p.stderr.startswith("coil-topo: ") and "/nonexistent/topo.xml" in p.stderr,
          "--xml of a missing file names it", p.stderr)


TOOL, XML = sys.argv[1], sys.argv[2]
NO_HWLOC = "--no-hwloc" in sys.argv[3:]
this_machine()
arguments()
if NO_HWLOC:
    p = run("--xml", XML, rc=1)
    check("hwloc not available at build time" in p.stderr, "--xml without hwloc says why", p.stderr)
else:
    xml_file()
print(f"{len(failures)} failure(s)" if failures else "coil-topo: all checks passed")
sys.exit(1 if failures else 0)
