#!/usr/bin/env python3
"""What C SQLite takes to write what a tine import wrote.

Reads the runs, messages, parts and search text of a database `tine import`
made, and writes the very same rows with Python's sqlite3 (C SQLite) into a
fresh database of the same schema, in one transaction, WAL, foreign keys
on, as tine's store does; prints the CPU and wall time of that write. It is
a floor for the store's writer: what the rows cost in C, without parsing
anything. (SQLite before 3.43 lacks the search table's contentless_delete
option, so it is dropped here when the library is older.)

usage: sqlite_floor.py TINE.db [OUT.db]
"""
import os, sqlite3, sys, tempfile, time

if len(sys.argv) < 2:
    sys.exit(__doc__)
src = sqlite3.connect("file:%s?mode=ro" % os.path.abspath(sys.argv[1]), uri=True)
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(tempfile.mkdtemp(prefix="sqlite-floor-"), "floor.db")
schema = [r[0] for r in src.execute(
    "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name IN ('runs', 'messages', 'parts', 'message_fts') "
    "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END")]
runs = src.execute("SELECT * FROM runs").fetchall()
msgs = src.execute("SELECT * FROM messages").fetchall()
parts = src.execute("SELECT * FROM parts").fetchall()
bodies = {}
for mid, text, inp in src.execute("SELECT message_id, text, tool_input FROM parts ORDER BY message_id, idx"):
    bodies.setdefault(mid, []).append(text or inp or "")
fts = [(k, "\n".join(v)) for k, v in bodies.items()]
print("%d runs, %d messages, %d parts, %d search rows; SQLite %s" % (len(runs), len(msgs), len(parts), len(fts), sqlite3.sqlite_version))

for suffix in ("", "-wal", "-shm"):
    if os.path.exists(out + suffix):
        os.remove(out + suffix)
dst = sqlite3.connect(out, isolation_level=None)
dst.execute("PRAGMA journal_mode = WAL")
dst.execute("PRAGMA synchronous = NORMAL")
dst.execute("PRAGMA foreign_keys = 1")
old = tuple(map(int, sqlite3.sqlite_version.split("."))) < (3, 43)
for sql in schema:
    dst.execute(sql.replace("contentless_delete = 1,", "") if old else sql)

values = lambda n: "(" + ", ".join("?" * n) + ")"
cpu, wall = time.process_time(), time.time()
dst.execute("BEGIN")
dst.executemany("INSERT INTO runs VALUES " + values(len(runs[0])), runs)
dst.executemany("INSERT INTO messages VALUES " + values(len(msgs[0])), msgs)
dst.executemany("INSERT INTO parts VALUES " + values(len(parts[0])), parts)
dst.executemany("INSERT INTO message_fts (rowid, body) VALUES (?, ?)", fts)
dst.execute("COMMIT")
print("C SQLite wrote them in %.2f s of CPU, %.2f s wall (%s)" % (time.process_time() - cpu, time.time() - wall, out))
