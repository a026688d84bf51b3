#!/usr/bin/env python3
"""Generate a Gemini CLI or Qwen Code history for import benchmarks.

The template is one session file the real CLI wrote against the scripted
model server (fork_overhead.py --save-templates makes one):
gemini-0.61.0-template.jsonl and qwen-0.24.4-template.jsonl here, each a
prompt, a shell call the CLI ran, its result and an answer. Each generated
session is the template's head (Gemini CLI's header and context) and its
turn repeated TURNS times, with its own session id, record ids, tool call
ids, prompts and times (sessions ten minutes apart, turns a minute apart),
in the file and folder the CLI would have written it to, under HOME:

  gemini: HOME/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl
          (+ the project folder's .project_root and ~/.gemini/projects.json)
  qwen:   HOME/.qwen/projects/<cwd, non-alphanumerics as ->/chats/<sessionId>.jsonl

<project> and <cwd> are the template's. Import it with
`HOME=HOME tine import` (the agent's default folders) or by path.

usage: gen_agent_corpus.py gemini|qwen TEMPLATE.jsonl HOME SESSIONS TURNS
"""
import datetime, json, os, random, re, sys, uuid

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


def main():
    agent, tpl, home, nsess, nturns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    if agent not in ("gemini", "qwen"):
        sys.exit("agent is gemini or qwen")
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
