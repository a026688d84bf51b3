#!/usr/bin/env python3
"""Time `tine import` against ccusage on the same corpora, in one run.

Each round runs, one after the other: ccusage, a first `tine import` into a
fresh database, and a re-import of the unchanged corpus into that database.
Rounds alternate so load on the machine falls on all three alike; the
report gives each one's median time, median CPU time (user and system, of
every thread: steadier than the wall time when the machine is shared) and
peak memory (the largest resident set of the process, from wait4), and
tine's ratios to ccusage's medians.

usage: side_by_side.py [--rounds N] [--work DIR] [--shapes S,...] [--before TINE0] TINE CCUSAGE [CORPUS_DIR]
  CORPUS_DIR holds projects/ (as gen_claude_corpus.py makes it): that corpus
  only. Without it, every shape of --shapes (default 400x12,2000x30,1x50000:
  SESSIONSxTURNS, the three of issue 19: 147 MB of small sessions, 1.1 GB of
  larger ones, one 509 MB session of 200,002 messages) is measured, each in
  DIR/SESSIONSxTURNS (default DIR: $TMPDIR/tine-bench), generated there with
  gen_claude_corpus.py when missing. --before TINE0 also runs another
  build (the one before a change) in the same rounds, for a before/after
  table measured under the same load.
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("tine")
ap.add_argument("ccusage")
ap.add_argument("corpus", nargs="?")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tine-bench"))
ap.add_argument("--shapes", default="400x12,2000x30,1x50000")
ap.add_argument("--before", help="another tine, measured in the same rounds")
args = ap.parse_args()


def run(cmd, env):
    """Runs cmd; returns its wall time (s), peak resident set (MB) and CPU time (s)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    took = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({p.returncode}): {err[-2000:]}")
    return took, ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime  # ru_maxrss: kilobytes on Linux


def corpus_size(projects):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(projects) for f in fs)


def ensure(shape):
    sessions, turns = shape.split("x")
    corpus = os.path.join(args.work, shape)
    projects = os.path.join(corpus, "projects")
    if not os.path.isdir(projects):
        print(f"generating {shape} in {corpus} ...", flush=True)
        tmp = corpus + ".part"
        subprocess.run([sys.executable, os.path.join(here, "gen_claude_corpus.py"),
                        os.path.join(here, "claude-2.1.328-template.jsonl"), os.path.join(tmp, "projects"),
                        sessions, turns], check=True)
        os.rename(tmp, corpus)
    return corpus


def measure(label, corpus):
    projects = os.path.join(corpus, "projects")
    env = dict(os.environ, CLAUDE_CONFIG_DIR=corpus)
    size = corpus_size(projects)
    print(f"== {label}: {size / 1e6:.0f} MB, {args.rounds} rounds", flush=True)
    cmds = [("ccusage", [args.ccusage, "session", "--json", "--offline"]),
            ("first", [args.tine, "--db", "{db}", "import", projects]),
            ("reimport", [args.tine, "--db", "{db}", "import", projects])]
    if args.before:
        cmds += [("before", [args.before, "--db", "{db0}", "import", projects]),
                 ("before-re", [args.before, "--db", "{db0}", "import", projects])]
    times = {k: [] for k, _ in cmds}
    rss = {k: [] for k, _ in cmds}
    cpu = {k: [] for k, _ in cmds}
    with tempfile.TemporaryDirectory(dir=args.work if os.path.isdir(args.work) else None) as tmp:
        for r in range(args.rounds):
            db, db0 = os.path.join(tmp, f"r{r}.db"), os.path.join(tmp, f"r{r}-before.db")
            for key, cmd in cmds:
                cmd = [c.format(db=db, db0=db0) if c.startswith("{") else c for c in cmd]
                t, m, c = run(cmd, env)
                times[key].append(t)
                rss[key].append(m)
                cpu[key].append(c)
            for f in os.listdir(tmp):
                os.remove(os.path.join(tmp, f))  # a round's database is not kept: disk is finite
            print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.0f} ms {rss[k][-1]:.0f} MB"
                                                 for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    peak = {k: max(v) for k, v in rss.items()}
    row = (label, size / 1e6, med["ccusage"], peak["ccusage"], med["first"], med["first"] / med["ccusage"],
           peak["first"], med["reimport"] / med["ccusage"], mcpu["first"] / mcpu["ccusage"])
    if args.before:
        row += (med["before"] / med["ccusage"], peak["before"], med["before-re"] / med["ccusage"],
                mcpu["before"] / mcpu["ccusage"])
    print(f"medians of {args.rounds}: ccusage {med['ccusage'] * 1000:.0f} ms ({peak['ccusage']:.0f} MB), "
          f"first import {med['first'] * 1000:.0f} ms ({row[5]:.2f}x, {peak['first']:.0f} MB), "
          f"re-import {med['reimport'] * 1000:.1f} ms ({row[7]:.3f}x); CPU: ccusage {mcpu['ccusage']:.2f} s, "
          f"first import {mcpu['first']:.2f} s ({row[8]:.2f}x)", flush=True)
    return row


if args.corpus:
    rows = [measure(os.path.basename(os.path.abspath(args.corpus)), os.path.abspath(args.corpus))]
else:
    os.makedirs(args.work, exist_ok=True)
    rows = [measure(s, ensure(s)) for s in args.shapes.split(",")]
print()
extra = " before/ccusage | before CPU/ccusage | before peak MB | before re-import/ccusage |" if args.before else ""
print("| corpus | MB | ccusage s | ccusage peak MB | tine first s | tine/ccusage | tine CPU/ccusage | tine peak MB"
      " | re-import/ccusage |" + extra)
print("|---|---|---|---|---|---|---|---|---|" + ("---|---|---|---|" if args.before else ""))
for row in rows:
    label, mb, cc, ccm, first, ratio, fm, re, cr = row[:9]
    line = f"| {label} | {mb:.0f} | {cc:.2f} | {ccm:.0f} | {first:.2f} | {ratio:.2f}x | {cr:.2f}x | {fm:.0f} | {re:.3f}x |"
    if args.before:
        line += f" {row[9]:.2f}x | {row[12]:.2f}x | {row[10]:.0f} | {row[11]:.3f}x |"
    print(line)
