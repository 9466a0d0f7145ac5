#!/usr/bin/env python3
"""What one Application may weigh (issue 24 item 5), measured on a running Herald:

1. N Applications whose bodies carry a 4 MB operation message, N with 1,200 labels of 3 KB, N with 30,000
   resources waiting to be pruned (each body just under the 4 MiB body limit);
2. then `GET /v1/apps?limit=1000` (following `next`), `/v1/prune-pending` and the status page.

Prints the peak RSS (VmHWM), each answer's size and time, and the store's size on disk (raw bodies are kept for
`storage.raw_retention`, and are most of it). Fails (exit 1) when an answer exceeds its bound. Standard library only.

    cargo build --release && python3 benches/caps.py target/release/herald [N, default 100]
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The bounds the answers keep (src/api/apps.rs), with room for the envelope of the answer.
MAX_APPS_PAGE = 8 * 1024 * 1024 + 1024 * 1024
MAX_SMALL_ANSWER = 2 * 1024 * 1024


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_field(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def request(url, body=None):
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    started = time.time()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read(), time.time() - started
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.time() - started


def body(name, message="", labels=None, resources=None):
    meta = {"name": name, "namespace": "argocd", "labels": {"team": "payments", **(labels or {})}}
    status = {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}, "resources": resources or []}
    if message:
        status["operationState"] = {"phase": "Failed", "message": message, "startedAt": "2026-01-01T00:00:00Z"}
    app = {"kind": "Application", "metadata": meta, "spec": {"project": "default"}, "status": status}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"timestamp": now, "app": app}).encode()


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    binary = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 100
    work = tempfile.mkdtemp(prefix="herald-caps-")
    port = free_port()
    env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{port}", HERALD__STORAGE__URL=f"sqlite://{work}/h.db",
               HERALD__LOG__LEVEL="warn")
    proc = subprocess.Popen([binary, "serve"], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    failed = False
    try:
        for _ in range(100):
            try:
                if request(base + "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        message = "x" * 4_000_000
        labels = {f"l{k:04}": "v" * 3000 for k in range(1200)}
        resources = [{"version": "v1", "kind": "ConfigMap", "namespace": "ns", "name": f"cm-{k:05}",
                      "status": "OutOfSync", "requiresPruning": True} for k in range(30_000)]
        kinds = [("message", {"message": message}), ("labels", {"labels": labels}),
                 ("resources", {"resources": resources})]
        answers = {}
        started = time.time()
        for kind, fields in kinds:
            for i in range(n):
                status = request(base + "/v1/argocd/events", body(f"{kind}-{i}", **fields))[0]
                answers[status] = answers.get(status, 0) + 1
        print(f"{3 * n} bodies of about 4 MB in {time.time() - started:.0f} s: answers {answers}; "
              f"peak RSS {status_field(proc.pid, 'VmHWM'):.0f} MB, now {status_field(proc.pid, 'VmRSS'):.0f} MB")

        path, pages, items, largest, took = "/v1/apps?limit=1000", 0, 0, 0, 0.0
        while path:
            status, text, secs = request(base + path)
            page = json.loads(text)
            pages, items, largest, took = pages + 1, items + page["count"], max(largest, len(text)), took + secs
            path = page.get("next")
        print(f"GET /v1/apps?limit=1000 and its next pages: {items} Applications in {pages} pages, the largest "
              f"{largest / 1e6:.1f} MB, {took:.2f} s in all")
        failed |= largest > MAX_APPS_PAGE
        for path in ["/v1/prune-pending", "/"]:
            status, text, secs = request(base + path)
            print(f"GET {path}: {status}, {len(text) / 1e6:.2f} MB in {secs:.2f} s")
            failed |= len(text) > MAX_SMALL_ANSWER
        size = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work))
        print(f"peak RSS {status_field(proc.pid, 'VmHWM'):.0f} MB; store on disk {size / 1e6:.0f} MB")
    finally:
        proc.terminate()
        proc.wait()
    if failed:
        print("an answer exceeded its bound")
        sys.exit(1)


if __name__ == "__main__":
    main()
