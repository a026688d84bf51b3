#!/usr/bin/env python3
"""Time `tine import` against ccusage on the same corpus, in one run.

Each round runs, one after the other: ccusage, a first `tine import` into a
fresh database, and a re-import of the unchanged corpus into that database.
Rounds alternate so load on the machine falls on all three alike; the
report gives each one's median and tine's ratios to ccusage's median.

usage: side_by_side.py TINE CCUSAGE CORPUS_DIR [ROUNDS]
  CORPUS_DIR holds projects/ (as gen_claude_corpus.py makes it)
"""
import os, statistics, subprocess, sys, tempfile, time

tine, ccusage, corpus = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
projects = os.path.join(corpus, "projects")
env = dict(os.environ, CLAUDE_CONFIG_DIR=corpus)


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


times = {"ccusage": [], "first": [], "reimport": []}
with tempfile.TemporaryDirectory() as tmp:
    for r in range(rounds):
        db = os.path.join(tmp, f"r{r}.db")
        times["ccusage"].append(timed([ccusage, "session", "--json", "--offline"]))
        times["first"].append(timed([tine, "--db", db, "import", projects]))
        times["reimport"].append(timed([tine, "--db", db, "import", projects]))
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in times.items()), flush=True)

med = {k: statistics.median(v) for k, v in times.items()}
print(f"medians of {rounds}: ccusage {med['ccusage'] * 1000:.0f} ms, "
      f"first import {med['first'] * 1000:.0f} ms ({med['first'] / med['ccusage']:.2f}x), "
      f"re-import {med['reimport'] * 1000:.1f} ms ({med['reimport'] / med['ccusage']:.3f}x)")
