#!/usr/bin/env python3
"""Time tine's message search against agentsview's, on the same library, in one run.

The library is the 2000x30 corpus (gen_claude_corpus.py: 2,000 Claude Code
sessions of 30 turns, 1.1 GB; every prompt says "failing", and "1234" is in
session 1234's 30 prompts only). tine imports it (TINE, a built tine) into
DIR/search-2000x30.db; its search is timed in process by the Go benchmark
BenchmarkSearchLibrary (store/search_bench_test.go) on that file: Store.Search,
the function `tine search` and the TUI call, top 50.

The anchor is agentsview (github.com/wesm/agentsview) at commit aea2eb12
(2026-03-05), Go with SQLite FTS5 through cgo. Its code is not used here:
this script stores the same corpus in agentsview's schema and runs its
search query, both as that commit's source has them (internal/db/schema.sql
and db.go's schemaFTS: messages(content), an external-content FTS5 table
messages_fts tokenized 'porter unicode61'; internal/db/search.go's Search:
MATCH, joined to messages and sessions, snippet(), ORDER BY rank, LIMIT 51;
internal/parser's Claude reader for what a message's content is: a record
a message, its text, thinking and tool calls as text), through Python's
sqlite3 module, which is C SQLite with FTS5 as agentsview's go-sqlite3 is,
with agentsview's connection settings (mmap 256 MB, cache 64 MB). The query
is what its HTTP handler sends for one word: the word itself.

Each round runs both, alternating which goes first, REPS searches of each
word each, and reports each one's median; the summary is the median of the
rounds' medians, the ratio agentsview/tine, and issue 30's goals (a common
word's top 50 in at most 25 ms and three times faster than agentsview, a
rare word under 0.5 ms). On a shared machine compare the ratios: every
time moves with the load.

usage: search_speed.py [--rounds N] [--reps K] [--work DIR] [--words common,rare] TINE
"""
import argparse, json, os, re, sqlite3, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("tine", help="a built tine, to import the corpus")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--reps", type=int, default=50, help="searches of each word a round")
ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tine-bench"))
ap.add_argument("--words", default="failing,1234", help="the common word, then the rare one")
args = ap.parse_args()
words = args.words.split(",")
os.makedirs(args.work, exist_ok=True)


def corpus():
    c = os.path.join(args.work, "2000x30")
    if not os.path.isdir(os.path.join(c, "projects")):
        print(f"generating 2000x30 in {c} ...", flush=True)
        subprocess.run([sys.executable, os.path.join(here, "gen_claude_corpus.py"),
                        os.path.join(here, "claude-2.1.328-template.jsonl"), os.path.join(c + ".part", "projects"),
                        "2000", "30"], check=True)
        os.rename(c + ".part", c)
    return os.path.join(c, "projects")


def tine_db(projects):
    db = os.path.join(args.work, "search-2000x30.db")
    done = db + ".imported"  # the import ended; else it is done again
    if not os.path.exists(done):
        print(f"importing into {db} ...", flush=True)
        subprocess.run([args.tine, "--db", db, "import", projects], check=True, stdout=subprocess.DEVNULL)
        open(done, "w").close()
    return db


# agentsview's tables as aea2eb12's schema.sql and db.go make them, the
# columns its search reads and its reader writes for a Claude session.
AV_SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, project TEXT NOT NULL, machine TEXT NOT NULL DEFAULT 'local',
    agent TEXT NOT NULL DEFAULT 'claude', first_message TEXT, started_at TEXT, ended_at TEXT,
    message_count INTEGER NOT NULL DEFAULT 0, file_path TEXT, file_size INTEGER, file_mtime INTEGER,
    file_hash TEXT, parent_session_id TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));
CREATE TABLE messages (
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, timestamp TEXT,
    has_thinking INTEGER NOT NULL DEFAULT 0, has_tool_use INTEGER NOT NULL DEFAULT 0,
    content_length INTEGER NOT NULL DEFAULT 0, UNIQUE(session_id, ordinal));
CREATE INDEX idx_sessions_ended ON sessions(ended_at DESC, id);
CREATE INDEX idx_sessions_project ON sessions(project);
CREATE INDEX idx_messages_session_ordinal ON messages(session_id, ordinal);
CREATE INDEX idx_messages_session_role ON messages(session_id, role);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

# internal/db/search.go's query at aea2eb12 (no project filter, cursor 0).
AV_SEARCH = """
SELECT m.session_id, s.project, m.ordinal, m.role, m.timestamp,
    snippet(messages_fts, 0, '<mark>', '</mark>', '...', 32) as snippet, rank
FROM messages_fts
JOIN messages m ON messages_fts.rowid = m.id
JOIN sessions s ON m.session_id = s.id
WHERE messages_fts MATCH ?
ORDER BY rank
LIMIT ? OFFSET ?"""

AV_SYSTEM = ("This session is being continued", "[Request interrupted", "<task-notification>",
             "<command-message>", "<command-name>", "<local-command-", "Stop hook feedback:")


def av_content(content):
    """A record's content as agentsview's ExtractTextContent makes it: text, and whether it has tool results."""
    if isinstance(content, str):
        return content, False
    parts, results = [], False
    for b in content if isinstance(content, list) else []:
        t = b.get("type")
        if t == "text" and b.get("text"):
            parts.append(b["text"])
        elif t == "thinking" and b.get("thinking"):
            parts.append("[Thinking]\n" + b["thinking"] + "\n[/Thinking]")
        elif t == "tool_use":
            name, inp = b.get("name", ""), b.get("input") or {}
            if name == "Bash":
                desc = inp.get("description", "")
                parts.append((f"[Bash: {desc}]" if desc else "[Bash]") + "\n$ " + inp.get("command", ""))
            else:
                parts.append(f"[Tool: {name}]")
        elif t == "tool_result" and b.get("tool_use_id"):
            results = True
    return "\n".join(parts), results


def av_db(projects):
    db = os.path.join(args.work, "agentsview-aea2eb12-2000x30.db")
    if os.path.exists(db):
        return db
    print(f"storing the corpus in agentsview's schema in {db} ...", flush=True)
    con = sqlite3.connect(db + ".part")
    con.executescript("PRAGMA journal_mode=WAL;" + AV_SCHEMA)
    with con:
        for d, _, files in os.walk(projects):
            for f in sorted(files):
                if not f.endswith(".jsonl"):
                    continue
                sid, msgs = f[:-6], []
                for line in open(os.path.join(d, f), encoding="utf-8"):
                    r = json.loads(line)
                    kind = r.get("type")
                    if kind not in ("user", "assistant") or (kind == "user" and (r.get("isMeta") or r.get("isCompactSummary"))):
                        continue
                    text, results = av_content((r.get("message") or {}).get("content"))
                    if not text.strip() and not results:
                        continue
                    if kind == "user" and text.strip().startswith(AV_SYSTEM):
                        continue
                    msgs.append((sid, len(msgs), kind, text, r.get("timestamp"), len(text)))
                first = next((m[3] for m in msgs if m[2] == "user"), "")
                con.execute("INSERT INTO sessions (id, project, first_message, started_at, ended_at, message_count, file_path) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)", (sid, os.path.basename(d), first[:300],
                                                               msgs[0][4] if msgs else None, msgs[-1][4] if msgs else None,
                                                               len(msgs), os.path.join(d, f)))
                con.executemany("INSERT INTO messages (session_id, ordinal, role, content, timestamp, content_length) "
                                "VALUES (?, ?, ?, ?, ?, ?)", msgs)
    con.close()
    os.rename(db + ".part", db)
    for ext in ("-wal", "-shm"):
        if os.path.exists(db + ".part" + ext):
            os.rename(db + ".part" + ext, db + ext)
    return db


def time_agentsview(db):
    """The median ms of REPS searches of each word, and its hits, on one connection (a server's)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.execute("PRAGMA mmap_size=268435456")
    con.execute("PRAGMA cache_size=-64000")
    out = {}
    for w in words:
        hits = len(con.execute(AV_SEARCH, (w, 51, 0)).fetchall())
        took = []
        for _ in range(args.reps):
            t = time.perf_counter()
            con.execute(AV_SEARCH, (w, 51, 0)).fetchall()
            took.append(time.perf_counter() - t)
        out[w] = (statistics.median(took) * 1000, min(hits, 50))
    con.close()
    return out


def time_tine(db):
    """The median ms of REPS searches of each word, and its hits, from BenchmarkSearchLibrary."""
    env = dict(os.environ, TINE_BENCH_SEARCH_DB=db, TINE_BENCH_SEARCH_WORDS=",".join(words))
    p = subprocess.run(["go", "test", "-run", "^$", "-bench", "SearchLibrary", "-benchtime", f"{args.reps}x",
                        "-count", "1", "./store/"], cwd=repo, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"go test failed: {p.stdout[-2000:]}{p.stderr[-2000:]}")
    out = {}
    for line in p.stdout.splitlines():
        m = re.match(r"BenchmarkSearchLibrary/(\S+?)(-\d+)?\s", line)
        if m:
            hits = float(re.search(r"([\d.]+) hits", line).group(1))
            p50 = float(re.search(r"([\d.]+) p50-µs", line).group(1))
            out[m.group(1)] = (p50 / 1000, int(hits))
    if set(out) != set(words):
        sys.exit(f"go test printed no figures for {set(words) - set(out)}:\n{p.stdout}")
    return out


projects = corpus()
tdb, adb = tine_db(projects), av_db(projects)
subprocess.run(["go", "test", "-run", "^$", "-count", "1", "./store/"], cwd=repo, check=True,
               stdout=subprocess.DEVNULL)  # built once, before the rounds
runs = {"tine": [], "agentsview": []}
for r in range(args.rounds):
    order = [("tine", time_tine, tdb), ("agentsview", time_agentsview, adb)]
    if r % 2:
        order.reverse()
    for name, fn, db in order:
        runs[name].append(fn(db))
    print(f"round {r + 1}: " + "  ".join(f"{n} {w} {runs[n][-1][w][0]:.3f} ms ({runs[n][-1][w][1]} hits)"
                                         for n in runs for w in words), flush=True)
try:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
except OSError:
    load = "?"
print(f"\nmedians of {args.rounds} rounds of {args.reps} searches (top 50; load average {load}):")
med = {n: {w: statistics.median(rd[w][0] for rd in runs[n]) for w in words} for n in runs}
for w in words:
    t, a = med["tine"][w], med["agentsview"][w]
    print(f"  {w:>10}: tine {t:.3f} ms, agentsview {a:.3f} ms: agentsview/tine {a / t:.1f}x")
common, rare = words[0], words[-1]
t, a = med["tine"][common], med["agentsview"][common]
print(f"goal, common word: <= 25 ms and 3x agentsview: {'met' if t <= 25 and a / t >= 3 else 'NOT met'}")
print(f"goal, rare word: < 0.5 ms: {'met' if med['tine'][rare] < 0.5 else 'NOT met'}")
