#!/usr/bin/env python3
"""Ten forks in containers against ten in worktrees, in the same run.

A repository of FILES files (10,000 of 10 KB: about 100 MB, with
uncommitted and untracked work on top), a real Claude Code session made
there against the scripted model server (internal/modelserver), imported;
then, alternating, rounds of

    tine fork SESSION -n 10 -m ... --wait                      (local)
    tine fork SESSION -n 10 -m ... --on docker --network host --wait

where each fork's one turn runs a shell tool that writes a file of its own
and answers. Each batch's wall time, and tine's peak RSS (/usr/bin/time
-v of the command that runs the turns), are read per round; for the
container batches, the per-fork phases tine's docker place reports
(TINE_DOCKER_TIMINGS): copy in (the batch's image with the starting files:
once per batch), create, start, turn, copy out. The first container batch
copies the files in; the later ones find the image made (the same start).
Between rounds the forks' worktrees and containers are removed (tine
worktree prune --all --force), off the timed path.

Needs: a Docker daemon that answers, the image tine/claude:latest (tine
image build claude --offline), the pinned Claude Code where
TINE_AGENTS_BIN points (default /tmp/tine-agents/node_modules/.bin).

usage: containers.py [--rounds 3] [--files 10000] [--tine BIN] [--keep]
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("TINE_AGENTS_BIN", "/tmp/tine-agents/node_modules/.bin")
N = 10


def run(cmd, timeout=1800, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])}... failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def make_repo(d, files):
    os.makedirs(d)
    for i in range(files):
        sub = os.path.join(d, f"pkg{i // 500:02d}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"f{i:05d}.txt"), "w") as f:
            f.write(os.urandom(5120).hex())
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init"]):
        run(["git", *args], cwd=d)
    # Uncommitted and untracked work the forks start with.
    with open(os.path.join(d, "pkg00", "f00000.txt"), "a") as f:
        f.write("\nedited\n")
    with open(os.path.join(d, "untracked.txt"), "w") as f:
        f.write("new\n")


def push(url, replies):
    post(url + "/_control/replies", replies)


def fork_replies(tag):
    rs = []
    for i in range(1, N + 1):
        m = f"bench-{tag}-{i:02d}"
        rs.append({"match": {"contains": m, "tools": True}, "text": "Writing.",
                   "tool_calls": [{"name": "Bash", "input": {"command": f"echo {m} > {m}.txt && echo wrote-{m}", "description": "write"}}]})
        rs.append({"match": {"contains": f"wrote-{m}", "tools": True}, "text": "Done."})
    return rs


def timed(cmd, env, cwd):
    """Runs cmd under /usr/bin/time -v: wall seconds, peak RSS in MB, stdout."""
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    wall = time.time() - t0
    rss = 0
    for line in p.stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split()[-1]) / 1024
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:6])}... failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return wall, rss, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--tine")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    claude = os.path.join(BIN_DIR, "claude")
    if not os.path.exists(claude):
        sys.exit(f"no claude in {BIN_DIR}")
    work = tempfile.mkdtemp(prefix="tine-containers-")
    procs = []
    try:
        tine = a.tine or os.path.join(work, "tine")
        if not a.tine:
            run(["go", "build", "-o", tine, "."], cwd=REPO)
        ms = os.path.join(work, "modelserver")
        run(["go", "build", "-o", ms, "./internal/modelserver/cmd/modelserver"], cwd=REPO)
        url_file = os.path.join(work, "url")
        procs.append(subprocess.Popen([ms, "-q", "-url-file", url_file], stderr=subprocess.DEVNULL))
        while not os.path.exists(url_file) or not open(url_file).read().strip():
            time.sleep(0.05)
        url = open(url_file).read().strip()
        home = os.path.join(work, "home")
        project = os.path.join(home, "project")
        os.makedirs(home)
        t0 = time.time()
        make_repo(project, a.files)
        size = int(run(["du", "-sm", "--exclude=.git", project]).stdout.split()[0])
        print(f"repository: {a.files} files, {size} MB of files (made in {time.time() - t0:.0f} s)", flush=True)
        env = dict(os.environ, HOME=home, TINE_CLAUDE_BIN=claude, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                   DISABLE_ERROR_REPORTING="1", CLAUDE_CODE_MAX_RETRIES="1", TINE_DB=os.path.join(work, "t.db"))
        env.pop("CLAUDE_CONFIG_DIR", None)
        push(url, [{"match": {"contains": "bench-start", "tools": True}, "text": "Ready."}])
        out = run([claude, "-p", "bench-start", "--output-format", "stream-json", "--verbose"], env=env, cwd=project).stdout
        session = next(json.loads(l)["session_id"] for l in out.splitlines() if l.startswith("{") and '"session_id"' in l)
        run([tine, "import", "--json"], env=env, cwd=home)
        rows = {"local": [], "docker": []}
        phases = {}
        for r in range(a.rounds):
            for where in ("local", "docker"):
                tag = f"{where}{r}"
                push(url, fork_replies(tag))
                cmd = [tine, "fork", session, "-n", str(N), "--wait", "--json"]
                for i in range(1, N + 1):
                    cmd += ["-m", f"bench-{tag}-{i:02d}"]
                e = dict(env)
                if where == "docker":
                    cmd += ["--on", "docker", "--network", "host"]
                    e["TINE_DOCKER_TIMINGS"] = os.path.join(work, f"timings-{tag}.jsonl")
                wall, rss, stdout = timed(cmd, e, home)
                forks = json.loads(stdout)["forks"]
                bad = [f for f in forks if f["status"] != "completed"]
                if bad:
                    sys.exit(f"round {r} {where}: {bad[0]['name']} {bad[0]['status']}: {bad[0]['error']}")
                rows[where].append((wall, rss))
                print(f"round {r} {where:6s}: {wall:6.1f} s wall, tine peak RSS {rss:5.1f} MB", flush=True)
                if where == "docker":
                    for line in open(e["TINE_DOCKER_TIMINGS"]):
                        t = json.loads(line)
                        phases.setdefault((r, t["phase"]), []).append(t["seconds"])
                # Off the timed path: the forks' worktrees and containers.
                run([tine, "worktree", "prune", "--all", "--force"], env=env, cwd=home)
        print()
        lw = [w for w, _ in rows["local"]]
        dw = [w for w, _ in rows["docker"]]
        print(f"local batches : wall {', '.join(f'{w:.1f}' for w in lw)} s; peak RSS {max(x for _, x in rows['local']):.1f} MB")
        print(f"docker batches: wall {', '.join(f'{w:.1f}' for w in dw)} s; peak RSS {max(x for _, x in rows['docker']):.1f} MB")
        print(f"ratio docker/local per round: {', '.join(f'{d / l:.2f}x' for d, l in zip(dw, lw))}; "
              f"median {statistics.median(dw) / statistics.median(lw):.2f}x")
        print("per-fork phases in containers (median of the batch's forks, seconds; copy in is once a batch):")
        for r in range(a.rounds):
            parts = []
            for ph in ("copy in", "create", "start", "turn", "copy out"):
                v = phases.get((r, ph))
                parts.append(f"{ph} {statistics.median(v):.2f}" if v else f"{ph} -")
            print(f"  round {r}: " + ", ".join(parts))
    finally:
        for p in procs:
            p.terminate()
        if a.keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
