#!/usr/bin/env python3
"""Generate a Gemini CLI, Qwen Code or opencode history for import benchmarks.

The template is one session the real CLI wrote against the scripted model
server (fork_overhead.py --save-templates makes one):
gemini-0.61.0-template.jsonl, qwen-0.24.4-template.jsonl and (a dump of
opencode's SQLite database: its schema and the session's rows)
opencode-1.18.33-template.json here, each a prompt, a shell call the CLI
ran, its result and an answer. Each generated session is the template's
head (Gemini CLI's header and context) and its turn repeated TURNS times,
with its own session id, record ids, tool call ids, prompts and times
(sessions ten minutes apart, turns a minute apart), where the CLI would
have written it under HOME:

  gemini:   HOME/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl
            (+ the project folder's .project_root and ~/.gemini/projects.json)
  qwen:     HOME/.qwen/projects/<cwd, non-alphanumerics as ->/chats/<sessionId>.jsonl
  opencode: HOME/.local/share/opencode/opencode.db (made anew), one session row
            each, with its messages and parts

<project> and <cwd> are the template's. Import it with
`HOME=HOME tine import` (the agent's default places) or by path.

usage: gen_agent_corpus.py gemini|qwen|opencode TEMPLATE HOME SESSIONS TURNS
"""
import datetime, json, os, random, re, sqlite3, sys, uuid

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The scripted model server's ids: tool calls (call_tine0001_0, inside
# Gemini CLI's run_shell_command__call_tine0001_0) and responses.
CALL = re.compile(r"(?:call_|chatcmpl-)tine\d+(?:_\d+)?")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def is_prompt(agent, r):
    """A person's prompt record: where a turn starts."""
    if agent == "qwen":
        return r.get("type") == "user" and r.get("provenance") == "real_user"
    c = r.get("content")
    return r.get("type") == "user" and isinstance(c, list) and bool(c) and "text" in c[0] \
        and not c[0]["text"].startswith("<session_context>")


def set_prompt(agent, r, text):
    if agent == "qwen":
        r["message"]["parts"] = [{"text": text}]
    else:
        r["content"] = [{"text": text}]


def parse_time(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")


def shift_times(v, ms):
    """v (opencode's JSON data) with every time in a "time" object moved by ms."""
    if isinstance(v, dict):
        return {k: ({tk: tv + ms if isinstance(tv, int) else tv for tk, tv in x.items()} if k == "time" and isinstance(x, dict)
                    else shift_times(x, ms)) for k, x in v.items()}
    if isinstance(v, list):
        return [shift_times(x, ms) for x in v]
    return v


def opencode(tpl, home, nsess, nturns):
    """opencode keeps sessions in a SQLite database: the template is a dump
    of one (fork_overhead.py --save-templates), its schema and the rows of
    one session, whose messages are repeated TURNS times."""
    d = json.load(open(tpl))
    if len(d["session"]) != 1:
        sys.exit("the template holds %d sessions, not one" % len(d["session"]))
    db = os.path.join(home, ".local", "share", "opencode", "opencode.db")
    os.makedirs(os.path.dirname(db), exist_ok=True)
    if os.path.exists(db):
        os.remove(db)
    c = sqlite3.connect(db)
    for stmt in d["schema"]:
        c.execute(stmt)

    def insert(table, row):
        c.execute("INSERT INTO %s (%s) VALUES (%s)" % (table, ",".join(row), ",".join("?" * len(row))), list(row.values()))

    for r in d["project"]:
        insert("project", r)
    sess = d["session"][0]
    t0 = sess["time_created"]
    prompt = next(p for p in d["part"] if p["message_id"] == d["message"][0]["id"] and json.loads(p["data"]).get("type") == "text")
    # Ids as opencode makes them: a prefix, 12 hex digits (ascending for
    # messages and parts, descending for sessions) and 14 random letters.
    seq = [0]
    abc = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    def new_id(prefix, down=False):
        seq[0] += 1
        n = (0xFFFFFFFFFFFF - seq[0] * 0x1000) if down else 0x200000000000 + seq[0] * 0x1000
        return "%s_%012x%s" % (prefix, n, "".join(random.choice(abc) for _ in range(14)))
    random.seed(7)
    rows = 0
    for s in range(nsess):
        sid = new_id("ses", down=True)
        base = -600000 * (nsess - s)  # ms: sessions ten minutes apart
        row = dict(sess, id=sid, slug="bench-%d" % s, title="session %d: please look at the failing test" % s,
                   time_created=t0 + base, time_updated=sess["time_updated"] + base + 60000 * (nturns - 1))
        insert("session", row)
        for t in range(nturns):
            ms = base + 60000 * t
            remap = {sess["id"]: sid}
            for m in d["message"]:
                remap[m["id"]] = new_id("msg")
            for p in d["part"]:
                remap[p["id"]] = new_id("prt")
            def rekey(text):
                text = re.sub(r"(?:ses|msg|prt)_[0-9a-f]{12}[0-9A-Za-z]{14}", lambda m: remap.get(m.group(), m.group()), text)
                return CALL.sub(lambda m: remap.setdefault(m.group(), "call_" + uuid.uuid4().hex[:16]), text)
            for table in ("message", "part"):
                for r in d[table]:
                    data = shift_times(json.loads(rekey(r["data"])), ms)
                    if r is prompt:
                        data["text"] = "turn %d of session %d: %s" % (t, s, "please look at the failing test " * random.randint(1, 6))
                    r2 = dict(r, id=remap[r["id"]], session_id=sid, time_created=r["time_created"] + ms, time_updated=r["time_updated"] + ms,
                              data=json.dumps(data, ensure_ascii=False, separators=(",", ":")))
                    if table == "part":
                        r2["message_id"] = remap[r["message_id"]]
                    insert(table, r2)
                    rows += 1
    c.commit()
    c.close()
    print("agent=opencode sessions=%d turns=%d rows=%d bytes=%d db=%s" % (nsess, nturns, rows, os.path.getsize(db), db))


def main():
    agent, tpl, home, nsess, nturns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    if agent == "opencode":
        return opencode(tpl, home, nsess, nturns)
    if agent not in ("gemini", "qwen"):
        sys.exit("agent is gemini, qwen or opencode")
    recs = [json.loads(l) for l in open(tpl) if l.strip()]
    start = next(i for i, r in enumerate(recs) if is_prompt(agent, r))
    head, turn = recs[:start], recs[start:]
    sid0 = recs[0]["sessionId"]
    t0 = parse_time(STAMP.search(json.dumps(recs[0])).group())
    text = open(tpl).read()
    if agent == "gemini":
        cwd = re.search(r"\*\*Workspace Directories:\*\*\\n  - ([^\\]+)", text).group(1)
        tmp = re.search(r"The project's temporary directory is: ([^\\]+)", text).group(1)
        project = os.path.join(home, ".gemini", "tmp", os.path.basename(tmp))
        os.makedirs(os.path.join(project, "chats"), exist_ok=True)
        with open(os.path.join(project, ".project_root"), "w") as f:
            f.write(cwd)
        with open(os.path.join(home, ".gemini", "projects.json"), "w") as f:
            json.dump({"projects": {cwd: os.path.basename(tmp)}}, f, indent=2)
        chats = os.path.join(project, "chats")
    else:
        cwd = recs[0]["cwd"]
        chats = os.path.join(home, ".qwen", "projects", re.sub(r"[^A-Za-z0-9]", "-", cwd), "chats")
        os.makedirs(chats, exist_ok=True)

    random.seed(7)
    total = 0
    for s in range(nsess):
        sid = str(uuid.uuid4())
        base = t0 - datetime.timedelta(minutes=10 * (nsess - s))
        lines, last = [], None

        def emit(r, remap, shift):
            """r with the ids in remap (new ones added) and its times moved by shift."""
            nonlocal last
            def key(m):
                k = m.group()
                if k not in remap:
                    if UUID.fullmatch(k):
                        remap[k] = str(uuid.uuid4())
                    else:
                        remap[k] = ("chatcmpl-" if k.startswith("chatcmpl") else "call_") + uuid.uuid4().hex[:16]
                return remap[k]
            text = json.dumps(r, ensure_ascii=False, separators=(",", ":"))
            text = CALL.sub(key, UUID.sub(key, text))
            text = STAMP.sub(lambda m: (parse_time(m.group()) + shift).isoformat(timespec="milliseconds") + "Z", text)
            r = json.loads(text)
            if agent == "qwen" and "uuid" in r:
                r["parentUuid"] = last  # one chain through the turns
                last = r["uuid"]
            lines.append(json.dumps(r, ensure_ascii=False, separators=(",", ":")))

        for r in head:
            emit(r, {sid0: sid}, base - t0)
        for t in range(nturns):
            remap = {sid0: sid}  # the template's ids, new in every turn
            for r in turn:
                r = json.loads(json.dumps(r))
                if is_prompt(agent, r):
                    set_prompt(agent, r, "turn %d of session %d: %s" % (t, s, "please look at the failing test " * random.randint(1, 6)))
                emit(r, remap, base - t0 + datetime.timedelta(minutes=t))
        if agent == "gemini":
            name = "session-%s-%s.jsonl" % (base.strftime("%Y-%m-%dT%H-%M"), sid[:8])
        else:
            name = sid + ".jsonl"
        with open(os.path.join(chats, name), "w") as f:
            f.write("\n".join(lines) + "\n")
        total += sum(len(l.encode()) + 1 for l in lines)
    print("agent=%s sessions=%d turns=%d bytes=%d folder=%s" % (agent, nsess, nturns, total, chats))


if __name__ == "__main__":
    main()
