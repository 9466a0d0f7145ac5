#!/usr/bin/env python3
"""What a periodic Argo CD resync costs when nothing changed: CPU seconds per listing and bytes written.

A fake Argo CD API on loopback serves a listing of N Applications (about 9.6 KB each, the objects the listing's
`fields` return, as in benches/memory.py). It honours `fields` as Argo CD does for `status.reconciledAt`, the one
field that moves when nothing changes (on every reconcile): when asked for, each listing has a new one. Herald (a fresh SQLite store, `resync_interval` 10 s, the shortest allowed)
lists it at start (every Application is new: stored) and then every 10 s (every Application unchanged). The script
reads the process's CPU time (/proc/PID/stat, user + system) and the bytes it caused to be written to disk
(/proc/PID/io write_bytes) around each listing, from the moment Herald asks for the listing until it logs
"Argo CD resync done" (read from its log, so that nothing polls Herald while it works), and prints them.

    cargo build --release && python3 benches/resync.py target/release/herald [--apps 10000,50000] [--resyncs 3]

Standard library only. Prints figures; asserts nothing about them (see docs/benchmarks.md for the goals).
"""

import argparse
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory import free_port, send_file, write_listing  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def written_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def write_listings(work, n):
    """Three listings of the same N Applications: two that differ only in `status.reconciledAt`, one without it."""

    def reconciled(at):
        def edit(app):
            if at is None:
                del app["status"]["reconciledAt"]
            else:
                app["status"]["reconciledAt"] = at
            return app

        return edit

    paths = []
    for k, at in enumerate(("2026-12-01T09:00:00Z", "2026-12-01T09:03:00Z", None)):
        path = os.path.join(work, f"listing-{k}.json")
        write_listing(path, n, reconciled(at))
        paths.append(path)
    return paths


class Fake:
    """GET /api/v1/applications: the listings in turn, each sent in 64 KB writes; notes when each was asked for."""

    def __init__(self, paths):
        self.paths, self.asked = paths, []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                route = self.path.split("?")[0]
                if route == "/api/v1/projects":
                    body = b'{"items": []}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if route != "/api/v1/applications":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                fake.asked.append(time.time())
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                fields = ",".join(query.get("fields", [])).split(",")
                if query.get("fields") and "items.status.reconciledAt" not in fields:
                    path = fake.paths[2]
                else:
                    path = fake.paths[(len(fake.asked) - 1) % 2]
                send_file(self, path)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def listings(binary, env, work, fake, count):
    """Starts Herald and measures its first `count` listings: [(cpu seconds, bytes written)]."""
    proc = subprocess.Popen([binary, "serve"], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    done = []  # (cpu, written) when each listing was done

    def read_log():
        for line in proc.stdout:
            if b"Argo CD resync done" in line:
                done.append((cpu_seconds(proc.pid), written_bytes(proc.pid)))

    threading.Thread(target=read_log, daemon=True).start()
    rows, asked = [], len(fake.asked)
    try:
        deadline = time.time() + 900
        while len(rows) < count and time.time() < deadline and proc.poll() is None:
            k = len(rows)
            while len(fake.asked) <= asked + k and time.time() < deadline and proc.poll() is None:
                time.sleep(0.002)
            start_cpu, start_io = cpu_seconds(proc.pid), written_bytes(proc.pid)
            while len(done) <= k and time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            if len(done) > k:
                rows.append((done[k][0] - start_cpu, done[k][1] - start_io))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return rows


def run(binary, n, resyncs):
    work = tempfile.mkdtemp(prefix="herald-resync-")
    paths = write_listings(work, n)
    size = os.path.getsize(paths[0])
    fake = Fake(paths)
    port = free_port()
    env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{port}", HERALD__STORAGE__URL=f"sqlite://{work}/h.db",
               HERALD__LOG__LEVEL="info", HERALD__LOG__FORMAT="text",
               HERALD__ARGOCD__API__URL=f"http://127.0.0.1:{fake.server.server_port}",
               HERALD__ARGOCD__API__TOKEN="bench-read-only-token", HERALD__ARGOCD__API__RESYNC_INTERVAL="10s")
    try:
        rows = listings(binary, env, work, fake, resyncs + 1)
        # The same store after a restart: what was remembered of the listing is gone; the store is the same.
        after = listings(binary, env, work, fake, 1)
        print(f"{n:,} Applications ({size / 1e6:.0f} MB a listing):")
        named = [("first listing (all new)", r) for r in rows[:1]]
        named += [(f"resync {i} (nothing changed)", r) for i, r in enumerate(rows[1:], 1)]
        named += [("first after a restart", r) for r in after]
        for what, (cpu, io) in named:
            print(f"  {what:28} CPU {cpu:6.2f} s   ({cpu / n * 1e6:6.1f} µs an Application)   "
                  f"written {io / 1e6:7.1f} MB")
        if len(rows) < resyncs + 1 or not after:
            print(f"  (only {len(rows) + len(after)} listings counted before the deadline)")
    finally:
        fake.server.shutdown()
        for p in paths:
            os.remove(p)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--apps", default="10000,50000")
    parser.add_argument("--resyncs", type=int, default=3)
    args = parser.parse_args()
    for n in (int(x) for x in args.apps.split(",")):
        run(os.path.abspath(args.binary), n, args.resyncs)


if __name__ == "__main__":
    main()
