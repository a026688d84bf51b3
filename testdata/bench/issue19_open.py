#!/usr/bin/env python3
"""Issue 19's second table, measured side by side in one run.

For a small and a big run (each imported into its own database), rounds
alternate the two (and which goes first) so load on the shared machine
falls on both alike:

  checkpoints  `tine checkpoints RUN` (output to /dev/null)
  fork         `tine fork RUN --at K -m x --harness script --wait`, on a
               fresh copy of the database each round (copied untimed), K a
               checkpoint in the middle of the run; fork-create is the same
               fork without -m (created only, no turn)
  open         the TUI in tmux at 200x50: enter on the library to the tree
               shown, polled with capture-pane every 10 ms (the time runs
               from just before send-keys to the first capture showing the
               run's title line K=1/N and its first and 40th rows); its cpu
               row is the TUI process's CPU time over that span, from
               /proc/PID/stat (10 ms ticks: coarse for the small run)
  memory       the TUI's VmRSS on the library screen (settled) before enter,
               and VmRSS / VmHWM from /proc once the tree is shown (and
               after a further second)

CPU time (user+system, every thread, from wait4) is reported next to the
wall time for the commands: it moves less with the machine's load.

usage: issue19_open.py [--rounds N] [--tui-rounds N] TINE SMALL.db SMALL_RUN SMALL_K BIG.db BIG_RUN BIG_K
Make the databases with gen_claude_corpus.py TEMPLATE OUT 1 500 (2,002
messages) and ... 1 50000 (200,002), then `tine --db X import OUT`.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("tine")
ap.add_argument("small_db")
ap.add_argument("small_run")
ap.add_argument("small_k")
ap.add_argument("big_db")
ap.add_argument("big_run")
ap.add_argument("big_k")
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--tui-rounds", type=int, default=5)
ap.add_argument("--skip", default="", help="comma list of checkpoints,fork,tui to skip")
args = ap.parse_args()
args.tine, args.small_db, args.big_db = map(os.path.abspath, (args.tine, args.small_db, args.big_db))

work = tempfile.mkdtemp(prefix="issue19-")
home = os.path.join(work, "home")
os.makedirs(home)
env = dict(os.environ, HOME=home, XDG_STATE_HOME=os.path.join(home, "state"),
           XDG_DATA_HOME=os.path.join(home, "data"), XDG_CONFIG_HOME=os.path.join(home, "config"),
           TERM="xterm-256color")
env.pop("TINE_DB", None)
sizes = {"small": (args.small_db, args.small_run, args.small_k),
         "big": (args.big_db, args.big_run, args.big_k)}
skip = set(filter(None, args.skip.split(",")))


def run(cmd):
    """Runs cmd; returns its wall time and CPU time (s)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    took = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd} failed: {err[-2000:]}")
    return took, ru.ru_utime + ru.ru_stime


def tmux(*a, check=True):
    return subprocess.run(["tmux", "-L", "issue19", *a], env=env, check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024  # kB -> MB
    return out


def cpu(pid):
    """The process's user+system CPU time so far (s; clock ticks of 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(pred, timeout, every=0.01):
    end = time.perf_counter() + timeout
    while True:
        screen = tmux("capture-pane", "-p", "-t", "s")
        if pred(screen):
            return time.perf_counter(), screen
        if time.perf_counter() > end:
            sys.exit("timed out; the screen was:\n" + screen)
        time.sleep(every)


def open_tui(size):
    db, _, _ = sizes[size]
    msgs = None
    tmux("kill-session", "-t", "s", check=False)
    tmux("new-session", "-d", "-s", "s", "-x", "200", "-y", "50", args.tine, "--db", db)
    pid = int(tmux("display-message", "-p", "-t", "s", "#{pane_pid}").strip())
    wait_for(lambda s: "enter open tree" in s and "hello from the bar" in s, 30)
    time.sleep(1.5)  # the library settles (its reads, the first frames)
    before = status(pid)
    c0 = cpu(pid)
    t0 = time.perf_counter()
    tmux("send-keys", "-t", "s", "Enter")

    def shown(s):
        lines = s.splitlines()
        return (len(lines) > 41 and "tine ›" in lines[0] and "K=1/" in lines[0]
                and lines[1].lstrip("▌ ").startswith("1 ") and lines[40].lstrip("▌ ").startswith("40 "))

    t1, screen = wait_for(shown, 120)
    c1 = cpu(pid)
    msgs = screen.splitlines()[0].rsplit("/", 1)[-1].strip()
    at_shown = status(pid)
    time.sleep(1.0)
    settled = status(pid)
    tmux("kill-session", "-t", "s", check=False)
    return t1 - t0, c1 - c0, before, at_shown, settled, msgs


res = {}


def add(key, size, v):
    res.setdefault(key, {}).setdefault(size, []).append(v)


print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
for r in range(args.rounds):
    order = ["small", "big"] if r % 2 == 0 else ["big", "small"]
    for size in order:
        db, runid, k = sizes[size]
        if "checkpoints" not in skip:
            w, c = run([args.tine, "--db", db, "checkpoints", runid])
            add("checkpoints", size, (w, c))
        if "fork" not in skip:
            copy = os.path.join(work, f"fork-{size}.db")
            shutil.copyfile(db, copy)
            w, c = run([args.tine, "--db", copy, "fork", runid, "--at", k, "-m", "x", "--harness", "script", "--wait"])
            add("fork", size, (w, c))
            shutil.copyfile(db, copy)
            w, c = run([args.tine, "--db", copy, "fork", runid, "--at", k, "--harness", "script"])
            add("fork-create", size, (w, c))
            os.remove(copy)
        if "tui" not in skip and r < args.tui_rounds:
            took, used, before, at_shown, settled, msgs = open_tui(size)
            add("open", size, (took, used))
            add("mem", size, (before, at_shown, settled))
        print(f"round {r + 1} {size}: " + ", ".join(
            f"{key} {res[key][size][-1][0] * 1000:.0f} ms" for key in ("checkpoints", "fork", "fork-create", "open")
            if key in res and size in res[key] and len(res[key][size]) == r + 1), flush=True)
        if "mem" in res and len(res["mem"].get(size, [])) == r + 1:
            b, a, s = res["mem"][size][-1]
            print(f"  mem {size} ({msgs} msgs): library {b['VmRSS']:.1f} MB, shown {a['VmRSS']:.1f} MB "
                  f"(+{a['VmRSS'] - b['VmRSS']:.1f}), +1s {s['VmRSS']:.1f} MB (+{s['VmRSS'] - b['VmRSS']:.1f}), "
                  f"HWM {s['VmHWM']:.1f} MB", flush=True)
print(f"load after: {open('/proc/loadavg').read().strip()}", flush=True)


def ms(xs):
    return f"{statistics.median(xs) * 1000:.0f} ms ({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f})"


print("\n| work | 2k run | 200k run | ratio (medians) |\n|---|---|---|---|")
for key in ("checkpoints", "fork", "fork-create", "open"):
    if key not in res:
        continue
    sw = [w for w, _ in res[key]["small"]]
    bw = [w for w, _ in res[key]["big"]]
    print(f"| {key} wall | {ms(sw)} | {ms(bw)} | {statistics.median(bw) / statistics.median(sw):.2f}x |")
    if True:
        sc = [c for _, c in res[key]["small"]]
        bc = [c for _, c in res[key]["big"]]
        print(f"| {key} cpu | {ms(sc)} | {ms(bc)} | {statistics.median(bc) / statistics.median(sc):.2f}x |")
if "mem" in res:
    for label, pick in (("shown", 1), ("+1s", 2)):
        row = []
        for size in ("small", "big"):
            d = [m[pick]["VmRSS"] - m[0]["VmRSS"] for m in res["mem"][size]]
            row.append(f"+{statistics.median(d):.1f} MB ({min(d):.1f}-{max(d):.1f})")
        print(f"| TUI RSS growth at {label} | {row[0]} | {row[1]} | |")
    row = []
    for size in ("small", "big"):
        d = [m[2]["VmHWM"] - m[0]["VmRSS"] for m in res["mem"][size]]
        row.append(f"+{statistics.median(d):.1f} MB ({min(d):.1f}-{max(d):.1f})")
    print(f"| TUI peak (VmHWM) over library RSS | {row[0]} | {row[1]} | |")
shutil.rmtree(work, ignore_errors=True)
