#!/usr/bin/env python3
"""Measure tine's fork overhead for Gemini CLI, Qwen Code (and opencode,
with a tine that has its harness), next to the agent's own start time.

For each agent: the scripted model server (internal/modelserver) on
loopback, a private HOME set up as harness/<agent>'s integration tests set
it up, a git repository, and one real session made there by the pinned CLI
(a prompt, a shell call it runs for real, an answer). That session is
imported, then each round runs

    tine fork RUN -m MARKER --wait

with the agent's binary variable (TINE_GEMINI_BIN, TINE_QWEN_BIN,
TINE_OPENCODE_BIN) pointing at a shim that writes the time it was exec'd
and execs the real CLI:

    overhead    = the agent's first exec (the shim's start) - the moment
                  tine fork was launched
    agent start = first model request's arrival at the server - the
                  start of the exec that runs the turn
    total       = tine fork --wait's wall time

A fork of opencode execs it twice (opencode import of the prefix, then
opencode run): both the first exec and the turn's are given.
Times are wall clock (time.time() here, `date +%s.%N` in the shim, the
server's arrival time), all on this machine. The load average is read each
round: on a shared, busy machine every number moves with it.

usage: fork_overhead.py [--agents gemini,qwen] [--rounds 7] [--tine BIN]
                        [--save-templates DIR] [--keep]
  --agents              gemini, qwen, opencode (comma-separated)
  --tine BIN            a built tine (default: go build of this checkout)
  --save-templates DIR  also copy each real session file to
                        DIR/<agent>-<version>-template.jsonl (the input of
                        gen_agent_corpus.py; opencode's database as
                        DIR/opencode-<version>-template.json)
  TINE_AGENTS_BIN       where the pinned CLIs are
                        (default /tmp/tine-agents/node_modules/.bin)
"""
import argparse, glob, json, os, shutil, signal, sqlite3, statistics, subprocess, sys, tempfile, time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("TINE_AGENTS_BIN", "/tmp/tine-agents/node_modules/.bin")
TIMEOUT = 600  # seconds for one agent run, at load 10 on 2 cores

SHELL_CALL = {"command": "echo beta >> notes.txt && cat notes.txt"}


def opencode_env(url, home):
    """opencode's folders in home and a provider at the server, as
    harness/opencode's tests give them (its tools allowed, as tine's auto)."""
    config = {"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": url + "/v1", "apiKey": "test-key"},
                                    "models": {"tine-test-model": {}}}},
              "model": "fake/tine-test-model", "autoupdate": False, "share": "disabled", "permission": {"*": "allow"}}
    return {"XDG_DATA_HOME": os.path.join(home, ".local", "share"), "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"), "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
            "OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_MODELS_FETCH": "1"}


# What harness/<agent>/integration_test.go gives each CLI.
AGENTS = {
    "gemini": {
        "version": "0.61.0",
        "settings": (".gemini", {"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"maxAttempts": 1}}),
        "env": lambda url, home: {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "test-key", "GEMINI_MODEL": "gemini-2.5-flash",
                                  "GEMINI_CLI_TRUST_WORKSPACE": "true"},
        "make": ["--output-format", "stream-json", "--approval-mode", "yolo", "-p"],
        "shell": ("run_shell_command", SHELL_CALL),
        "binvar": "TINE_GEMINI_BIN",
        "sessions": lambda home: glob.glob(os.path.join(home, ".gemini", "tmp", "*", "chats", "session-*.jsonl")),
    },
    "qwen": {
        "version": "0.24.4",
        # The background memory extractor makes model calls of its own
        # after a turn; off, as in the tests.
        "settings": (".qwen", {"security": {"auth": {"selectedType": "openai"}}, "memory": {"enableManagedAutoMemory": False}}),
        "env": lambda url, home: {"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "test-key", "OPENAI_MODEL": "tine-test-model"},
        "make": ["--output-format", "stream-json", "--approval-mode", "yolo", "-p"],
        "shell": ("run_shell_command", SHELL_CALL),
        "binvar": "TINE_QWEN_BIN",
        "sessions": lambda home: glob.glob(os.path.join(home, ".qwen", "projects", "*", "chats", "*.jsonl")),
    },
    # Its sessions are rows of a SQLite database (the template is a dump
    # of it). A fork's first turn runs it twice: opencode import (the prefix),
    # then opencode run --session.
    "opencode": {
        "version": "1.18.33",
        "env": opencode_env,
        "make": ["run", "--format", "json"],
        "shell": ("bash", dict(SHELL_CALL, description="append")),
        "binvar": "TINE_OPENCODE_BIN",
        "sessions": lambda home: glob.glob(os.path.join(home, ".local", "share", "opencode", "opencode.db")),
    },
}
MODEL_APIS = {"gemini", "chat", "anthropic", "responses"}


def run(cmd, **kw):
    kw.setdefault("timeout", TIMEOUT)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} {' '.join(cmd[1:3])}... failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def requests(url):
    with urllib.request.urlopen(url + "/_control/requests", timeout=30) as r:
        return json.load(r)


def epoch(ts):
    """The server's RFC 3339 time (nanoseconds, Z) as seconds since the epoch."""
    date, frac = ts.rstrip("Z").split(".") if "." in ts else (ts.rstrip("Z"), "0")
    t = time.mktime(time.strptime(date, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return t + float("0." + frac)


def git_repo(d):
    os.makedirs(d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("alpha\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init"]):
        run(["git", *args], cwd=d)


def dump_db(db, out):
    """opencode's database as JSON: its schema, and the rows of its tables
    that hold sessions (project, session, message, part)."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    c.row_factory = sqlite3.Row
    d = {"schema": [r[0] for r in c.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]}
    for t in ("project", "session", "message", "part"):
        d[t] = [dict(r) for r in c.execute(f"SELECT * FROM {t} ORDER BY rowid")]
    c.close()
    with open(out, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")


def stats(xs):
    return f"median {statistics.median(xs):.0f} ms (range {min(xs):.0f}-{max(xs):.0f})"


def bench(name, tine, url, work, rounds, save):
    a = AGENTS[name]
    real = os.path.join(BIN_DIR, name)
    if not os.path.exists(real):
        sys.exit(f"{real} is not installed (npm install --prefix /tmp/tine-agents at the pins)")
    base = os.path.join(work, name)
    home = os.path.join(base, "home")
    os.makedirs(home)
    if "settings" in a:
        sub, settings = a["settings"]
        os.makedirs(os.path.join(home, sub))
        with open(os.path.join(home, sub, "settings.json"), "w") as f:
            json.dump(settings, f)
    repo = os.path.join(base, "project")
    git_repo(repo)
    env = dict(os.environ, HOME=home, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], **a["env"](url, home))
    env.pop("TINE_DB", None)
    db = os.path.join(base, "tine.db")

    # One real session: a shell call the CLI runs, then an answer.
    yes = {"tools": True}
    tool, args = a["shell"]
    post(url + "/_control/replies", [
        {"text": "I'll append it.", "tool_calls": [{"name": tool, "input": args}], "match": yes},
        {"text": "Appended beta.", "match": yes}])
    run([real, *a["make"], "add beta to notes"], cwd=repo, env=dict(env, PWD=repo))
    with open(os.path.join(repo, "notes.txt")) as f:
        if f.read() != "alpha\nbeta\n":
            sys.exit(f"{name}: the shell call did not run")
    files = a["sessions"](home)
    if len(files) != 1:
        sys.exit(f"{name}: expected one session file, found {files}")
    if save:
        os.makedirs(save, exist_ok=True)
        if files[0].endswith(".db"):
            dump_db(files[0], os.path.join(save, f"{name}-{a['version']}-template.json"))
        else:
            shutil.copy(files[0], os.path.join(save, f"{name}-{a['version']}-template.jsonl"))
    run([tine, "--db", db, "import"], env=env)
    runs = json.loads(run([tine, "--db", db, "ls", "--json"], env=env))
    if len(runs) != 1:
        sys.exit(f"{name}: expected one imported run, found {len(runs)}")
    rid = runs[0]["id"]

    # The shim: the time it was exec'd and its first argument, then the CLI.
    shim_log = os.path.join(base, "shim.log")
    shim = os.path.join(base, "shim.sh")
    with open(shim, "w") as f:
        f.write(f'#!/bin/sh\necho "$(date +%s.%N) $1" >> "{shim_log}"\nexec "{real}" "$@"\n')
    os.chmod(shim, 0o755)
    env[a["binvar"]] = shim

    rows = []
    for r in range(rounds):
        marker = f"bench-round-{r}-marker"
        open(shim_log, "w").close()
        load = os.getloadavg()[0]
        t0 = time.time()
        p = subprocess.run([tine, "--db", db, "fork", rid, "-m", marker, "--wait"], env=env, capture_output=True, text=True, timeout=TIMEOUT)
        t1 = time.time()
        if p.returncode != 0:
            sys.exit(f"{name} round {r + 1}: tine fork failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        # The agent's execs (not a --version probe): one, or for opencode
        # its import of the prefix, then the turn's run.
        execs = [(float(l.split()[0]), (l.split() + [""])[1]) for l in open(shim_log)]
        execs = [t for t, arg in execs if arg != "--version"]
        if not execs:
            sys.exit(f"{name} round {r + 1}: the shim never ran")
        shim_t = execs[-1]
        reqs = [q for q in requests(url) if q["api"] in MODEL_APIS and epoch(q["time"]) >= shim_t]
        if not reqs or not any(marker in json.dumps(q.get("body")) for q in reqs):
            sys.exit(f"{name} round {r + 1}: no model request with {marker} after the shim started")
        first = min(epoch(q["time"]) for q in reqs)
        row = {"overhead": (execs[0] - t0) * 1000, "turn": (shim_t - t0) * 1000, "agent": (first - shim_t) * 1000,
               "total": (t1 - t0) * 1000, "load": load, "execs": len(execs)}
        rows.append(row)
        more = f" (to its turn's exec, the last of {len(execs)}: {row['turn']:.0f} ms)" if len(execs) > 1 else ""
        print(f"{name} round {r + 1}: overhead {row['overhead']:.0f} ms{more}, agent start {row['agent']:.0f} ms, "
              f"fork --wait {row['total']:.0f} ms, load {load:.2f}", flush=True)
    col = lambda k: [x[k] for x in rows]
    more = f" (to the turn's exec {stats(col('turn'))})" if max(col("execs")) > 1 else ""
    print(f"{name} {a['version']}, {rounds} rounds: fork overhead {stats(col('overhead'))}{more}; "
          f"agent start {stats(col('agent'))}; fork --wait {stats(col('total'))}; "
          f"load average (1 min) {statistics.median(col('load')):.2f} ({min(col('load')):.2f}-{max(col('load')):.2f}) on {os.cpu_count()} cores",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", default="gemini,qwen")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tine")
    ap.add_argument("--save-templates")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    o = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tine-forkbench-")
    server = None
    try:
        tine = o.tine
        if not tine:
            tine = os.path.join(work, "tine")
            run(["go", "build", "-o", tine, "."], cwd=REPO)
        ms = os.path.join(work, "modelserver")
        run(["go", "build", "-o", ms, "./internal/modelserver/cmd/modelserver"], cwd=REPO)
        url_file = os.path.join(work, "url")
        server = subprocess.Popen([ms, "-q", "-url-file", url_file], stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(url_file) and open(url_file).read().strip():
                break
            time.sleep(0.1)
        url = open(url_file).read().strip()
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores at the start", flush=True)
        for name in o.agents.split(","):
            bench(name, os.path.abspath(tine), url, work, o.rounds, o.save_templates and os.path.abspath(o.save_templates))
    finally:
        if server:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        if o.keep:
            print("work folder:", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
