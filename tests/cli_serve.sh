#!/usr/bin/env bash
# terra serve under abuse, over loopback only (the server listens on 127.0.0.1; clients connect from
# 127.0.0.1, and from 127.0.0.2 for the per-address cap): malformed targets (%00, a raw NUL, bytes
# outside the grammar), too many query parameters, Accept-Encoding q-values, decompression bombs,
# the archive truncated and rewritten in place under the server (and while /archive.terra goes
# out: cut short), one descriptor per opening, request timeouts while a reopen blocks, slow clients
# (a byte every half second) next to a normal one, 200 idle connections next to a fresh client, raw
# requests with bad framing (obs-fold, bad or differing Content-Length, no Host...), If-Range,
# keep-alive. Raw exchanges assert exact status lines and body lengths. Every wait is bounded; the
# servers are stopped by the trap.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
helper="$(dirname "$T")/test_serve_request" # writes the hostile archives (tests/test_serve_request.c)
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "SKIP cli_serve: $tool not installed"; exit 77; }
done
[ -x "$helper" ] || { echo "FAIL: $helper not built" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_serve.XXXXXX")
pids=()
cleanup() {
  # a watcher still waiting on the FIFO below would hold its server's exit
  if [ -p "$work/blocked.terra" ]; then timeout 2 sh -c ': >"$1"' _ "$work/blocked.terra" || true; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/serve.err" ] && tail -5 "$work/serve.err" >&2; exit 1; }

# start_server NAME ARCHIVE [OPTIONS...]: sets url and port; the server's stderr is in NAME.err
start_server() {
  local name=$1 archive=$2
  shift 2
  "$T" serve --port 0 --threads 2 "$@" "$archive" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  server_pid=$!
  for _ in $(seq 1 100); do grep -q "http://" "$work/$name.out" 2>/dev/null && break; sleep 0.05; done
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/$name.out") || fail "$name did not start: $(cat "$work/$name.err")"
  port=${url##*:}
}
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' "$@"; }
alive() { kill -0 "$server_pid" 2>/dev/null || fail "the server died ($*)"; }
# raw REQUEST-BYTES (a Python bytes literal): the status line of the answer, or "none"
raw() {
  python3 - "$port" "$1" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(eval(sys.argv[2]))
try:
    line = s.recv(4096).split(b"\r\n")[0].decode("latin-1")
except OSError:
    line = ""
print(line or "none")
EOF
}

# rawhttp: exchanges of raw bytes, the answers split into responses exactly as sent
cat >"$work/rawhttp.py" <<'EOF'
import re, socket

def connect(port, source="127.0.0.1"):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s

def read_all(s, wait=5):
    """what arrives until the server closes the connection: (bytes, closed); closed is False
    when nothing more came for `wait` seconds with the connection still open"""
    data = b""
    s.settimeout(wait)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return data, True
            data += d
    except socket.timeout:
        return data, False
    except OSError:
        return data, True

def parse(data):
    """the responses in data, as (status line, {lower-case name: value}, body), and the bytes left
    over (a response cut short, or anything after the last one)"""
    out = []
    while b"\r\n\r\n" in data:
        head, rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        fields = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            fields[k.strip().lower()] = v.strip()
        n = int(fields.get("content-length", len(rest)))
        if len(rest) < n:
            break
        out.append((lines[0], fields, rest[:n]))
        data = rest[n:]
    return out, data

def exchange(port, raw, source="127.0.0.1"):
    """raw sent on a new connection: (responses, left over, closed)"""
    s = connect(port, source)
    s.sendall(raw)
    data, closed = read_all(s)
    s.close()
    return parse(data) + (closed,)

def one(port, raw, status):
    """raw must get exactly one response, with this status line and a body as long as its
    Content-Length, and the connection closed after it; returns the response or a complaint"""
    rs, left, closed = exchange(port, raw)
    if len(rs) != 1 or left or not closed:
        return None, "%d responses, %d bytes left over, %s: %r" % (len(rs), len(left), "closed" if closed else "open", raw[:60])
    if rs[0][0] != status:
        return None, "%r: %s, expected %s" % (raw[:60], rs[0][0], status)
    return rs[0], None
EOF

"$T" bake -q --levels 3 --area 0,0,256,256 --cells 16 "$work/a.terra"
"$T" bake -q --levels 3 --area 0,0,256,256 --cells 8 "$work/b.terra"
"$T" export "$work/a.terra" "$work/tree" >/dev/null
"$helper" --archives "$work" || fail "cannot write the hostile archives"

# ---- requests ----
cp "$work/a.terra" "$work/served.terra"
start_server serve "$work/served.terra" --request-timeout 2 --max-per-client 8
curl -sf -m 5 "$url/layer.json" -o "$work/layer.json" || fail "GET layer.json"
cmp -s "$work/layer.json" "$work/tree/layer.json" || fail "served layer.json differs from the exported one"
curl -sf -m 5 "$url/2/1/1.terrain?v=1.0.0" -o "$work/t.raw" || fail "GET a tile"
cmp -s "$work/t.raw" "$work/tree/2/1/1.terrain" || fail "served tile differs from the exported one"
[ "$(code "$url/0/0/0.terrain%00")" = 400 ] || fail "%00 in the path not 400"
[ "$(code "$url/0/0/0.terrain?v=%00")" = 400 ] || fail "%00 in the query not 400"
[ "$(code "$url/0/0/0%2eterrain")" = 400 ] || fail "an escape in the path not 400"
[ "$(code "$url/0/0/0.terrain;x")" = 400 ] || fail "a byte outside the grammar not 400"
[ "$(raw "b'GET /0/0/0.terrain\x00junk HTTP/1.1\r\nHost: a\r\n\r\n'")" = "HTTP/1.1 400 Bad Request" ] || fail "raw NUL not 400"
[ "$(raw "b'GET /0/0/0.terrain\x00 HTTP/1.1\r\nHost: a\r\n\r\n'")" = "HTTP/1.1 400 Bad Request" ] || fail "raw NUL at the end not 400"
[ "$(raw "b'GET /0/0/0.terrain HTTP/1.1\r\nHost: a\r\n\r\n'")" = "HTTP/1.1 200 OK" ] || fail "raw request not 200"
# 500 query parameters: answered (414) at once, not held for the connection timeout
q=$(python3 -c "print('&'.join('p%d=1' % i for i in range(500)))")
[ "$(code -m 2 "$url/0/0/0.terrain?$q")" = 414 ] || fail "500 query parameters not 414 within 2 s"
q16=$(python3 -c "print('&'.join('p%d=1' % i for i in range(16)))")
[ "$(code "$url/0/0/0.terrain?$q16")" = 200 ] || fail "16 query parameters refused"
[ "$(code "$url/0/0/0.terrain?$q16&one=more")" = 414 ] || fail "17 query parameters not 414"
# Accept-Encoding q-values
for ae in 'gzip;q=0' 'identity' 'gzip;q=0, deflate' '*;q=0' 'x-gzip;q=0.000'; do
  curl -s -m 5 -D "$work/h.txt" -H "Accept-Encoding: $ae" "$url/2/1/1.terrain" -o "$work/t.id"
  if grep -qi '^content-encoding' "$work/h.txt"; then fail "'$ae' got a Content-Encoding"; fi
  cmp -s "$work/t.id" "$work/t.raw" || fail "'$ae' got another body"
done
for ae in 'gzip' 'br, gzip;q=0.5' '*' 'GZIP;Q=1'; do
  curl -s -m 5 -D "$work/h.txt" -H "Accept-Encoding: $ae" "$url/2/1/1.terrain" -o "$work/t.gz"
  grep -qi '^content-encoding: gzip' "$work/h.txt" || fail "'$ae' got no gzip"
  gunzip -c "$work/t.gz" | cmp -s - "$work/t.raw" || fail "'$ae': the gzip body is not the tile"
done
alive "requests"

# ---- framing: every bad head is one 400 (status line once, the body its Content-Length long) and
# the connection closes; the good ones are answered, kept alive unless they carry content ----
size=$(stat -c %s "$work/served.terra")
python3 - "$port" "$work" "$size" <<'EOF' || fail "framing, keep-alive or If-Range (see above)"
import sys
sys.path.insert(0, sys.argv[2])
from rawhttp import *
port, size = int(sys.argv[1]), int(sys.argv[3])
bad = 0
def expect(raw, status, body=None):
    global bad
    r, why = one(port, raw, status)
    if why or (body is not None and len(r[2]) != body):
        print("FAIL", why or "%r: a body of %d bytes, expected %d" % (raw[:60], len(r[2]), body))
        bad += 1
    return r
R = b"GET /0/0/0.terrain HTTP/1.1\r\n"
for raw in [R + b"Host: a\r\nContent-Length: abc\r\n\r\n",
            R + b"Host: a\r\nContent-Length: -1\r\n\r\n",
            R + b"Host: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            R + b"Host: a\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello",  # differing
            R + b"Host: a\r\nContent-Length: 5, 6\r\n\r\nhello!",
            R + b"Host: a\r\nX-A: b\r\n c\r\n\r\n",                       # obs-fold
            R + b"X-A: b\r\n\tc\r\nHost: a\r\n\r\n",
            R + b" Host: a\r\n\r\n",                                       # white space before the first field
            R + b"Host : a\r\n\r\n",                                       # white space before the colon
            R + b"Host: a\r\nX-A: b\x00c\r\n\r\n",                        # a NUL in a value
            R + b"\r\n",                                                   # HTTP/1.1 without Host
            R + b"Host: a\r\nHost: b\r\n\r\n",
            R + b"Host: a b\r\n\r\n",
            R + b"Host: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
            R + b"Host: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"GET /0/0/0.terrain HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]:
    expect(raw, "HTTP/1.1 400 Bad Request")
expect(R + b"Host: a\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(64)) + b"\r\n",
       "HTTP/1.1 431 Request Header Fields Too Large")  # 65 fields
tile = expect(R + b"Host: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK")
n = len(tile[2]) if tile else -1
# accepted heads; those with content are answered and closed, the content never read as a request
for raw in [R + b"Host: a\r\nContent-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            R + b"Host: a\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(62)) + b"Connection: close\r\n\r\n",  # 64
            b"GET /0/0/0.terrain HTTP/1.0\r\n\r\n",
            R + b"Host: a\r\nContent-Length: 18\r\n\r\nGET /x HTTP/1.1\r\n\r\n",
            R + b"Host: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"]:
    expect(raw, "HTTP/1.1 200 OK", n)

# keep-alive: two requests one after the other on one connection, then two sent at once
s = connect(port)
try:
    for target in [b"/layer.json", b"/0/0/0.terrain"]:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
        data = b""
        while not parse(data)[0]:
            d = s.recv(65536)
            if not d:
                raise OSError("closed after " + target.decode())
            data += d
        rs, left = parse(data)
        if len(rs) != 1 or left or rs[0][0] != "HTTP/1.1 200 OK" or rs[0][1].get("connection") == "close":
            raise OSError("%s: %s, Connection: %s" % (target.decode(), rs[0][0], rs[0][1].get("connection")))
    s.sendall(b"GET /0/0/0.terrain HTTP/1.1\r\nHost: a\r\n\r\nGET /layer.json HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    rs, left = parse(read_all(s)[0])
    if [r[0] for r in rs] != ["HTTP/1.1 200 OK"] * 2 or len(rs[0][2]) != n or left:
        raise OSError("pipelined: %s, %d bytes left over" % ([r[0] for r in rs], len(left)))
except OSError as e:
    print("FAIL: keep-alive:", e); bad += 1
s.close()

# If-Range (RFC 9110 13.1.5): only the current strong ETag lets the Range through
A = b"GET /archive.terra HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\n"
rs, left, closed = exchange(port, A + b"Connection: close\r\n\r\n")
etag = rs[0][1].get("etag", "") if rs else ""
if not rs or rs[0][0] != "HTTP/1.1 206 Partial Content" or len(rs[0][2]) != 10 or not etag.startswith('"'):
    print("FAIL: a range with no If-Range:", rs[0][0] if rs else "none", "ETag", etag); bad += 1
expect(A + b"If-Range: " + etag.encode() + b"\r\nConnection: close\r\n\r\n", "HTTP/1.1 206 Partial Content", 10)
for v in [b'"another"', b"W/" + etag.encode(), etag.encode()[:-2] + b'"', b"Sun, 06 Nov 1994 08:49:37 GMT", b""]:
    r = expect(A + b"If-Range: " + v + b"\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK", size)
    if r and "content-range" in r[1]:
        print("FAIL: If-Range %r: a 200 with a Content-Range" % v); bad += 1
sys.exit(1 if bad else 0)
EOF
alive "framing"

# ---- slow clients next to a normal one (--request-timeout 2, --max-per-client 8) ----
python3 - "$port" <<'EOF' || fail "slow clients starved a normal client or were not cut (see above)"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
request = b"GET /0/0/0.terrain HTTP/1.1\r\nHost: a\r\nX-Slow: " + b"x" * 40

def slow(source, n):
    conns = []
    for _ in range(n):
        s = socket.socket()
        try:
            s.bind((source, 0))
        except OSError:
            s.close()
            return None  # no second loopback address here
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        conns.append([s, time.monotonic(), None, 0])  # socket, opened, closed at, bytes answered
    return conns

def drip(conns, seconds, check):
    """sends one byte a half second on each connection for `seconds`, noting when the server closes
    it; meanwhile `check` fetches tiles as a normal client"""
    end = time.monotonic() + seconds
    worst = 0.0
    while time.monotonic() < end:
        for c in conns:
            if c[2] is not None:
                continue
            try:
                c[0].send(request[c[3] % len(request):][:1])
                c[3] += 1
                data = c[0].recv(1024)
                if data == b"":
                    c[2] = time.monotonic()
                else:
                    print("a slow client got an answer:", data[:40]); sys.exit(1)
            except BlockingIOError:
                pass
            except OSError:
                c[2] = time.monotonic()
        worst = max(worst, check())
        time.sleep(0.5)
    return worst

def fetch():
    t = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d/0/0/0.terrain" % port, timeout=3) as r:
        if r.status != 200 or not r.read():
            print("normal client: status", r.status); sys.exit(1)
    return time.monotonic() - t

# A: six slow connections from the normal client's own address (under its cap of 8)
a = slow("127.0.0.1", 6)
worst = drip(a, 4, fetch)
cut = [c[2] - c[1] for c in a if c[2] is not None]
print("slow A: %d of %d cut after %s s; normal client's slowest tile %.3f s" % (
    len(cut), len(a), ",".join("%.1f" % x for x in cut), worst))
if len(cut) != len(a) or max(cut) > 3.5 or min(cut) < 1.5:
    print("slow connections not cut between 1.5 and 3.5 s after they opened"); sys.exit(1)
if worst > 1.0:
    print("normal client starved"); sys.exit(1)
# B: thirty from another loopback address: at most 8 held, the rest refused at once
b = slow("127.0.0.2", 30)
if b is None:
    print("slow B: skipped (cannot bind 127.0.0.2)")
else:
    time.sleep(0.5)
    worst = drip(b, 1, fetch)
    held = sum(1 for c in b if c[2] is None)
    print("slow B: %d of 30 held after 1.5 s; normal client's slowest tile %.3f s" % (held, worst))
    if held > 8 or worst > 1.0:
        print("per-address cap not applied, or the normal client starved"); sys.exit(1)
    for c in b:
        c[0].close()
EOF
alive "slow clients"

# ---- the archive truncated and rewritten in place under the server ----
# truncated, then asked at once (before the watcher's next look): 503 each time, whole bodies,
# never the old Content-Length with the bytes missing
python3 - "$port" "$work" <<'EOF' || fail "truncated archive (see above)"
import os, sys
sys.path.insert(0, sys.argv[2])
from rawhttp import *
port = int(sys.argv[1])
os.truncate(sys.argv[2] + "/served.terra", 1000)
bad = 0
for target, extra in [(b"/archive.terra", b""), (b"/archive.terra", b"Range: bytes=0-99\r\n"),
                      (b"/archive.terra", b"Range: bytes=2000-2099\r\n"), (b"/2/1/1.terrain", b""), (b"/layer.json", b"")]:
    r, why = one(port, b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n" + extra + b"Connection: close\r\n\r\n",
                 "HTTP/1.1 503 Service Unavailable")
    if why or r[1].get("retry-after") != "1":
        print("FAIL", target, extra, why or "no Retry-After: 1"); bad += 1
sys.exit(1 if bad else 0)
EOF
sleep 0.1
for i in $(seq 1 8); do
  c=$(code "$url/2/1/1.terrain")
  [ "$c" = 500 ] || [ "$c" = 503 ] || fail "truncated archive: tile answered $c"
  sleep 0.1
done
alive "truncated archive"
[ "$(code "$url/layer.json")" = 503 ] || fail "layer.json of an unreadable archive not 503"
cat "$work/b.terra" >"$work/served.terra" # rewritten in place, another archive
ok=
for _ in $(seq 1 40); do [ "$(code "$url/2/1/1.terrain")" = 200 ] && ok=1 && break; sleep 0.1; done
[ -n "$ok" ] || fail "rewritten archive not served again within 4 s"
"$T" export "$work/b.terra" "$work/tree_b" >/dev/null
curl -sf -m 5 "$url/2/1/1.terrain" -o "$work/t_b.raw" && cmp -s "$work/t_b.raw" "$work/tree_b/2/1/1.terrain" \
  || fail "the rewritten archive's tile is not served"
grep -q "reopened" "$work/serve.err" || fail "no reopen reported"
# garbage of the same size in place: every tile fails its checksum or the header, never a crash
# (until the server notices the change, the opening it holds reads the garbage: 404 or 500)
head -c "$(stat -c %s "$work/b.terra")" /dev/urandom >"$work/served.terra"
seen=
for i in $(seq 1 30); do
  c=$(code "$url/2/1/1.terrain")
  case "$c" in 503) seen=1; break ;; 404 | 500) ;; *) fail "garbage archive: tile answered $c" ;; esac
  sleep 0.1
done
[ -n "$seen" ] || fail "garbage archive: no 503 within 3 s"
for i in $(seq 1 4); do [ "$(code "$url/2/1/1.terrain")" = 503 ] || fail "garbage archive: not 503 once noticed"; done
alive "garbage archive"
cp "$work/a.terra" "$work/served.terra.new" && mv "$work/served.terra.new" "$work/served.terra" # replaced by rename
ok=
for _ in $(seq 1 40); do [ "$(code "$url/2/1/1.terrain")" = 200 ] && ok=1 && break; sleep 0.1; done
[ -n "$ok" ] || fail "replaced archive not served within 4 s"
kill "$server_pid"; wait "$server_pid" || fail "serve exited with $? on SIGTERM"

# ---- one opening, one descriptor: the bytes served and the strong ETag are of one file ----
# (the old server validated the archive through one descriptor and opened the path again for the
# ETag and the change check: a rename in between paired the old bytes with the new file's tag)
"$T" bake -q --levels 4 --area 0,0,1024,1024 --cells 64 --compression none "$work/big.terra"
cp "$work/big.terra" "$work/inplace.terra"
start_server inplace "$work/inplace.terra"
held=$(find "/proc/$server_pid/fd" -lname "$work/inplace.terra" | wc -l)
[ "$held" = 1 ] || fail "the server holds $held descriptors of the archive, not one"
# the file rewritten in place (same size, other bytes) while /archive.terra goes out to a slow
# reader: the response is cut short, and nothing after the rewrite goes out under the old ETag
python3 - "$port" "$work/inplace.terra" <<'EOF' || fail "a body spliced from two files (see above)"
import socket, sys
port, path = int(sys.argv[1]), sys.argv[2]
orig = open(path, "rb").read()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server cannot run far ahead
s.settimeout(10)
s.connect(("127.0.0.1", port))
s.sendall(b"GET /archive.terra HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
data = b""
while b"\r\n\r\n" not in data or len(data) < 65536:
    data += s.recv(4096)
head, body = data.split(b"\r\n\r\n", 1)
length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
half = len(orig) // 2
with open(path, "r+b") as f:
    f.seek(half)
    f.write(bytes(255 - b for b in orig[half:]))
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        body += d
except OSError:
    pass
print("inplace: %d of %d bytes before the connection closed" % (len(body), length))
if len(body) >= length:
    print("FAIL: the whole body went out, %s" % ("spliced from two files" if body != orig else "unchanged"))
    sys.exit(1)
if body != orig[:len(body)]:
    print("FAIL: bytes of the rewritten file went out under the old ETag")
    sys.exit(1)
EOF
grep -q "changed while byte .* went out: the response is cut short" "$work/inplace.err" || fail "the cut not logged"
alive "rewritten while sent"
kill "$server_pid"; wait "$server_pid" || fail "serve exited with $? on SIGTERM"

# ---- request timeouts while the archive is being reopened: a reopen that blocks (the path made a
# FIFO with no writer: open() waits there, as a large archive's validation takes seconds) does not
# hold up the sweep of overdue requests ----
cp "$work/a.terra" "$work/blocked.terra"
start_server blocked "$work/blocked.terra" --request-timeout 0.5
mkfifo "$work/fifo" && mv "$work/fifo" "$work/blocked.terra"
sleep 0.6 # the watcher's next look: it opens the FIFO and waits there
python3 - "$port" <<'EOF' || fail "a request timeout was not enforced during a blocked reopen (see above)"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /0/0/0.terrain HTTP/1.1\r\nHost: a\r\n")  # never finished
t = time.monotonic()
try:
    closed = s.recv(1024) == b""
except socket.timeout:
    closed = False
except OSError:  # reset
    closed = True
print("blocked reopen: an unfinished request %s after %.1f s" % ("closed" if closed else "still open", time.monotonic() - t))
sys.exit(0 if closed else 1)
EOF
# a writer lets the watcher's open() return (it then reads no archive there)
timeout 5 sh -c ': >"$1"' _ "$work/blocked.terra" || fail "the watcher was not waiting on the FIFO"
alive "blocked reopen"
kill "$server_pid"; wait "$server_pid" || fail "serve exited with $? on SIGTERM"

# ---- 200 idle connections from one process (the defaults: --max-per-client 32, --request-timeout
# 10) next to a fresh client from the same address: it is answered on its first try, while they are
# held (the old server refused it until the idle ones timed out) ----
start_server idle "$work/a.terra"
python3 - "$port" "$work" <<'EOF' || fail "idle connections locked a fresh client out (see above)"
import sys
sys.path.insert(0, sys.argv[2])
from rawhttp import *
port = int(sys.argv[1])
idle = [connect(port) for _ in range(200)]
r, why = one(port, b"GET /0/0/0.terrain HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK")
if why:
    print("FAIL: a fresh client next to 200 idle connections:", why); sys.exit(1)
# and the idle ones over the cap were closed to make room, the newest 32 kept
s = idle[-1]
s.sendall(b"GET /layer.json HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
rs, left = parse(read_all(s)[0])
if [x[0] for x in rs] != ["HTTP/1.1 200 OK"]:
    print("FAIL: the newest idle connection was not kept:", [x[0] for x in rs]); sys.exit(1)
closed = sum(1 for c in idle[:100] if read_all(c, 2)[1])
if closed != 100:
    print("FAIL: %d of the 100 oldest idle connections closed, expected all" % closed); sys.exit(1)
EOF
kill "$server_pid"; wait "$server_pid" || fail "serve exited with $? on SIGTERM"
grep -q "closed over --max-per-client" "$work/idle.err" || fail "closing idle connections not reported: $(cat "$work/idle.err")"

# ---- decompression bombs ----
start_server bomb "$work/bomb.terra"
[ "$(code "$url/0/0/0.terrain")" = 200 ] || fail "the honest tile next to the bombs"
for ae in gzip identity; do
  for t in 0/1/0 0/0/1; do
    c=$(curl -s -m 5 -o "$work/body" -w '%{http_code}' -H "Accept-Encoding: $ae" "$url/$t.terrain")
    [ "$c" = 500 ] || fail "bomb $t ($ae) answered $c"
    [ "$(stat -c %s "$work/body")" -lt 1000 ] || fail "bomb $t ($ae): a body of $(stat -c %s "$work/body") bytes"
  done
done
c=$(curl -s -m 5 -o "$work/body" -w '%{http_code}' "$url/0/1/1.terrain")
[ "$c" = 500 ] || fail "a tile that does not decode answered $c (info --verify refuses it)"
alive "bombs"
grep -q "over the limit" "$work/bomb.err" || fail "the stated bomb not reported: $(cat "$work/bomb.err")"
grep -q "does not inflate to the 1000 bytes\|decompresses to more than its stated 1000 bytes" "$work/bomb.err" \
  || fail "the lying bomb not reported: $(cat "$work/bomb.err")"
# a log line names the tile one way: the request's z/x/y, and the archive's name for it the same
grep -q "/0/0/1.terrain: .*: tile 0/0/1 (level 0, x 0, y 1): decompresses to more than" "$work/bomb.err" \
  || fail "the lying bomb's tile named two ways: $(cat "$work/bomb.err")"
kill "$server_pid"; wait "$server_pid" || fail "serve exited with $? on SIGTERM"

# ---- options ----
"$T" serve --help | grep -q -- "--request-timeout" || fail "--help lacks the limits"
for bad in "--max-per-client 0" "--request-timeout 0" "--request-timeout nan" "--max-query-params -1" \
  "--max-tile-mb 33" "--max-connections x" "--idle-timeout 0"; do
  set +e
  # shellcheck disable=SC2086
  "$T" serve $bad "$work/a.terra" >/dev/null 2>"$work/err.txt"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "serve $bad: exit $rc, expected 2"
done
echo "cli_serve: all checks passed"
