#!/usr/bin/env python3
"""Hostile clients against a running `atto serve` (tests/cli/test_serve_hostile.sh).

hostile.py PORT KEY PID SLOW_SECONDS: deep JSON, huge and malformed bodies, invalid UTF-8, wrong
types, a flood, clients that leave mid-request and mid-stream, slow and idle sockets, bad keys;
all on 127.0.0.1, every loop bounded. A monitor thread asks GET /health every 0.2 s throughout
and records the slowest answer. Prints one line per failed check ("FAIL: ...") and a summary;
exits 1 when a check failed.
"""
import json
import socket
import sys
import threading
import time

PORT, KEY, PID, SLOW_S = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
HOST = "127.0.0.1"
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def exchange(data, timeout=10.0):
    """Sends raw bytes, reads the answer until the server closes or the body is complete: (status, body)."""
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may answer (413) and close before all of a large body is sent
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep and not head.startswith(b"HTTP/1.1 100"):
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:") and len(body) >= int(line.split(b":")[1]):
                        return parse(buf)
        return parse(buf)
    finally:
        s.close()


def parse(buf):
    while buf.startswith(b"HTTP/1.1 100"):
        buf = buf.partition(b"\r\n\r\n")[2]
    if not buf:
        return 0, b""
    head, _, body = buf.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def post(path, body, key=KEY, extra=b""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = f"Authorization: Bearer {key}\r\n".encode() if key is not None else b""
    req = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
           .encode() + auth + extra + b"Connection: close\r\n\r\n" + data)
    return exchange(req)


def error_ok(status, body, want, what):
    """A 4xx/5xx answer with OpenAI's error shape and a short message."""
    try:
        e = json.loads(body)["error"]
        shaped = isinstance(e["message"], str) and "type" in e
        short = len(e["message"]) <= 600 and not any(ord(ch) < 32 for ch in e["message"])
    except (ValueError, KeyError, TypeError):
        shaped, short = False, False
    check(status == want, f"{what}: status {status}, want {want} ({body[:200]!r})")
    check(shaped, f"{what}: not an OpenAI error body: {body[:200]!r}")
    check(short, f"{what}: the message is not bounded or holds control characters: {body[:300]!r}")


class HealthMonitor(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.worst, self.count, self.bad = False, 0.0, 0, []

    def run(self):
        while not self.stop:
            t0 = time.monotonic()
            try:
                status, _ = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=2.0)
            except OSError as e:
                status = f"error {e}"
            dt = time.monotonic() - t0
            self.worst, self.count = max(self.worst, dt), self.count + 1
            if status != 200 or dt > 1.0:
                self.bad.append(f"{status} after {dt:.2f} s")
            time.sleep(0.2)


def deep_bodies():
    deep = "[" * 100000 + "]" * 100000  # 200 KB, 100,000 levels
    for path, body in [("/v1/completions", '{"prompt": %s}' % deep),
                       ("/v1/completions", '{"prompt": "ma", "stop": %s}' % deep),
                       ("/v1/chat/completions", '{"messages": %s}' % deep),
                       ("/v1/completions", '{"prompt": "ma", "x": ' + '{"a":' * 100000 + "1" + "}" * 100000 + "}")]:
        status, reply = post(path, body.encode())
        error_ok(status, reply, 400, f"deep JSON to {path} ({len(body)} bytes)")


def malformed_bodies():
    cases = [(b"{", 400, "truncated JSON"), (b"\x00\xff\xfe garbage", 400, "binary body"),
             (b'{"prompt": "\xff\xfe\xc0\x80"}', 400, "invalid UTF-8 in a string"),
             (b'{"prompt": 5}', 400, "prompt a number"), (b'{"messages": "hi"}', 400, "messages a string"),
             (b'{"prompt": "ma", "max_tokens": "ten"}', 400, "max_tokens a string"),
             (b'{"prompt": "ma", "max_tokens": 1000000000}', 400, "max_tokens 1e9"),
             (b'{"prompt": "ma", "n": 1000000}', 400, "n 1e6"), (b'{"prompt": "ma", "n": -1}', 400, "n -1"),
             (b'{"prompt": "ma", "stream": "yes"}', 400, "stream a string"),
             (b'{"prompt": "ma", "logprobs": 1000000000}', 400, "logprobs 1e9"),
             (b'{"prompt": "ma", "temperature": 1e400}', 400, "temperature 1e400"),
             (b'{"prompt": "ma", "max_tokens": "' + b"A\\u001b" * 30000 + b'"}', 400, "a 200 KB value echoed"),
             (b'{"prompt": ["ma"], "model": "' + b"\\u001b[31m\\u0000" * 1000 + b'"}', 404, "an escape-laden model"),
             (b'{"messages": [{"role": "user", "content": "ma"}], "response_format": "' + b"\\u001b" * 40000 + b'"}',
              400, "a 240 KB response_format echoed"),
             (b'{"messages": [{"role": "user", "content": "ma"}], "tools": [' + b'{"a": 1},' * 20000 + b'{}]}', 400,
              "20,000 tools"),
             (b"[1, 2, 3]", 400, "a list, not an object")]
    for body, want, what in cases:
        path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
        status, reply = post(path, body)
        error_ok(status, reply, want, what)
        check(b"\x1b" not in reply, f"{what}: a raw control byte is echoed")


def sampler_and_token_routes():
    """logit_bias and the token routes: hostile keys and ids are 400s with a bounded message."""
    cases = [("/v1/completions", b'{"prompt": "ma", "logit_bias": {"' + b"9" * 5000 + b'": 1}}', "a 5,000-digit id"),
             ("/v1/completions", b'{"prompt": "ma", "logit_bias": {"\u001b[31m": 1}}', "an escape as an id"),
             ("/v1/completions", b'{"prompt": "ma", "logit_bias": {"3": "' + b"A" * 200000 + b'"}}', "a 200 KB bias"),
             ("/v1/completions", b'{"prompt": "ma", "logit_bias": [[3, 100]]}', "logit_bias a list"),
             ("/v1/completions", b'{"prompt": "ma", "logit_bias": {"2147483648": 1}}', "an id past 2^31"),
             ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "ma"}], "presence_penalty": 1e308}',
              "presence_penalty 1e308"),
             ("/tokenize", b'{"content": ' + b"[" * 100000 + b"]" * 100000 + b"}", "deep JSON to /tokenize"),
             ("/tokenize", b'{"content": {"a": 1}}', "content an object"),
             ("/detokenize", b'{"tokens": [1, -1]}', "a negative id"),
             ("/detokenize", b'{"tokens": [1e300]}', "a 1e300 id"),
             ("/detokenize", b'{"tokens": [2147483647]}', "an id past the vocabulary"),
             ("/detokenize", b'{"tokens": "' + b"\u0000" * 10000 + b'"}', "tokens a string of NULs"),
             ("/tokenize", b'{"with_pieces": true, "content": "' + b"ma" * 40000 + b'"}', "80,000 pieces")]
    for path, body, what in cases:
        status, reply = post(path, body)
        error_ok(status, reply, 400, what)
        check(b"\x1b" not in reply, f"{what}: a raw control byte is echoed")


def framing():
    big = b"x" * (2 << 20)
    status, reply = post("/v1/completions", big)
    error_ok(status, reply, 413, "a 2 MiB body")
    for length, want in [(b"1000000000000000000", 413), (b"abc", 400), (b"-5", 400)]:
        status, reply = exchange(b"POST /v1/completions HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n{}")
        error_ok(status, reply, want, f"Content-Length {length.decode()}")
    status, reply = exchange(b"GET /health HTTP/1.1\r\nX: " + b"y" * (100 << 10) + b"\r\n\r\n")
    error_ok(status, reply, 431, "100 KiB of headers")
    status, _ = exchange(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 200 + b"\r\n\r\n")
    check(status in (0, 400), f"a TLS hello: status {status}")
    status, _ = exchange(b"BREW /pot HTTP/1.1\r\n\r\n")
    check(400 <= status < 500, f"an unknown method: status {status}")
    chunked = b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"ffffffffff\r\n"
    error_ok(*exchange(chunked), 413, "a chunk of 2^40 bytes")


def bad_keys():
    body = {"prompt": "ma", "max_tokens": 2}
    for key, what in [(None, "no key"), ("wrong", "a wrong key"), ("", "an empty key"), (KEY + "x", "a longer key"),
                      (KEY[:-1], "a shorter key")]:
        status, reply = post("/v1/completions", body, key=key)
        error_ok(status, reply, 401, f"API key: {what}")
    status, _ = exchange(b"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + b"k" * 60000 + b"\r\n\r\n")
    check(status in (400, 401, 431), f"a 60 KB key: status {status}")


def flood(n=200, threads=20):
    statuses, lock = [], threading.Lock()

    def one(i):
        req = ({"prompt": "ma", "max_tokens": 1} if i % 3 == 0 else {"prompt": 5})
        try:
            st, _ = post("/v1/completions", req)
        except OSError as e:
            st = f"error {e}"
        with lock:
            statuses.append(st)

    def worker(k):
        for i in range(k, n, threads):
            one(i)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    odd = [s for s in statuses if s not in (200, 400, 503)]
    check(len(statuses) == n and not odd, f"flood: {len(statuses)} of {n} answered, odd answers {odd[:5]}")
    print(f"flood: {n} requests in {time.monotonic() - t0:.1f} s", flush=True)


def disconnects():
    for i in range(20):  # mid-request: headers promise 1000 bytes, 10 come
        s = socket.create_connection((HOST, PORT), timeout=5)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
        s.close()
    for i in range(10):  # mid-stream: the first event read, then gone
        body = json.dumps({"prompt": "", "max_tokens": 200, "stream": True, "seed": i}).encode()
        s = socket.create_connection((HOST, PORT), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + KEY.encode() +
                  b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        first = s.recv(4096)
        check(first.startswith(b"HTTP/1.1 200"), f"stream {i}: {first[:100]!r}")
        s.close()


def slow_and_idle(n_slow=80, n_idle=40):
    """n_slow sockets send a request one byte a second, n_idle send nothing, for SLOW_S seconds;
    returns how many the server answered 408 or closed by then."""
    req = b"POST /v1/completions HTTP/1.1\r\nContent-Length: 30\r\n\r\n" + b"x" * 30
    socks = []
    for i in range(n_slow + n_idle):
        s = socket.create_connection((HOST, PORT), timeout=5)
        s.setblocking(False)
        socks.append(s)
    ended = set()
    t0, sent = time.monotonic(), 0
    while time.monotonic() - t0 < SLOW_S:
        for i, s in enumerate(socks):
            try:
                if i < n_slow and i not in ended:
                    s.send(req[sent:sent + 1])
                data = s.recv(4096)
                if data.startswith(b"HTTP/1.1 408") or not data:
                    ended.add(i)
            except BlockingIOError:
                pass
            except OSError:
                ended.add(i)
        sent += 1
        time.sleep(1.0)
    for s in socks:
        s.close()
    return len(ended)


def main():
    monitor = HealthMonitor()
    monitor.start()
    rss0 = rss_kib()
    deep_bodies()
    malformed_bodies()
    sampler_and_token_routes()
    framing()
    bad_keys()
    flood()
    disconnects()
    rss_mid = rss_kib()
    closed = slow_and_idle()
    check(closed >= 100, f"slow and idle sockets closed by the server after {SLOW_S} s: {closed} of 120")
    monitor.stop = True
    monitor.join()
    rss1 = rss_kib()
    check(monitor.count >= 10 and not monitor.bad,
          f"/health under load: {monitor.count} checks, slowest {monitor.worst:.2f} s, bad {monitor.bad[:5]}")
    status, reply = post("/v1/completions", {"prompt": "ma", "max_tokens": 4, "seed": 1})
    check(status == 200 and "choices" in json.loads(reply or b"{}"), f"a normal completion: {status} {reply[:200]!r}")
    body = json.dumps({"prompt": "", "max_tokens": 8, "seed": 2, "stream": True}).encode()
    status, reply = exchange(b"POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + KEY.encode() +
                             b"\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    check(status == 200 and b"data: [DONE]" in reply, f"a normal streamed completion: {status} {reply[-200:]!r}")
    print(f"health: {monitor.count} checks, slowest {monitor.worst * 1000:.0f} ms; "
          f"VmRSS {rss0 // 1024} -> {rss_mid // 1024} -> {rss1 // 1024} MiB", flush=True)
    print(f"RSS_KIB {max(rss0, rss_mid, rss1)}")
    print(f"hostile: {checks - len(failures)} of {checks} checks passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
