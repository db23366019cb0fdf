#!/usr/bin/env python3
"""serve_load.py -- a bounded load on `char_lm serve` over 127.0.0.1 (issue 34).

    bench/serve_load.py --run DIR [--clients 32] [--seconds 20] [--char-lm build/char_lm]

Starts `char_lm serve --run DIR --port 0`, then CLIENTS threads loop for SECONDS, each request
drawn in turn from a fixed mix: a sample of 50 characters (one JSON answer), a streamed sample
of 50, attention over a 24-character prompt, /api/run, /api/metrics, a bad request (expects
400). It reports the errors (any unexpected status, a refused or broken connection), the
server's RSS (before the load, after a 3 s warm-up, its peak in each half of the measured load,
at the end) and the p50 / p99 latency per call. Exit 1 on any error, an exit other than 143
after SIGTERM, or an RSS that grows: the second half's peak over 1.2 x the first half's."""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

MIX = [
    ("sample", "POST", "/api/sample", {"prompt": "ROMEO:", "n": 50, "stream": False, "top_k": 10}, 200),
    ("stream", "POST", "/api/sample", {"prompt": "ROMEO:", "n": 50}, 200),
    ("attention", "POST", "/api/attention", {"prompt": "ROMEO: the king is here."}, 200),
    ("run", "GET", "/api/run", None, 200),
    ("metrics", "GET", "/api/metrics", None, 200),
    ("bad", "POST", "/api/sample", {"prompt": "ROMEO:", "top_k": 0}, 400),
]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start(char_lm, run):
    p = subprocess.Popen([char_lm, "serve", "--run", run, "--port", "0"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "http://127.0.0.1:" not in line:
        p.kill()
        sys.exit("serve did not start: " + line)
    return p, int(line.split("http://127.0.0.1:")[1].split("/")[0])


def client(port, k, deadline, lat, errors, lock):
    i = k
    while time.time() < deadline:
        name, method, path, body, want = MIX[i % len(MIX)]
        i += 1
        t0 = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request(method, path, json.dumps(body) if body else None, {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
            ok = r.status == want and (name != "stream" or b"event: done" in data)
            why = "%s: status %d" % (name, r.status)
        except Exception as e:  # a refused, reset or timed-out connection is an error
            ok, why = False, "%s: %s" % (name, e)
        with lock:
            lat.setdefault(name, []).append(time.time() - t0)
            if not ok:
                errors.append(why)


def load(port, clients, seconds, pid=None):
    """The clients for seconds; with pid, the server's RSS every 0.25 s as well."""
    lat, errors, lock, rss = {}, [], threading.Lock(), []
    deadline = time.time() + seconds
    ts = [threading.Thread(target=client, args=(port, k, deadline, lat, errors, lock)) for k in range(clients)]
    for t in ts:
        t.start()
    while pid and time.time() < deadline:
        rss.append(rss_kb(pid))
        time.sleep(0.25)
    for t in ts:
        t.join()
    return lat, errors, rss


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--char-lm", default="build/char_lm")
    a = ap.parse_args()
    p, port = start(a.char_lm, a.run)
    try:
        rss0 = rss_kb(p.pid)
        load(port, a.clients, min(3.0, a.seconds))   # warm-up: threads, allocator arenas
        rss1 = rss_kb(p.pid)
        lat, errors, rss = load(port, a.clients, a.seconds, p.pid)
        rss2 = rss_kb(p.pid)
    finally:
        p.send_signal(signal.SIGTERM)
        code = p.wait(timeout=60)
    total = sum(len(v) for v in lat.values())
    print("serve_load: %d clients, %.0f s, %d requests (%.0f/s), %d errors; serve exited %d" % (
        a.clients, a.seconds, total, total / a.seconds, len(errors), code))
    for e in errors[:10]:
        print("  error:", e)
    half = max(1, len(rss) // 2)
    peak1, peak2 = max(rss[:half] or [rss1]), max(rss[half:] or [rss2])
    print("RSS: %.1f MB at start, %.1f MB after the warm-up, peak %.1f MB in the first half of the load and "
          "%.1f MB in the second, %.1f MB at the end" % (rss0 / 1024, rss1 / 1024, peak1 / 1024, peak2 / 1024,
                                                         rss2 / 1024))
    print("%-10s %8s %10s %10s" % ("call", "requests", "p50 ms", "p99 ms"))
    for name, *_ in MIX:
        xs = lat.get(name, [])
        if xs:
            print("%-10s %8d %10.1f %10.1f" % (name, len(xs), pct(xs, 0.5), pct(xs, 0.99)))
    grew = peak2 > peak1 * 1.2
    if grew:
        print("serve_load: RSS grew under load (second half's peak over 1.2 x the first's)")
    return 1 if errors or grew or code != 143 else 0


if __name__ == "__main__":
    sys.exit(main())
