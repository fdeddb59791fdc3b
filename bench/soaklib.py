"""soaklib: the pieces of bench/soak that talk to the daemon on their own
(inferd-bench drives the capacity and soak load): an HTTP/1.1 client on
asyncio that records what each request saw at the socket (refused, reset,
cut mid-answer, hung, the status and its Retry-After), an open-loop Poisson
driver for it, the misbehaving clients of the fault phase, the process
sampler (RSS, fds, threads, queue depth) and a snapshot of the daemon's
accepted TCP connections from /proc/net/tcp, and the allocator's account
of the heap (from /metrics, at idle moments).

Standard library only; bench/soak puts this folder on sys.path.
"""
import asyncio
import http.client
import json
import mimetypes
import os
import random
import re
import socket
import struct
import threading
import time

AUDIO_EXT = (".wav", ".flac", ".ogg", ".mp3", ".opus")
DEFAULT_MODEL = {"openai-transcriptions": "whisper-tiny.en", "openai-chat": "gemma-3-270m",
                 "openai-completions": "gemma-3-270m"}
PATHS = {"openai-transcriptions": "/v1/audio/transcriptions",
         "openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}


# ---------------------------------------------------------------- workload

def _prompts(path):
    out = []
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if not ln:
                continue
            v = json.loads(ln)
            if isinstance(v, str):
                out.append({"prompt": v, "messages": [{"role": "user", "content": v}]})
            elif "messages" in v:
                text = "\n".join(m.get("content", "") for m in v["messages"])
                out.append({"prompt": text, "messages": v["messages"]})
            else:
                out.append({"prompt": v["prompt"],
                            "messages": [{"role": "user", "content": v["prompt"]}]})
    return out


def _multipart(model, name, data):
    b = "soak%016x" % random.getrandbits(64)
    ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    parts = []
    for k, v in (("model", model), ("response_format", "json")):
        parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                      % (b, k, v)).encode())
    parts.append(("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                  "Content-Type: %s\r\n\r\n" % (b, name, ctype)).encode() + data + b"\r\n")
    parts.append(("--%s--\r\n" % b).encode())
    return b"".join(parts), "multipart/form-data; boundary=" + b


class Workload:
    """The entries of an inferd-bench workload file (docs/bench.md) that this
    client speaks: openai-transcriptions (multipart, response_format json),
    openai-chat and openai-completions (temperature 0 unless given, stream
    as the entry says). Each request picks an entry by weight; inputs go
    round-robin per entry. Relative paths are taken from `top`."""

    def __init__(self, path, top, seed=1):
        with open(path) as f:
            spec = json.load(f)
        self.entries, self.rng = [], random.Random(seed)
        for e in spec["requests"]:
            ep = e["endpoint"]
            if ep not in PATHS:
                raise ValueError("soaklib: endpoint %s is not spoken here" % ep)
            ent = {"endpoint": ep, "weight": float(e.get("weight", 1)), "next": 0,
                   "model": e.get("model", DEFAULT_MODEL[ep]), "stream": bool(e.get("stream")),
                   "max_tokens": int(e.get("max_tokens", 128)),
                   "temperature": float(e.get("temperature", 0))}
            if ep == "openai-transcriptions":
                ent["inputs"] = self._audio(os.path.join(top, e["audio"]), ent["model"])
            else:
                p = e.get("prompts")
                ent["inputs"] = (_prompts(os.path.join(top, p)) if p else
                                 [{"prompt": "Hello", "messages": [{"role": "user", "content": "Hello"}]}])
            self.entries.append(ent)
        self.total = sum(e["weight"] for e in self.entries)

    @staticmethod
    def _audio(path, model):
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(path, n) for n in os.listdir(path)
            if n.lower().endswith(AUDIO_EXT) and os.path.isfile(os.path.join(path, n)))
        out = []
        for fp in files:
            with open(fp, "rb") as f:
                body, ctype = _multipart(model, os.path.basename(fp), f.read())
            out.append({"name": os.path.basename(fp), "body": body, "ctype": ctype})
        return out

    def pick(self):
        x = self.rng.random() * self.total
        for e in self.entries:
            x -= e["weight"]
            if x < 0:
                break
        inp = e["inputs"][e["next"] % len(e["inputs"])]
        e["next"] += 1
        return request_of(e, inp)

    def chat(self, max_tokens, stream=True):
        """A chat request of the workload's first text entry with max_tokens."""
        e = next(x for x in self.entries if x["endpoint"] != "openai-transcriptions")
        e = dict(e, endpoint="openai-chat", max_tokens=max_tokens, stream=stream)
        return request_of(e, e["inputs"][0])

    def audio(self):
        e = next(x for x in self.entries if x["endpoint"] == "openai-transcriptions")
        return request_of(e, max(e["inputs"], key=lambda i: len(i["body"])))


def request_of(e, inp):
    """{"kind", "path", "body", "ctype", "stream"} for entry e and input inp."""
    ep = e["endpoint"]
    if ep == "openai-transcriptions":
        return {"kind": "transcription", "path": PATHS[ep], "body": inp["body"],
                "ctype": inp["ctype"], "stream": False}
    req = {"model": e["model"], "max_tokens": e["max_tokens"], "temperature": e["temperature"],
           "stream": e["stream"]}
    if ep == "openai-chat":
        req["messages"] = inp["messages"]
    else:
        req["prompt"] = inp["prompt"]
    return {"kind": "chat" if ep == "openai-chat" else "completion", "path": PATHS[ep],
            "body": json.dumps(req).encode(), "ctype": "application/json",
            "stream": e["stream"]}


def request_head(req, port, rid, close=True):
    return ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n"
            "Content-Length: %d\r\nX-Request-Id: %s\r\n%s\r\n"
            % (req["path"], port, req["ctype"], len(req["body"]), rid,
               "Connection: close\r\n" if close else "")).encode()


# ---------------------------------------------------------------- one request

class _Cut(Exception):
    pass


async def _read_body(reader, rec, headers, t0, clock):
    # t0: the zero of rec's times (its start is rec["start"] after it)
    """The body after the headers: Content-Length, chunked or to EOF. For an
    event stream, notes the first `data:` event with text (TTFT) and
    whether `data: [DONE]` came."""
    te = headers.get("transfer-encoding", "").lower()
    sse = headers.get("content-type", "").startswith("text/event-stream")
    buf = b""

    def events(chunk):
        nonlocal buf
        buf += chunk
        while b"\n" in buf:
            ln, buf = buf.split(b"\n", 1)
            ln = ln.strip()
            if ln == b"data: [DONE]":
                rec["done"] = True
            elif ln.startswith(b"data:") and rec["ttft"] is None and b'"content"' in ln:
                rec["ttft"] = clock() - t0 - rec["start"]
    if "content-length" in headers:
        n = int(headers["content-length"])
        data = await reader.readexactly(n)
        rec["bytes"] += n
        rec["body"] = data[:400]
        return
    if "chunked" in te:
        while True:
            ln = await reader.readuntil(b"\r\n")
            rec["bytes"] += len(ln)
            n = int(ln.split(b";")[0], 16)
            data = await reader.readexactly(n + 2)
            rec["bytes"] += n + 2
            if n == 0:
                return
            if sse:
                events(data[:-2])
            elif len(rec["body"]) < 400:
                rec["body"] += data[:400]
    while True:
        data = await reader.read(65536)
        if not data:
            return
        rec["bytes"] += len(data)
        if sse:
            events(data)


async def _exchange(rec, port, req, clock, t0, close):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    except ConnectionRefusedError:
        rec["outcome"] = "refused"
        return
    rec["local_port"] = writer.get_extra_info("sockname")[1]
    try:
        writer.write(request_head(req, port, rec["id"], close) + req["body"])
        await writer.drain()
        rec["t_sent"] = clock() - t0
        line = await reader.readline()
        if not line:
            rec["outcome"] = "eof"
            return
        rec["bytes"] += len(line)
        while True:  # interim 1xx answers are skipped
            rec["status"] = int(line.split()[1])
            headers = {}
            while True:
                h = await reader.readline()
                if not h:
                    raise _Cut()
                rec["bytes"] += len(h)
                if h in (b"\r\n", b"\n"):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            if rec["status"] >= 200:
                break
            line = await reader.readline()
        rec["retry_after"] = headers.get("retry-after")
        await _read_body(reader, rec, headers, t0, clock)
        complete = not (req["stream"] and rec["status"] == 200) or rec["done"]
        rec["outcome"] = "answered" if complete else "protocol"
    except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError, _Cut,
            ConnectionAbortedError) as e:
        if rec["bytes"] == 0:
            rec["outcome"] = "eof" if isinstance(e, (asyncio.IncompleteReadError, _Cut)) else "reset"
        else:
            rec["outcome"] = "cut"
    except (ValueError, IndexError, asyncio.LimitOverrunError):
        rec["outcome"] = "protocol"
    finally:
        writer.close()


async def one_request(port, req, rid, timeout, t0, close=True):
    """Send req on a new connection; the record of what happened. Times are
    seconds from t0 (loop clock): start, t_sent (request written), end.
    outcome: answered (a complete response, any status), refused (connect
    refused), reset / eof (connection reset or closed before any response
    byte), cut (closed after part of the answer), protocol (malformed, or
    an event stream without data: [DONE]), timeout (no complete answer
    within timeout s: hung)."""
    loop = asyncio.get_running_loop()
    clock = loop.time
    rec = {"id": rid, "kind": req["kind"], "start": clock() - t0, "t_sent": None,
           "end": None, "status": None, "retry_after": None, "outcome": None, "bytes": 0,
           "ttft": None, "done": False, "local_port": None, "body": b""}
    try:
        await asyncio.wait_for(_exchange(rec, port, req, clock, t0, close), timeout)
    except asyncio.TimeoutError:
        rec["outcome"] = "timeout"
    except OSError as e:
        rec["outcome"] = "refused" if rec["local_port"] is None else "reset"
        rec["error"] = str(e)
    rec["end"] = clock() - t0
    rec["body"] = rec["body"][:200].decode("utf-8", "replace")
    return rec


async def open_loop(port, workload, rate, duration, timeout, t0, seed, prefix, stop=None):
    """Poisson arrivals of rate per second for duration seconds (or until
    the asyncio.Event stop is set), each request on its own connection;
    returns every record once all have ended (each within timeout)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    tasks, start, nxt, i = [], loop.time(), 0.0, 0
    while True:
        nxt += rng.expovariate(rate)
        if nxt > duration or (stop and stop.is_set()):
            break
        delay = start + nxt - loop.time()
        if delay > 0:
            if stop:
                if await _wait_stop(stop, delay):
                    break
            else:
                await asyncio.sleep(delay)
        i += 1
        tasks.append(asyncio.ensure_future(
            one_request(port, workload.pick(), "%s-%d" % (prefix, i), timeout, t0)))
    return list(await asyncio.gather(*tasks))


# ---------------------------------------------------------------- bad clients

async def _wait_stop(stop, seconds):
    """Sleep for seconds, or less when stop is set; True when it is."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False


def _raw_socket(rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setblocking(False)
    return s


async def reset_mid_upload(port, req, stop, stats, every_s=1.0):
    """Until stop: send a request's head and half its body, then reset the
    connection (SO_LINGER 0: RST, not FIN). stats['resets'] counts them."""
    loop = asyncio.get_running_loop()
    head = request_head(req, port, "soak-reset", close=True)
    half = req["body"][:len(req["body"]) // 2]
    while not stop.is_set():
        s = _raw_socket()
        try:
            await loop.sock_connect(s, ("127.0.0.1", port))
            await loop.sock_sendall(s, head + half)
            await asyncio.sleep(0.2)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stats["resets"] += 1
        except OSError as e:
            stats["errors"].append("reset client: %s" % e)
        finally:
            s.close()
        await _wait_stop(stop, every_s)


async def _recv_or_stop(loop, s, n, stop):
    """Up to n bytes from socket s (b"" at EOF), or None once stop is set."""
    recv = asyncio.ensure_future(loop.sock_recv(s, n))
    halt = asyncio.ensure_future(stop.wait())
    await asyncio.wait({recv, halt}, return_when=asyncio.FIRST_COMPLETED)
    halt.cancel()
    if recv.done():
        return recv.result()
    recv.cancel()
    return None


async def slow_reader(port, req, stop, stats, rid):
    """Send req, then read the answer one byte per second (a 4 KiB receive
    buffer, so the daemon's writes back up) until stop; then close."""
    loop = asyncio.get_running_loop()
    s = _raw_socket(4096)
    try:
        await loop.sock_connect(s, ("127.0.0.1", port))
        await loop.sock_sendall(s, request_head(req, port, rid, close=True) + req["body"])
        while not stop.is_set():
            b = await _recv_or_stop(loop, s, 1, stop)
            if b is None:
                break
            if not b:
                stats["slow_eof"] += 1
                break
            stats["slow_bytes"] += 1
            await _wait_stop(stop, 1.0)
    except OSError as e:
        stats["errors"].append("slow reader: %s" % e)
    finally:
        s.close()


async def sse_staller(port, req, stop, stats, rid):
    """Send a streamed req, read up to its first `data:` event, then stop
    reading (a 4 KiB receive buffer) until stop; then close."""
    loop = asyncio.get_running_loop()
    s = _raw_socket(4096)
    got = b""
    try:
        await loop.sock_connect(s, ("127.0.0.1", port))
        await loop.sock_sendall(s, request_head(req, port, rid, close=True) + req["body"])
        while b"data:" not in got:
            b = await _recv_or_stop(loop, s, 1024, stop)
            if not b:
                break
            got += b
        stats["stalled"] += b"data:" in got
        await stop.wait()
    except OSError as e:
        stats["errors"].append("SSE staller: %r" % e)
    finally:
        s.close()


async def write_staller(port, stop, stats, batch=8, limit=1000):
    """A client whose answers back up the daemon's writes: on a 4 KiB
    receive buffer it pipelines GET /metrics `batch` at a time, never
    reading, until the daemon's kernel send queue for it stops growing
    (full), then one more asking to close. The daemon then holds answers it
    cannot write, and only limits.send_timeout_ms ends the connection.
    Appends to stats['write_stalls'] {backed_up: kernel bytes held, cut_s:
    seconds from the close request until the daemon's socket was gone, or
    None when stop came first}."""
    loop = asyncio.get_running_loop()
    req = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
    s = _raw_socket(4096)
    rec = {"backed_up": None, "cut_s": None}
    try:
        await loop.sock_connect(s, ("127.0.0.1", port))
        me = s.getsockname()[1]
        last = -1
        for _ in range(limit):
            await loop.sock_sendall(s, (req + b"\r\n") * batch)
            q, settled = None, 0
            while settled < 3 and not stop.is_set():  # this batch answered
                await asyncio.sleep(0.05)
                now = send_queue(port, me)
                settled = settled + 1 if now == q else 0
                q = now
            if stop.is_set() or q is None or q == last:
                break
            last = q
        rec["backed_up"] = q
        await loop.sock_sendall(s, req + b"Connection: close\r\n\r\n")
        t = time.monotonic()
        while not stop.is_set():
            if send_queue(port, me) is None:
                rec["cut_s"] = time.monotonic() - t
                break
            await _wait_stop(stop, 0.25)
    except OSError as e:
        stats["errors"].append("write staller: %s" % e)
    finally:
        s.close()
        stats["write_stalls"].append(rec)


# ---------------------------------------------------------------- sampling

def proc_sample(pid):
    """{rss_mb, fds, threads} of process pid, or None when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
        return {"rss_mb": rss / 1024.0, "fds": len(os.listdir("/proc/%d/fd" % pid)),
                "threads": len(os.listdir("/proc/%d/task" % pid))}
    except (OSError, StopIteration):
        return None


_QD = re.compile(r'^inferd_model_queue_depth\{model="([^"]*)"\} (\S+)$', re.M)
_HEAP = re.compile(r'^inferd_memory_(allocated|allocator_kept)_bytes'
                   r'\{allocator="([^"]*)"\} (\S+)$', re.M)


def metrics_text(port, timeout=5.0):
    """GET /metrics's body, or None."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/metrics", headers={"Connection": "close"})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
    except (OSError, http.client.HTTPException):
        return None
    return text if r.status == 200 else None


def queue_depth(port, timeout=5.0):
    """{model: requests waiting} from GET /metrics, or None."""
    text = metrics_text(port, timeout)
    return None if text is None else {m: int(float(v)) for m, v in _QD.findall(text)}


def heap_in_use(port):
    """The allocator's own account from /metrics (inferd_memory_allocated_bytes,
    inferd_memory_allocator_kept_bytes): {allocator, in_use_mb, kept_mb
    (freed pages kept for reuse, not yet handed back)}, or None (no such
    series, or an allocator that reports nothing)."""
    text = metrics_text(port)
    got = {kind: (alloc, float(v)) for kind, alloc, v in _HEAP.findall(text or "")}
    if len(got) != 2 or not got["allocated"][0]:
        return None
    return {"allocator": got["allocated"][0], "in_use_mb": got["allocated"][1] / 1e6,
            "kept_mb": got["allocator_kept"][1] / 1e6}


class Sampler(threading.Thread):
    """Every interval_s: the daemon's RSS, open fds, threads (/proc) and each
    model's queue depth (/metrics), tagged with the phase set by the caller
    (self.phase). pid_fn() gives the daemon's pid now (restarts change it)."""

    def __init__(self, pid_fn, port, interval_s, t0):
        super().__init__(daemon=True)
        self.pid_fn, self.port, self.interval_s, self.t0 = pid_fn, port, interval_s, t0
        self.phase, self.samples, self.halt = "start", [], threading.Event()

    def take(self):
        s = {"t": round(time.monotonic() - self.t0, 2), "phase": self.phase}
        p = proc_sample(self.pid_fn())
        s.update(p or {"rss_mb": None, "fds": None, "threads": None})
        s["queue"] = queue_depth(self.port) if p else None
        self.samples.append(s)
        return s

    def run(self):
        while not self.halt.is_set():
            self.take()
            self.halt.wait(self.interval_s)


# ---------------------------------------------------------------- /proc/net/tcp

def accepted_conns(port):
    """{client port: bytes the daemon has not read yet} for every TCP
    connection to 127.0.0.1:port that a process holds as a socket (inode
    not 0: accepted; connections still in the listen backlog have none)."""
    out = {}
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for ln in f:
                v = ln.split()
                lp = int(v[1].split(":")[1], 16)
                if lp != port or v[9] == "0" or v[3] == "0A":  # 0A: LISTEN
                    continue
                rx = int(v[4].split(":")[1], 16)
                out[int(v[2].split(":")[1], 16)] = rx
    except OSError:
        pass
    return out


def send_queue(port, peer):
    """The kernel's unsent bytes (tx_queue) of the daemon's established
    socket 127.0.0.1:port -> client port peer, or None when there is none."""
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for ln in f:
                v = ln.split()
                if (int(v[1].split(":")[1], 16) == port and
                        int(v[2].split(":")[1], 16) == peer and v[3] == "01"):
                    return int(v[4].split(":")[0], 16)
    except OSError:
        pass
    return None


def pct(xs, p):
    """Nearest-rank percentile p (0-100) of xs, None when empty."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]
