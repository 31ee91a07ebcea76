#!/usr/bin/env python3
"""server_attacks.py — hostile clients of flux-server (tests/run_server.sh,
issue 32 D2, D3, D12). 127.0.0.1 only; each check is bounded in time.

  lockout PORT HEAD_TIMEOUT   IDLE idle sockets and DRIP sockets sending a byte
                              of a request head every second; meanwhile
                              /health is asked every 0.5 s and must answer
                              within 2 s every time; every idle and dripping
                              socket must be closed by the server within
                              HEAD_TIMEOUT + 3 s.
  bigjson PORT PID            4 concurrent 32 MB JSON bodies of a value array
                              under a field the server does not read, then 4
                              under one it reads: the first are answered 202,
                              the others 400, and the server's peak RSS
                              (VmHWM) grows by less than 320 MB.
  chunked PORT                a chunked body streamed without end to /v1/jobs:
                              the server must answer 413 or close before
                              64 MiB were sent (its limit is 32 MiB; socket
                              buffers hold some MiB more).
Prints one line "<check>: ..." and exits 0 when the check holds.
"""
import http.client, json, socket, sys, threading, time

HOST = "127.0.0.1"


def health_latency(port, timeout=2.0):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=timeout)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        return time.monotonic() - t0 if r.status == 200 else None
    except OSError:
        return None


def closed_by_server(s):
    """1 when the peer closed (EOF or reset) — non-blocking."""
    s.setblocking(False)
    try:
        data = s.recv(65536)
        return data == b"" or b"HTTP/1.1" in data  # an answer (408/400) then close also counts
    except BlockingIOError:
        return False
    except OSError:
        return True


def lockout(port, head_timeout, idle=72, drip=80):
    socks = []
    for _ in range(idle):
        socks.append(("idle", socket.create_connection((HOST, port))))
    for _ in range(drip):
        socks.append(("drip", socket.create_connection((HOST, port))))
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    lat, failures, t0, k = [], 0, time.monotonic(), 0
    closed_at = {}
    while time.monotonic() - t0 < head_timeout + 3:
        k += 1
        for i, (kind, s) in enumerate(socks):
            if i in closed_at:
                continue
            if kind == "drip" and k % 2 == 0:
                try:
                    s.send(head[k // 2 : k // 2 + 1])
                except OSError:
                    closed_at[i] = time.monotonic() - t0
                    continue
            if closed_by_server(s):
                closed_at[i] = time.monotonic() - t0
            else:
                s.setblocking(True)
        l = health_latency(port)
        if l is None:
            failures += 1
        else:
            lat.append(l)
        time.sleep(0.5)
    open_left = len(socks) - len(closed_at)
    for _, s in socks:
        s.close()
    worst = max(lat) if lat else -1
    print(f"lockout: {idle} idle + {drip} dripping sockets: /health answered {len(lat)}/{len(lat) + failures} "
          f"times (slowest {worst:.3f} s); {len(closed_at)} sockets closed by the server, {open_left} still open "
          f"after {head_timeout + 3} s")
    return failures == 0 and open_left == 0 and worst < 2.0


def rss_hwm_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def post(port, path, body, out):
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=120)
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        out.append(r.status)
        c.close()
    except OSError as e:
        out.append(str(e))


def bigjson(port, pid):
    target = 32 * 1024 * 1024 - 4096
    def body(field):
        head = '{"prompt":"x","width":64,"height":64,"steps":1,"%s":[' % field
        n = (target - len(head) - 2) // 2
        return (head + "0," * (n - 1) + "0]}").encode()
    hwm0 = rss_hwm_kb(pid)
    results = {}
    for field in ("unread", "images"):
        b = body(field)
        out = []
        threads = [threading.Thread(target=post, args=(port, "/v1/jobs", b, out)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results[field] = out
    hwm1 = rss_hwm_kb(pid)
    grew = (hwm1 - hwm0) / 1024
    print(f"bigjson: 4 x 32 MB bodies (array under an unread field): {results['unread']}; under \"images\": "
          f"{results['images']}; peak RSS {hwm0 / 1024:.0f} -> {hwm1 / 1024:.0f} MB (+{grew:.0f} MB)")
    return results["unread"] == [202] * 4 and results["images"] == [400] * 4 and grew < 320


def chunked(port):
    s = socket.create_connection((HOST, port))
    s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    sent, answer = 0, b""
    s.settimeout(5)
    try:
        while sent < 200 * 1024 * 1024:
            s.sendall(frame)
            sent += len(chunk)
            s.setblocking(False)
            try:
                data = s.recv(4096)
                if data == b"":
                    break
                answer += data
                break
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
                s.settimeout(5)
    except OSError:
        pass
    try:
        s.settimeout(2)
        answer += s.recv(4096)
    except OSError:
        pass
    s.close()
    status = answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/1.1 ") else "none (closed)"
    print(f"chunked: {sent / 2**20:.0f} MiB sent before the server answered {status}")
    return sent < 64 * 1024 * 1024  # 32 MiB read, the rest in the sockets' buffers


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "lockout":
        ok = lockout(int(sys.argv[2]), float(sys.argv[3]))
    elif what == "bigjson":
        ok = bigjson(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "chunked":
        ok = chunked(int(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} lockout|bigjson|chunked ...")
    sys.exit(0 if ok else 1)
