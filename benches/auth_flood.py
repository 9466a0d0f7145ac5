#!/usr/bin/env python3
"""Wrong bearer tokens against a real `herald serve` (issue 24, item 9), printing what was compared (401) and what
was refused unchecked (429), and how many refusal lines the log got:
  1. from one address, as fast as 8 connections go, for 5 s;
  2. one each from 6000 loopback addresses (127.1.x.y; Linux answers on all of 127/8), while a client that
     authenticated before (Argo CD, 127.2.0.1) keeps sending with the right token.
Usage: benches/auth_flood.py target/release/herald"""
import collections
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOKEN = "argocd-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, token, source=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, source_address=(source, 0) if source else None)
    c.request("POST", "/v1/argocd/events", body=b"{}",
              headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if conn is None:
        c.close()
    return r.status


def main():
    herald = sys.argv[1] if len(sys.argv) > 1 else "target/release/herald"
    work = tempfile.mkdtemp(prefix="herald-auth-flood-")
    port = free_port()
    cfg = os.path.join(work, "herald.yaml")
    with open(cfg, "w") as f:
        f.write(f'server: {{listen: "127.0.0.1:{port}", auth: {{ingest_tokens: [{TOKEN}]}}}}\n'
                f'storage: {{url: "sqlite://{work}/h.db"}}\nlog: {{level: info}}\n')
    log_path = os.path.join(work, "herald.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([herald, "serve", "--config", cfg], stdout=log, stderr=log,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        for _ in range(100):
            if "herald is listening" in open(log_path).read():
                break
            time.sleep(0.1)
        lock = threading.Lock()
        one = collections.Counter()

        def one_address(stop):
            c = http.client.HTTPConnection("127.0.0.1", port)
            i = 0
            while time.time() < stop:
                s = post(port, f"wrong-token-{i:012d}", conn=c)
                i += 1
                with lock:
                    one[s] += 1

        stop = time.time() + 5
        threads = [threading.Thread(target=one_address, args=(stop,)) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        total = sum(one.values())
        print(f"one address, 5 s: {total} wrong tokens ({total / 5:.0f}/s), {one[401]} compared (401), "
              f"{one[429]} refused unchecked (429)")

        print(f"Argo CD (127.2.0.1) before the flood: {post(port, TOKEN, '127.2.0.1')}")
        before = open(log_path).read()
        many = collections.Counter()
        t0 = time.time()

        def spread(k):
            for n in range(k, 6000, 16):
                s = post(port, f"wrong-token-{n:012d}", f"127.1.{n // 250}.{n % 250 + 1}")
                with lock:
                    many[s] += 1

        threads = [threading.Thread(target=spread, args=(k,)) for k in range(16)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        took = time.time() - t0
        argocd = post(port, TOKEN, "127.2.0.1")
        newcomer = post(port, TOKEN, "127.3.0.1")
        time.sleep(0.5)
        text = open(log_path).read()[len(before):]
        lines = sum(text.count(m) for m in ("credential refused", "too many failed authentications"))
        print(f"6000 addresses in {took:.1f} s: {many[401]} compared (401), {many[429]} refused unchecked (429); "
              f"{lines} refusal log lines")
        print(f"right after: Argo CD (authenticated before) answered {argocd} (not 401/429: compared and admitted); "
              f"a new address with the right token answered {newcomer}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
