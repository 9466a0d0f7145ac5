#!/usr/bin/env python3
"""What a page of the read API costs when the store is large (issue: reads that got dearer as the store grew).

1. Starts the given Herald binary on a free loopback port with a fresh SQLite store, a webhook receiver (a small
   local server that answers 200) and `sync_failed` firing at once, and sends failed syncs for 200 Applications, so
   Herald opens real incidents and delivers real notifications (each opening and resolving).
2. Stops it and copies those rows with SQL until the store holds ROWS incidents and ROWS outbox rows (ids and
   Application names varied; the payloads are Herald's own), then starts Herald again on that store.
3. Reads `GET /v1/incidents`, `/v1/incidents?state=firing`, `/v1/outbox`, `/v1/outbox?state=delivered` and
   `/v1/apps`: the first page (the default page size) and PAGES pages deep by following `next`, one request at a
   time, ROUNDS times over, and prints per endpoint the wall time per page (p50 / max) and Herald's CPU per page
   (from /proc), the rows and bytes per page. First it waits for Herald's start-up work to end and prints what an
   idle Herald spends on that store (its own ticks and purges).

Standard library only; prints figures, asserts nothing about them.

    cargo build --release && python3 benches/reads.py target/release/herald [--rows 100000] [--pages 20] [--rounds 5]
"""

import argparse
import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def body(name, phase, ts):
    return json.dumps({
        "timestamp": ts,
        "context": {"argocdUrl": "https://argocd.example.com", "notificationType": "herald"},
        "app": {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd", "uid": "uid-" + name, "labels": {"team": "payments"}},
            "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": name}},
            "status": {
                "sync": {"status": "OutOfSync", "revision": "0123456789abcdef0123456789abcdef01234567"},
                "health": {"status": "Healthy"},
                "operationState": {
                    "phase": phase,
                    "message": "one or more objects failed to apply, reason: the server could not find the "
                               "requested resource (CustomResourceDefinition missing)",
                    "startedAt": ts, "finishedAt": ts,
                    "operation": {"sync": {"revision": "0123456789abcdef0123456789abcdef01234567"}},
                    "syncResult": {"revision": "0123456789abcdef0123456789abcdef01234567"},
                },
            },
        },
    })


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Herald:
    def __init__(self, binary, config):
        self.port = free_port()
        env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{self.port}", HERALD_CONFIG=config)
        self.proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(self.base + "/readyz", timeout=1).read()
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("Herald did not become ready")

    def post(self, data):
        req = urllib.request.Request(self.base + "/v1/argocd/events", data=data.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        return urllib.request.urlopen(req, timeout=10).status

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=60) as r:
            return r.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def grow(db, table, rows):
    """Copies the table's rows (ids and names varied) until it holds `rows`."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    have = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    if have == 0:
        raise SystemExit(f"no {table} rows to copy: did the notifications go out?")
    others = [c for c in cols if c != "id"]
    vary = {"name": "name || '-' || (SELECT COUNT(*) FROM {t})", "fingerprint": "fingerprint || '#' || (SELECT COUNT(*) FROM {t})",
            "idempotency_key": "idempotency_key || '#' || (SELECT COUNT(*) FROM {t})"}
    while have < rows:
        n = min(have, rows - have)
        select = ", ".join(vary[c].format(t=table) if c in vary else c for c in others)
        con.execute(f"INSERT INTO {table} ({', '.join(others)}) SELECT {select} FROM {table} ORDER BY id LIMIT {n}")
        con.commit()
        have = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    if table == "outbox":
        # Each copied delivery gets its original's payload too (kept out of the row since migration 0014): row k
        # copies row ((k - 1) mod B) + 1 of the B that Herald wrote.
        made = con.execute("SELECT COUNT(*) FROM outbox_payloads").fetchone()[0]
        con.execute("INSERT INTO outbox_payloads (outbox_id, payload_doc) SELECT o.id, p.payload_doc FROM outbox o "
                    "JOIN outbox_payloads p ON p.outbox_id = ((o.id - 1) % ?) + 1 "
                    "WHERE o.id NOT IN (SELECT outbox_id FROM outbox_payloads)", (made,))
        con.commit()
    con.close()
    return have


def make_rows(binary, config):
    """Real incidents and deliveries, made by Herald itself."""
    h = Herald(binary, config)
    apps = 200
    for i in range(apps):
        h.post(body(f"app-{i:04d}", "Failed", "2026-01-01T10:00:00Z"))
    # Half of them recover: their incidents resolve (a resolve notification each).
    for i in range(0, apps, 2):
        h.post(body(f"app-{i:04d}", "Succeeded", "2026-01-01T10:05:00Z"))
    deadline = time.time() + 60
    while time.time() < deadline:
        out = json.loads(h.get("/v1/outbox?state=pending&limit=1"))
        if out["count"] == 0:
            break
        time.sleep(0.5)
    h.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--store", help="directory of the store: made there and kept; reused when it already has one")
    args = ap.parse_args()

    hook_port = free_port()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", hook_port), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()

    work = args.store or tempfile.mkdtemp(prefix="herald-reads-")
    os.makedirs(work, exist_ok=True)
    db = os.path.join(work, "herald.db")
    config = os.path.join(work, "herald.yaml")
    with open(config, "w") as f:
        f.write(f"""
storage: {{url: "sqlite://{db}"}}
receivers: [{{name: hook, send_resolved: true, webhook: {{url: "http://127.0.0.1:{hook_port}/hook"}}}}]
teams: {{payments: {{receivers: [hook]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
log: {{level: warn}}
""")
    if not (args.store and os.path.exists(db)):
        make_rows(args.binary, config)
    incidents = grow(db, "incidents", args.rows)
    outbox = grow(db, "outbox", args.rows)
    size = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("herald.db"))
    print(f"store: {incidents} incidents, {outbox} outbox rows, {size / 1e6:.1f} MB on disk")

    h = Herald(args.binary, config)
    pid = h.proc.pid
    # Let its start-up work (the first purge, the first ticks) finish, so the pages are measured alone.
    for _ in range(20):
        c0 = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - c0 <= 0.02:
            break
    idle0 = cpu_seconds(pid)
    time.sleep(5)
    print(f"idle: {(cpu_seconds(pid) - idle0) / 5 * 1000:.0f} ms of CPU per second with no request")
    print(f"{'endpoint':44} {'rows/page':>9} {'KB/page':>8} {'p50 ms':>7} {'max ms':>7} {'CPU ms/page':>11}")
    for path in ["/v1/incidents", "/v1/incidents?state=firing", "/v1/outbox", "/v1/outbox?state=done",
                 "/v1/apps"]:
        h.get(path)  # warm the page cache and the statements
        walls, cpus, sizes, counts = [], [], [], []
        # The same walk ROUNDS times: /proc counts CPU in 10 ms ticks, so one page alone is below its resolution.
        for _ in range(args.rounds):
            url = path
            for _ in range(args.pages):
                c0, t0 = cpu_seconds(pid), time.perf_counter()
                raw = h.get(url)
                walls.append((time.perf_counter() - t0) * 1000)
                cpus.append((cpu_seconds(pid) - c0) * 1000)
                page = json.loads(raw)
                sizes.append(len(raw))
                counts.append(page.get("count", len(page.get("items", []))))
                nxt = page.get("next")
                if not nxt:
                    break
                url = nxt
        walls.sort()
        print(f"{path:44} {sum(counts) / len(counts):9.0f} {sum(sizes) / len(sizes) / 1024:8.1f} "
              f"{walls[len(walls) // 2]:7.2f} {walls[-1]:7.2f} {sum(cpus) / len(cpus):11.2f}"
              f"   ({len(walls)} pages)")
    h.stop()
    hook.shutdown()


if __name__ == "__main__":
    sys.exit(main())
