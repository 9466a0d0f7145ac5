#!/usr/bin/env python3
"""What a periodic Argo CD resync costs when nothing changed: CPU seconds per listing and bytes written.

A fake Argo CD API on loopback serves a listing of N Applications (about 9.6 KB each, the objects the listing's
`fields` return, as in benches/memory.py). Each listing is a new `status.reconciledAt` (Argo CD moves it on every
reconcile) and nothing else changes. Herald (a fresh SQLite store, `resync_interval` 10 s, the shortest allowed)
lists it at start (every Application is new: stored) and then every 10 s (every Application unchanged). The script
reads the process's CPU time (/proc/PID/stat, user + system) and the bytes it caused to be written to disk
(/proc/PID/io write_bytes) around each listing, from the moment Herald asks for the listing until
`herald_argocd_resyncs_total{outcome="ok"}` counts it, and prints them.

    cargo build --release && python3 benches/resync.py target/release/herald [--apps 10000,50000] [--resyncs 3]

Standard library only. Prints figures; asserts nothing about them (see docs/benchmarks.md for the goals).
"""

import argparse
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory import free_port, listed_application, request  # noqa: E402

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
    """Two listings of the same N Applications that differ only in `status.reconciledAt`."""
    import json

    paths = []
    for k, at in enumerate(("2026-12-01T09:00:00Z", "2026-12-01T09:03:00Z")):
        path = os.path.join(work, f"listing-{k}.json")
        with open(path, "w") as f:
            f.write('{"metadata": {"resourceVersion": "123456"}, "items": [')
            for i in range(n):
                if i:
                    f.write(",")
                app = listed_application(i)
                app["status"]["reconciledAt"] = at
                f.write(json.dumps(app))
            f.write("]}")
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
                path = fake.paths[(len(fake.asked) - 1) % len(fake.paths)]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(os.path.getsize(path)))
                self.end_headers()
                with open(path, "rb") as f:
                    while chunk := f.read(64 * 1024):
                        try:
                            self.wfile.write(chunk)
                        except (BrokenPipeError, ConnectionResetError):
                            return

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def resyncs_ok(base):
    status, body = request(base + "/metrics")
    if status != 200:
        return None
    for line in body.decode().splitlines():
        if line.startswith("herald_argocd_resyncs_total{") and 'outcome="ok"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def run(binary, n, resyncs):
    work = tempfile.mkdtemp(prefix="herald-resync-")
    paths = write_listings(work, n)
    size = os.path.getsize(paths[0])
    fake = Fake(paths)
    port = free_port()
    env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{port}", HERALD__STORAGE__URL=f"sqlite://{work}/h.db",
               HERALD__LOG__LEVEL="warn", HERALD__ARGOCD__API__URL=f"http://127.0.0.1:{fake.server.server_port}",
               HERALD__ARGOCD__API__TOKEN="bench-read-only-token", HERALD__ARGOCD__API__RESYNC_INTERVAL="10s")
    proc = subprocess.Popen([binary, "serve"], cwd=work, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        seen, deadline = 0, time.time() + 900
        while len(fake.asked) == 0 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        start_cpu, start_io = cpu_seconds(proc.pid), written_bytes(proc.pid)
        while seen < resyncs + 1 and time.time() < deadline and proc.poll() is None:
            ok = resyncs_ok(base)
            if ok is not None and ok > seen:
                cpu, io = cpu_seconds(proc.pid), written_bytes(proc.pid)
                rows.append((cpu - start_cpu, io - start_io))
                seen = ok
                # Wait for the next listing to be asked for, then measure from there.
                while len(fake.asked) <= seen and time.time() < deadline and proc.poll() is None:
                    time.sleep(0.01)
                start_cpu, start_io = cpu_seconds(proc.pid), written_bytes(proc.pid)
            else:
                time.sleep(0.05)
        print(f"{n:,} Applications ({size / 1e6:.0f} MB a listing):")
        for i, (cpu, io) in enumerate(rows):
            what = "first listing (all new)" if i == 0 else f"resync {i} (nothing changed)"
            print(f"  {what:28} CPU {cpu:6.2f} s   ({cpu / n * 1e6:6.1f} µs an Application)   "
                  f"written {io / 1e6:7.1f} MB")
        if len(rows) < resyncs + 1:
            print(f"  (only {len(rows)} listings counted before the deadline)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        fake.server.shutdown()
        for p in paths:
            os.remove(p)


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
