#!/usr/bin/env python3
"""server_load.py — a bounded load test of flux-server (tests/run_server.sh).

N requests from C concurrent clients (OpenAI generations, 64x64, 1 step) with
seeds from a small set; a 429 is retried after its Retry-After (capped, so
the test stays short). Checks: every request ends 200, each image equals the
CLI's image of its seed (no mixed-up or duplicated job), the server counted
exactly N new images, and its RSS after the run is within a bound of the RSS
after the warm-up. Prints the figures: requests, p50/p95 latency, 429s,
RSS before/after.

usage: server_load.py BASE_URL SERVER_PID REQUESTS CLIENTS REF_DIR [--hostile LORA...]
REF_DIR holds seed-<S>.png for S in SEEDS (made with the flux CLI).

--hostile: meanwhile other clients (from 127.0.0.2, another address) hold
idle sockets and drip request heads a byte at a time, send bodies of
values arrays and oversized bodies, bad and oversized images, and requests
naming the broken LoRAs given (adapters of the server's --lora-dir that
fail to load). Each hostile request must get its 4xx (or be cut off) and
none may change a normal answer.
"""
import base64, concurrent.futures, http.client, json, random, socket, struct, sys, threading, time, urllib.error
import urllib.request, zlib

SEEDS = [11, 12, 13, 14]
base, pid, n, clients, refs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
hostile_loras = sys.argv[7:] if len(sys.argv) > 6 and sys.argv[6] == "--hostile" else None
want = {s: open(f"{refs}/seed-{s}.png", "rb").read() for s in SEEDS}
port = int(base.rsplit(":", 1)[1])
EVIL = ("127.0.0.2", 0)  # the hostile clients' address


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


def png_claiming(w, h):
    """A PNG header announcing w x h pixels (and nothing decodable)."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


HOSTILE = []  # (what, status or error) of each hostile request
EXPECTED = {"values": {400}, "oversized": {413, "cut"}, "junk image": {400}, "huge image": {413},
            "broken lora": {400, 429}, "text body": {413, "cut"}}  # 429: the queue is full, also fine


def evil_post(what, path, body, ctype="application/json"):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=EVIL)
        c.request("POST", path, body=body, headers={"Content-Type": ctype})
        r = c.getresponse()
        r.read()
        c.close()
        HOSTILE.append((what, r.status))
    except OSError:
        HOSTILE.append((what, "cut"))  # the server closed on an oversized body


def hostile_requests(stop):
    junk_png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(random.Random(1).randrange(256) for _ in range(3000))).decode()
    huge = base64.b64encode(png_claiming(100000, 100000)).decode()
    values = ('{"prompt":"x","images":[' + ",".join(["0"] * 600000) + "]}").encode()
    k = 0
    while not stop.is_set():
        k += 1
        evil_post("values", "/v1/jobs", values)
        evil_post("oversized", "/v1/jobs", b'{"prompt":"x","a":"' + b"x" * (33 << 20) + b'"}')
        evil_post("text body", "/v1/images/generations", b'{"prompt":"' + b"x" * (2 << 20) + b'"}')
        evil_post("junk image", "/sdapi/v1/img2img", json.dumps({"prompt": "x", "init_images": [junk_png]}).encode())
        evil_post("huge image", "/sdapi/v1/img2img", json.dumps({"prompt": "x", "init_images": [huge]}).encode())
        for name in hostile_loras:
            evil_post("broken lora", "/v1/images/generations",
                      json.dumps({"prompt": "x", "size": "64x64", "steps": 1, "loras": [{"name": name}]}).encode())


def hostile_sockets(stop, idle=40, drip=20):
    """Idle sockets and heads dripped a byte every 0.5 s; reopened when the server drops them."""
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10000
    socks = [[None, 0, kind] for kind in ["idle"] * idle + ["drip"] * drip]
    dropped = 0
    while not stop.is_set():
        for s in socks:
            try:
                if s[0] is None:
                    s[0], s[1] = socket.create_connection(("127.0.0.1", port), source_address=EVIL), 0
                    s[0].setblocking(False)
                if s[2] == "drip":
                    s[0].send(head[s[1] : s[1] + 1])
                    s[1] += 1
                if s[0].recv(4096) == b"":
                    raise ConnectionResetError
            except BlockingIOError:
                pass
            except OSError:
                if s[0] is not None:
                    s[0].close()
                s[0] = None
                dropped += 1
        time.sleep(0.5)
    for s in socks:
        if s[0] is not None:
            s[0].close()
    HOSTILE.append(("sockets dropped by the server", dropped))


# warm-up: the text encoder and the embedding cache, then the baseline RSS
one(0)
stop = threading.Event()
evil = []
if hostile_loras is not None:
    evil = [threading.Thread(target=hostile_requests, args=(stop,)), threading.Thread(target=hostile_sockets, args=(stop,))]
    for t in evil:
        t.start()
    time.sleep(2)  # the hostile load is on before the normal one starts
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:  # and the allocator has seen both
        list(pool.map(one, range(2 * clients)))
rss0, img0 = rss_kb(), images_total()
t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    results = list(pool.map(one, range(n)))
wall = time.monotonic() - t0
stop.set()
for t in evil:
    t.join()
rss1, img1 = rss_kb(), images_total()
lat = sorted(r[0] for r in results)
bad = [r[2] for r in results if r[2] is not True]
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"load: {n} requests from {clients} clients in {wall:.1f} s: p50 {p(0.5):.2f} s, p95 {p(0.95):.2f} s, "
      f"{sum(r[1] for r in results)} answered 429 (retried), RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MB")
ok = True
if hostile_loras is not None:
    counts = {}
    for what, st in HOSTILE:
        counts.setdefault(what, []).append(st)
    print("load: hostile: " + "; ".join(f"{w} x{len(v)}: {sorted(set(map(str, v)))}" if w in EXPECTED else f"{w}: {v[0]}"
                                        for w, v in counts.items()))
    wrong = [(w, st) for w, st in HOSTILE if w in EXPECTED and st not in EXPECTED[w]]
    dropped = counts.get("sockets dropped by the server", [0])[0]
    if dropped == 0:
        print("load: FAIL no idle or dripping socket was dropped by the server")
        ok = False
    if wrong or any(w not in counts for w in EXPECTED):
        print(f"load: FAIL hostile requests answered otherwise: {wrong[:5]}, kinds seen: {sorted(counts)}")
        ok = False
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
