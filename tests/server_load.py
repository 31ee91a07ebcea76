#!/usr/bin/env python3
"""server_load.py — a bounded load test of flux-server (tests/run_server.sh).

N requests from C concurrent clients (OpenAI generations, 64x64, 1 step) with
seeds from a small set; a 429 is retried after its Retry-After (capped, so
the test stays short). Checks: every request ends 200, each image equals the
CLI's image of its seed (no mixed-up or duplicated job), the server counted
exactly N new images, and its RSS after the run is within a bound of the RSS
after the warm-up. Prints the figures: requests, p50/p95 latency, 429s,
RSS before/after.

usage: server_load.py BASE_URL SERVER_PID REQUESTS CLIENTS REF_DIR
REF_DIR holds seed-<S>.png for S in SEEDS (made with the flux CLI).
"""
import base64, concurrent.futures, json, sys, time, urllib.error, urllib.request

SEEDS = [11, 12, 13, 14]
base, pid, n, clients, refs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
want = {s: open(f"{refs}/seed-{s}.png", "rb").read() for s in SEEDS}


def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def images_total():
    with urllib.request.urlopen(base + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith("flux_images_total "):
                return int(line.split()[1])
    return -1


def one(i):
    seed = SEEDS[i % len(SEEDS)]
    body = json.dumps({"prompt": "load test", "size": "64x64", "steps": 1, "seed": seed}).encode()
    t0, rejected = time.monotonic(), 0
    while True:
        req = urllib.request.Request(base + "/v1/images/generations", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                png = base64.b64decode(json.load(r)["data"][0]["b64_json"])
                return time.monotonic() - t0, rejected, png == want[seed]
        except urllib.error.HTTPError as e:
            if e.code != 429:
                return time.monotonic() - t0, rejected, f"HTTP {e.code}"
            rejected += 1
            time.sleep(min(float(e.headers.get("Retry-After", "1")), 0.2))


# warm-up: the text encoder and the embedding cache, then the baseline RSS
one(0)
rss0, img0 = rss_kb(), images_total()
t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    results = list(pool.map(one, range(n)))
wall = time.monotonic() - t0
rss1, img1 = rss_kb(), images_total()
lat = sorted(r[0] for r in results)
bad = [r[2] for r in results if r[2] is not True]
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"load: {n} requests from {clients} clients in {wall:.1f} s: p50 {p(0.5):.2f} s, p95 {p(0.95):.2f} s, "
      f"{sum(r[1] for r in results)} answered 429 (retried), RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MB")
ok = True
if bad:
    print(f"load: FAIL {len(bad)} requests wrong: {bad[:5]}")
    ok = False
if img1 - img0 != n:
    print(f"load: FAIL the server counted {img1 - img0} images for {n} requests")
    ok = False
if rss1 > rss0 + 16 * 1024:
    print(f"load: FAIL RSS grew by {(rss1 - rss0) / 1024:.1f} MB")
    ok = False
sys.exit(0 if ok else 1)
