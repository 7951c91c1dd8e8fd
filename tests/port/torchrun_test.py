"""C programs launched by the real torchrun, back to back.

coilCommInitFromEnv under torchrun exchanges coil's unique id through the
store torchrun's agent already runs on MASTER_PORT (rank 0 publishes it, the
others wait for it). Before, rank 0 listened on MASTER_PORT+1, a port that
was often the local port of one of torchrun's own store connections: 13
of 25 launches failed with "Address already in use". Torch 2.4's torchrun
(c10d rendezvous) has no agent store for its workers: there the root took
MASTER_PORT+1 until later, and one launch in 12 failed the same way; it now
takes a port from the run, below the kernel's ephemeral range
(rank_zero_beside_a_busy_port shows why).

  torchrun_test.py README_EXAMPLE [COIL_PERF]
    COIL_TORCHRUN_LAUNCHES  launches of the example (default 12: the bug this
                            caught failed half of all launches, so 12 would
                            all pass with it with odds of 1 in 4096)

Runs the README's C example (coilCommInitFromEnv, one all-reduce) that many
times with `torchrun --standalone --nproc-per-node 2`; every launch must
succeed, and both ranks print the right sum. Then coil_perf under torchrun, and a rank
whose rank 0 never publishes (it must fail at its deadline), and a rank 0
without the agent's store beside a busy MASTER_PORT+1. Exits 77 when
torchrun is not installed beside this
Python (tools/lib/torch-venv.sh makes that venv).
"""
import os
import re
import subprocess
import sys
import time

SKIP = 77
# The README example prints "rank R of N: SUM (expected SUM)".
RIGHT_SUM = re.compile(r"^rank \d+ of 2: (\S+) \(expected \1\)$", re.M)


def torchrun_path():
    path = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.access(path, os.X_OK):
        print(f"SKIP: no torchrun beside {sys.executable} (run tools/lib/torch-venv.sh "
              "and reconfigure with that venv's python)")
        sys.exit(SKIP)
    return path


def launch(torchrun, argv, nproc=2, timeout=120):
    env = dict(os.environ, COIL_SOCKET_IFNAME="lo", COIL_TIMEOUT_MS="60000",
               OMP_NUM_THREADS="1")
    cmd = [torchrun, "--standalone", f"--nproc-per-node={nproc}", "--no-python"] + argv
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def rank_one_alone(example):
    """Rank 1 of 2 with torchrun's variables and a real TCPStore, but no rank
    0: it must fail at its deadline naming the key it waited for."""
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = dict(os.environ, COIL_SOCKET_IFNAME="lo", COIL_TIMEOUT_MS="1500", RANK="1",
               WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(store.port), TORCHELASTIC_RUN_ID="lonely",
               TORCHELASTIC_RESTART_COUNT="3", TORCHELASTIC_USE_AGENT_STORE="True")
    start = time.monotonic()
    r = subprocess.run([example], env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    out = r.stdout + r.stderr
    ok = r.returncode != 0 and "/coil/lonely/3/0" in out and took < 10
    print(f"rank 1 without a rank 0: exit {r.returncode} after {took:.1f} s: "
          f"{'ok' if ok else 'FAILED'}")
    if not ok:
        print(out[-2000:])
    return 0 if ok else 1


def rank_zero_beside_a_busy_port(example):
    """Rank 0 of 1 as torchrun launches it without its agent's store (torch
    2.4's c10d rendezvous, --standalone included), while the port after
    MASTER_PORT is the local port of a live connection, as torchrun's own
    store connections often leave it: the kernel gives bind(0) odd ports and
    connect() even ones, so MASTER_PORT (a free port torchrun found with
    bind(0)) + 1 is where connect() puts its next local port. coil's root
    must not listen there: it failed with "Address already in use"."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket()
    client.connect(server.getsockname())
    accepted, _ = server.accept()
    busy = client.getsockname()[1]
    env = dict(os.environ, COIL_SOCKET_IFNAME="lo", COIL_TIMEOUT_MS="10000", RANK="0",
               WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(busy - 1), TORCHELASTIC_RUN_ID="beside-a-busy-port",
               TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_USE_AGENT_STORE="False")
    r = subprocess.run([example], env=env, capture_output=True, text=True, timeout=60)
    for s in (accepted, client, server):
        s.close()
    ok = r.returncode == 0
    print(f"rank 0 while port MASTER_PORT+1 ({busy}) is a connection's: exit {r.returncode}: "
          f"{'ok' if ok else 'FAILED'}")
    if not ok:
        print((r.stdout + r.stderr)[-2000:])
    return 0 if ok else 1


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: torchrun_test.py README_EXAMPLE [COIL_PERF]")
    example = sys.argv[1]
    perf = sys.argv[2] if len(sys.argv) > 2 else None
    torchrun = torchrun_path()
    failures = 0

    launches = int(os.environ.get("COIL_TORCHRUN_LAUNCHES", "12"))
    start = time.monotonic()
    failed = []
    for i in range(launches):
        r = launch(torchrun, [example])
        good = r.returncode == 0 and len(RIGHT_SUM.findall(r.stdout)) == 2
        if not good:
            failed.append(i)
            print(f"launch {i}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    elapsed = time.monotonic() - start
    print(f"{launches - len(failed)} of {launches} torchrun launches of the README example "
          f"succeeded ({elapsed:.0f} s)")
    failures += len(failed)

    if perf:
        r = launch(torchrun, [perf, "-b", "8", "-e", "64K", "-f", "4", "-c", "1"])
        ok = r.returncode == 0 and "65536" in r.stdout
        print(f"coil_perf under torchrun: {'ok' if ok else 'FAILED'}")
        if not ok:
            print(r.stdout[-3000:], r.stderr[-3000:])
            failures += 1

    failures += rank_one_alone(example)
    failures += rank_zero_beside_a_busy_port(example)
    print("PASS" if failures == 0 else f"FAIL: {failures} failure(s)")
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
