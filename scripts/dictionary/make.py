#!/usr/bin/env python3
"""Writes `src/store/documents.dict`: the zstd dictionary Herald compresses its stored documents with (Application
states, incident views, delivery payloads). It is raw content: documents as Herald writes them, one after the other,
so that a new document finds its keys, Herald's own texts (summaries, hints, conditions) and Argo CD's field names
in it, and stores as a few hundred bytes instead of about a kilobyte.

The documents come from the Application objects in tests/fixtures/argocd/objects (not from the captured webhook
bodies that herald-bench sends: the benchmark's figures must not measure the dictionary against its own input).
The script starts the given Herald binary on a fresh SQLite store, posts each object as a webhook body, then reads
the stored documents back.

**The dictionary is part of the storage format.** Every document written with it is read with it: never change the
committed file. (Documents written before it, without a dictionary, read the same with it loaded; a different
dictionary would need a marker in each row.) This script is how the committed file was made, kept to show it; its
output differs from run to run where documents hold the time they were made.

    python3 scripts/dictionary/make.py target/release/herald [--out FILE]
Needs PyYAML and zstandard (pip).
"""
import glob
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml
import zstandard

LIMIT = 32 * 1024
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benches"))
from memory import free_port  # noqa: E402  (the benchmarks' helper)


def objects(root):
    for path in sorted(glob.glob(os.path.join(root, "tests/fixtures/argocd/objects/*"))):
        with open(path) as f:
            text = f.read()
        if path.endswith(".json"):
            docs = [json.loads(text)]
        elif path.endswith(".yaml"):
            docs = [d for d in yaml.safe_load_all(text) if d]
        else:
            continue  # the .jsonc docs example is not JSON
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind", "Application") == "Application" and "metadata" in doc:
                yield doc


def main():
    binary = sys.argv[1]
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "src/store/documents.dict"
    root = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = dict(os.environ, HERALD__SERVER__LISTEN=f"127.0.0.1:{port}", HERALD__LOG__LEVEL="warn",
                   HERALD__STORAGE__URL=f"sqlite://{tmp}/store.db")
        proc = subprocess.Popen([os.path.abspath(binary), "serve"], cwd=tmp, env=env)
        try:
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.05)
            docs = list(objects(root))
            # Derived copies (renamed), for the kinds no object shows: a resource waiting to be pruned, an
            # unknown sync status with a comparison error.
            for doc in docs[:2]:
                pruning = json.loads(json.dumps(doc))
                pruning["metadata"]["name"] += "-pruning"
                status = pruning.setdefault("status", {})
                status.setdefault("sync", {})["status"] = "OutOfSync"
                for resource in status.get("resources", [])[:1]:
                    resource["status"] = "OutOfSync"
                    resource["requiresPruning"] = True
                unknown = json.loads(json.dumps(doc))
                unknown["metadata"]["name"] += "-unknown"
                status = unknown.setdefault("status", {})
                status.setdefault("sync", {})["status"] = "Unknown"
                status["conditions"] = [{"type": "ComparisonError", "message": "Failed to load target state: "
                                         "rpc error: code = Unknown desc = authentication required"}]
                docs += [pruning, unknown]
            for doc in docs:
                body = json.dumps({"timestamp": "2026-01-01T00:00:00Z", "app": doc}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/argocd/events", data=body,
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=10).read()
        finally:
            proc.terminate()
            proc.wait()
        db = sqlite3.connect(f"{tmp}/store.db")
        plain = zstandard.ZstdDecompressor()
        states = [plain.decompress(r[0]) for r in db.execute("SELECT state_doc FROM apps ORDER BY name")]
        views = [plain.decompress(r[0]) for r in db.execute("SELECT view_doc FROM incidents ORDER BY id")]
    # Views first, states after: the dictionary's end is what zstd reaches soonest, and states are the larger.
    content = b""
    for doc in views + states:
        if len(content) + len(doc) > LIMIT:
            break
        content += doc
    with open(out, "wb") as f:
        f.write(content)
    print(f"{out}: {len(content)} bytes from {len(views)} incident views and {len(states)} Application states")


if __name__ == "__main__":
    main()
