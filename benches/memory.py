#!/usr/bin/env python3
"""Peak memory of a Herald process under the two loads that used to blow it up (issue: hostile input and long uptime):

1. a burst of 50 concurrent 4 MB event bodies, three rounds;
2. 10,000 tracked Applications, then every read endpoint and the status page, 20 requests in parallel, paging through
   the lists as a client does (following `next`).

3. the Argo CD API listing (`--listing`): a small fake Argo CD API serves one listing of 10,000 and one of 50,000
   Applications (about 9.6 KB each, the size of the issue's 96 MB / 478 MB listings); a fresh Herald lists it at
   start, and the script prints the peak RSS while it reads and stores the listing, and the RSS after. Herald reads
   the listing item by item, so the peak must not grow with the listing (asserted: at most LISTING_RSS_LIMIT_MB).

4. bodies shaped to make parsing build much from few bytes (`--hostile`): four of just under 4 MB at once, each
   `status.resources: [{}, {}, …]` (about 1.3 million empty resources), then the same through
   `operationState.syncResult.resources`, then `status.conditions`, then `status.sync.revisions` of distinct short
   strings; a fresh Herald for each shape, its peak RSS printed (asserted: at most HOSTILE_RSS_LIMIT_MB for the four).

Starts the given binary on a free loopback port with a fresh SQLite store, and prints the peak RSS (VmHWM) after each
phase, the answers it got, and the store's size on disk. Standard library only.

    cargo build --release && python3 benches/memory.py target/release/herald             # phases 1 and 2
    cargo build --release && python3 benches/memory.py target/release/herald --listing   # phase 3
    cargo build --release && python3 benches/memory.py target/release/herald --hostile   # phase 4
"""

import concurrent.futures as futures
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_herald(binary, work, wait=True, **variables):
    """`binary serve` on a free loopback port with a fresh SQLite store in `work` and `variables` (HERALD__… names);
    its process and base URL, once it answers /healthz (unless `wait` is false)."""
    port = free_port()
    env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{port}", HERALD__STORAGE__URL=f"sqlite://{work}/h.db",
               HERALD__LOG__LEVEL="warn", **variables)
    proc = subprocess.Popen([binary, "serve"], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100 if wait else 0):
        if request(base + "/healthz")[0] == 200:
            break
        time.sleep(0.1)
    return proc, base


def stop_herald(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def request(url, body=None, method=None, timeout=60):
    # urllib would label a body as a form, which Herald refuses for a state change (415).
    headers = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(url, data=body, headers=headers, method=method or ("POST" if body is not None else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except Exception as e:  # connection reset while shedding, timeouts
        return f"{type(e).__name__}: {e}", b""


def envelope(name, sync="OutOfSync", health="Healthy", pad=0, resources=None):
    app = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd", "uid": f"uid-{name}", "labels": {"team": f"team-{hash(name) % 40}"}},
        "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": name}},
        "status": {"sync": {"status": sync}, "health": {"status": health}, "resources": resources or []},
    }
    if pad:
        app["metadata"]["annotations"] = {"padding": "x" * pad}
    return json.dumps({"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "app": app}).encode()


# The peak a listing of any size may cost (it was 1.88 GB for 10,000 and 5.07 GB for 50,000 when read whole).
LISTING_RSS_LIMIT_MB = 300


def listed_application(i):
    """One Application as the listing's `fields` return it, about 9.6 KB (48 resources)."""
    name = f"app-{i:05d}"
    resources = [{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": name, "name": f"worker-{r:02d}",
                  "status": "OutOfSync" if (i % 10 == 0 and r == 0) else "Synced",
                  "requiresPruning": i % 10 == 0 and r == 0,
                  "health": {"status": "Healthy"}} for r in range(48)]
    return {
        "metadata": {"name": name, "namespace": "argocd", "uid": f"uid-{name}",
                     "labels": {"team": f"team-{i % 40}"}, "annotations": {"herald.io/team": f"team-{i % 40}"}},
        "spec": {"project": "default",
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
                 "source": {"repoURL": "https://git.example.com/platform/deployments.git", "path": f"apps/{name}",
                            "targetRevision": "main"},
                 "syncPolicy": {"automated": {"prune": False, "selfHeal": True}}},
        "status": {"sync": {"status": "OutOfSync" if i % 3 == 0 else "Synced",
                            "revision": "0123456789abcdef0123456789abcdef01234567"},
                   "health": {"status": "Healthy"}, "resources": resources,
                   "reconciledAt": "2026-12-01T09:00:00Z"},
    }


def write_listing(path, n, edit=lambda app: app):
    """A listing of `n` Applications, each passed through `edit` first."""
    with open(path, "w") as f:
        f.write('{"metadata": {"resourceVersion": "123456"}, "items": [')
        for i in range(n):
            if i:
                f.write(",")
            f.write(json.dumps(edit(listed_application(i))))
        f.write("]}")
    return os.path.getsize(path)


def send_file(handler, path):
    """Answers 200 with the file at `path` as JSON, in 64 KB writes (a client that goes away ends it)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(os.path.getsize(path)))
    handler.end_headers()
    with open(path, "rb") as f:
        while chunk := f.read(64 * 1024):
            try:
                handler.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                return


def serve_listing(path):
    """A fake Argo CD API on a free loopback port: GET /api/v1/applications sends the file in 64 KB writes."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/api/v1/applications":
                self.send_response(404)
                self.end_headers()
                return
            send_file(self, path)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def count_apps(base):
    count, url = 0, base + "/v1/apps?limit=1000"
    while url:
        status, body = request(url)
        if status != 200:
            break
        v = json.loads(body)
        count += len(v.get("items", []))
        url = base + v["next"] if v.get("next") else None
    return count


def listing_phase(binary):
    failures = []
    for n in (10_000, 50_000):
        work = tempfile.mkdtemp(prefix="herald-listing-")
        listing = os.path.join(work, "listing.json")
        size = write_listing(listing, n)
        server = serve_listing(listing)
        proc, base = start_herald(binary, work, wait=False,
                                  HERALD__ARGOCD__API__URL=f"http://127.0.0.1:{server.server_port}",
                                  HERALD__ARGOCD__API__TOKEN="bench-read-only-token",
                                  HERALD__ARGOCD__API__RESYNC_INTERVAL="1h")
        try:
            started = time.time()
            done = False
            # /metrics is cheap to render (the status page would add its own memory to the figure).
            while time.time() - started < 900 and proc.poll() is None:
                status, body = request(base + "/metrics")
                if status == 200 and b'herald_argocd_resyncs_total{outcome="ok"} 1' in body:
                    done = True
                    break
                if b'herald_argocd_resyncs_total{outcome="failed"}' in body:
                    break
                time.sleep(0.5)
            took = time.time() - started
            peak, now = peak_rss_mb(proc.pid), rss_mb(proc.pid)
            stored = count_apps(base)
            print(f"listing of {n:,} Applications ({size / 1e6:.0f} MB): "
                  f"{'listed' if done else 'NOT listed'} in {took:.0f} s, {stored:,} stored; "
                  f"peak RSS {peak:.0f} MB, after {now:.0f} MB")
            if not done or stored != n:
                failures.append(f"{n}: not listed")
            if peak > LISTING_RSS_LIMIT_MB:
                failures.append(f"{n}: peak RSS {peak:.0f} MB > {LISTING_RSS_LIMIT_MB} MB")
        finally:
            stop_herald(proc)
            server.shutdown()
            os.remove(listing)
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print(f"ok: every listing's peak RSS within {LISTING_RSS_LIMIT_MB} MB")


# The peak four hostile bodies read at once may cost (a body of 1.3 million empty resources took 470 MB alone when
# every one was built before the caps applied).
HOSTILE_RSS_LIMIT_MB = 200


def hostile_bodies(shape, n=4):
    """`n` bodies of just under 4 MB (the default `server.max_body_bytes`) whose one list is as long as fits."""
    limit = 4 * 1024 * 1024 - 2048
    bodies = []
    for k in range(n):
        app = {"metadata": {"name": f"hostile-{k}", "namespace": "argocd", "uid": f"uid-hostile-{k}"},
               "spec": {"project": "default"},
               "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}}
        head = json.dumps({"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "app": app})
        if shape == "revisions":
            items, i = [], 0
            size = len(head) + 40
            while size < limit:
                item = f'"{i:x}"'
                items.append(item)
                size += len(item) + 1
                i += 1
            array = "[" + ",".join(items) + "]"
        else:
            count = (limit - len(head) - 80) // 3
            array = "[" + ",".join(["{}"] * count) + "]"
        placement = {
            "resources": '"status": {"resources": ARRAY, ',
            "syncResult": '"status": {"operationState": {"phase": "Failed", "syncResult": {"resources": ARRAY}}, ',
            "conditions": '"status": {"conditions": ARRAY, ',
            "revisions": '"status": {"sync": {"status": "OutOfSync", "revisions": ARRAY}, ',
        }[shape]
        if shape == "revisions":
            # Its own `sync` replaces the Application's (no key twice).
            head = head.replace('"sync": {"status": "OutOfSync"}, ', "", 1)
        body = head.replace('"status": {', placement.replace("ARRAY", array), 1)
        bodies.append(body.encode())
    return bodies


def hostile_phase(binary):
    worst = 0.0
    for shape in ("resources", "syncResult", "conditions", "revisions"):
        work = tempfile.mkdtemp(prefix="herald-hostile-")
        # A budget for all four at once (the default, 16 MiB, may shed one while others are parsed): the worst case.
        proc, base = start_herald(binary, work, HERALD__SERVER__MAX_INFLIGHT_BODY_BYTES=str(64 * 1024 * 1024))
        try:
            start = rss_mb(proc.pid)
            bodies = hostile_bodies(shape)
            started = time.time()
            with futures.ThreadPoolExecutor(len(bodies)) as pool:
                answers = list(pool.map(lambda b: request(base + "/v1/argocd/events", b)[0], bodies))
            elapsed = time.time() - started
            peak = peak_rss_mb(proc.pid)
            worst = max(worst, peak)
            print(f"{shape}: 4 bodies of {len(bodies[0]) / 1e6:.1f} MB at once: answers {answers} in {elapsed:.1f} s; "
                  f"RSS at start {start:.0f} MB, peak {peak:.0f} MB")
        finally:
            stop_herald(proc)
    print(f"worst peak {worst:.0f} MB (limit {HOSTILE_RSS_LIMIT_MB} MB)")
    if worst > HOSTILE_RSS_LIMIT_MB:
        sys.exit(1)


def main():
    if len(sys.argv) == 3 and sys.argv[2] == "--listing":
        listing_phase(os.path.abspath(sys.argv[1]))
        return
    if len(sys.argv) == 3 and sys.argv[2] == "--hostile":
        hostile_phase(os.path.abspath(sys.argv[1]))
        return
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="herald-memory-")
    proc, base = start_herald(binary, work, HERALD__RULES__OUT_OF_SYNC__FOR="1h")
    try:
        print(f"started: RSS {rss_mb(proc.pid):.0f} MB")

        # 1. 50 concurrent 4 MB bodies, three rounds.
        big = [envelope(f"big-{i}", pad=4 * 1024 * 1024 - 600) for i in range(50)]
        statuses = {}
        with futures.ThreadPoolExecutor(50) as pool:
            for _ in range(3):
                for status, _ in pool.map(lambda b: request(base + "/v1/argocd/events", b), big):
                    statuses[status] = statuses.get(status, 0) + 1
        print(f"burst of 3 x 50 bodies of 4 MB: answers {statuses}; peak RSS {peak_rss_mb(proc.pid):.0f} MB, "
              f"now {rss_mb(proc.pid):.0f} MB")

        # 2. 10,000 Applications, some with resources waiting to be pruned.
        def post(i):
            res = [{"kind": "CronJob", "namespace": "n", "name": f"job-{i}", "status": "OutOfSync", "requiresPruning": True}] if i % 10 == 0 else []
            sync = "OutOfSync" if i % 3 == 0 else "Synced"
            return request(base + "/v1/argocd/events", envelope(f"app-{i:05d}", sync=sync, resources=res))[0]
        started = time.time()
        with futures.ThreadPoolExecutor(32) as pool:
            ok = sum(1 for s in pool.map(post, range(10_000)) if s == 202)
        print(f"10,000 Applications posted ({ok} accepted) in {time.time() - started:.0f} s; peak RSS "
              f"{peak_rss_mb(proc.pid):.0f} MB")

        def read_all(path):
            pages, count, statuses = 0, 0, set()
            url = base + path
            while url and pages < 50:
                status, body = request(url)
                statuses.add(status)
                pages += 1
                if status != 200 or not path.startswith("/v1/"):
                    break
                v = json.loads(body)
                count += v.get("count", 0)
                url = base + v["next"] if v.get("next") else None
            return path, pages, count, statuses

        paths = ["/v1/apps?limit=1000", "/v1/apps?sync=OutOfSync&limit=1000", "/v1/incidents?limit=1000",
                 "/v1/prune-pending?limit=1000", "/v1/outbox?limit=1000", "/v1/silences", "/", "/metrics"]
        with futures.ThreadPoolExecutor(20) as pool:
            results = list(pool.map(read_all, paths * 3))
        for path, pages, count, statuses in results[: len(paths)]:
            print(f"  {path}: {pages} page(s), {count} item(s), answers {sorted(map(str, statuses))}")
        print(f"every read endpoint, 20 in parallel: peak RSS {peak_rss_mb(proc.pid):.0f} MB, now {rss_mb(proc.pid):.0f} MB")
        size = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("h.db"))
        print(f"store on disk: {size / 1e6:.1f} MB ({', '.join(sorted(f for f in os.listdir(work) if f.startswith('h.db')))})")
    finally:
        stop_herald(proc)


if __name__ == "__main__":
    main()
