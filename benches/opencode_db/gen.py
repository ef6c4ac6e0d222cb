"""An opencode.db in opencode's schema of N sessions of 5 messages (a user prompt, four failing
test runs), the last 5 active within the hour before --now 1796001120, the others a month old;
ids in opencode's ascending shape. Usage: gen.py N OUT.db (run from the repository root)."""
import json, random, sqlite3, sys

N = int(sys.argv[1]); out = sys.argv[2]
random.seed(N)
NOW_MS = 1796001120 * 1000
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
cnt = [0]
def oid(prefix, ms):
    cnt[0] += 1
    v = (ms * 0x1000 + cnt[0]) & 0xFFFFFFFFFFFF
    return f"{prefix}_{v:012x}" + "".join(random.choice(B62) for _ in range(14))
con = sqlite3.connect(out)
con.executescript(open("fixtures/opencode/db_schema.sql").read())
con.execute("PRAGMA synchronous=OFF")
for s in range(N):
    active = s >= N - 5
    start = NOW_MS - 600_000 + s if active else NOW_MS - 30 * 86400_000 + s * 1000
    sid = f"ses_{s:08d}" + "A" * 18
    t = start
    msgs = []
    uid = oid("msg", t)
    msgs.append((uid, t, {"role": "user", "time": {"created": t}, "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}}, [(oid("prt", t), {"type": "text", "text": "go on"})]))
    for i in range(4):
        t += 1000
        mid = oid("msg", t)
        part = {"type": "tool", "tool": "bash", "callID": oid("call", t), "state": {"status": "completed", "input": {"command": "cd /p && cargo test"}, "output": "FAILED", "title": "bash", "metadata": {"exit": 101}, "time": {"start": t + 1, "end": t + 250}}}
        msgs.append((mid, t, {"role": "assistant", "parentID": uid, "time": {"created": t, "completed": t + 500}, "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build", "agent": "build", "path": {"cwd": "/p", "root": "/p"}, "cost": 0, "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}, "finish": "tool-calls"}, [(oid("prt", t), part)]))
    con.execute("INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) VALUES (?, 'global', 'x', '/p', 'bench', '1.18.33', ?, ?)", (sid, start, t))
    for mid, mt, data, parts in msgs:
        con.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?,?,?,?,?)", (mid, sid, mt, mt, json.dumps(data)))
        for pid, pdata in parts:
            con.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?,?,?,?,?,?)", (pid, mid, sid, mt, mt, json.dumps(pdata)))
con.commit()
