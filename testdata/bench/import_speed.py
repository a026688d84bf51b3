#!/usr/bin/env python3
"""Time `tine import` of a generated Gemini CLI or Qwen Code history.

Each round: a first import into a fresh database, then a re-import of the
unchanged history into that database, each timed as a whole command (what
a person waits for); the first import's own "seconds" (reading the files
and storing the runs; opening and closing the database are outside it)
is given beside it. Every first import must store
exactly SESSIONS runs, skipping nothing; every re-import none. Prints each
round, the medians and ranges, and the load average (the machine may be
shared: the numbers move with it).

usage: import_speed.py TINE gemini|qwen|opencode HOME SESSIONS [ROUNDS]
  HOME is what gen_agent_corpus.py wrote to; what is imported is
  HOME/.gemini/tmp, HOME/.qwen/projects or
  HOME/.local/share/opencode/opencode.db, named on the command line.
"""
import json, os, statistics, subprocess, sys, tempfile, time

tine, agent, home, nsess = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3]), int(sys.argv[4])
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
folder = {"gemini": os.path.join(home, ".gemini", "tmp"), "qwen": os.path.join(home, ".qwen", "projects"),
          "opencode": os.path.join(home, ".local", "share", "opencode", "opencode.db")}[agent]
env = dict(os.environ, HOME=home)
env.pop("TINE_DB", None)


def imp(db):
    t = time.perf_counter()
    p = subprocess.run([tine, "--db", db, "import", "--json", folder], env=env, capture_output=True, text=True, timeout=1800)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"tine import failed ({p.returncode}): {p.stderr[-2000:]}")
    return dt, json.loads(p.stdout)


def ms(xs):
    return f"median {statistics.median(xs) * 1000:.0f} ms (range {min(xs) * 1000:.0f}-{max(xs) * 1000:.0f})"


first, again, loads, inner = [], [], [], []
size = os.path.getsize(folder) if os.path.isfile(folder) else \
    sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jsonl"))
with tempfile.TemporaryDirectory() as tmp:
    for r in range(rounds):
        db = os.path.join(tmp, f"r{r}.db")
        loads.append(os.getloadavg()[0])
        dt, s = imp(db)
        if s["runs"] != nsess or s["skipped"] or s["skipped_files"] or s["errors"] or s["failed"] or s["empty"]:
            sys.exit(f"first import: {s['runs']} runs of {nsess}; skipped {s['skipped']} {s['skipped_files']}; "
                     f"empty {s['empty']}; errors {s['errors']}")
        first.append(dt)
        inner.append(s["seconds"])
        msgs = s["messages"]
        dt, s = imp(db)
        if s["runs"] != 0 or s["unchanged"] != s["files"]:
            sys.exit(f"re-import: {s['runs']} runs, {s['unchanged']} of {s['files']} files unchanged")
        again.append(dt)
        print(f"round {r + 1}: first import {first[-1] * 1000:.0f} ms (reading and storing {inner[-1] * 1000:.0f} ms), re-import {again[-1] * 1000:.0f} ms, load {loads[-1]:.2f}", flush=True)

print(f"{agent}: {nsess} sessions, {msgs} messages, {size / 1e6:.1f} MB; {rounds} rounds: "
      f"first import {ms(first)}, of which reading and storing {ms(inner)}; re-import {ms(again)}; "
      f"load average (1 min) {statistics.median(loads):.2f} ({min(loads):.2f}-{max(loads):.2f}) on {os.cpu_count()} cores")
