#!/usr/bin/env python3
"""A static file server on loopback that answers single-range requests, for tests/cli_http.sh.

Usage: http_range_server.py ROOT PORTFILE LOG [FAULT]
Serves the files in ROOT at 127.0.0.1 on a free port, written to PORTFILE once listening; each
request is appended to LOG as "GET /path first-last status bytes". FAULT misbehaves on purpose:
  drop:N     the first N requests get their connection closed without an answer
  500:N      the first N requests are answered 500
  stall      every request after the first is never answered (the connection stays open)
  corrupt    every answer after the first has one byte flipped
  norange    ranges are ignored: every answer is the whole file, 200
"""
import http.server
import os
import re
import socketserver
import sys
import threading
import time

root, portfile, logpath = sys.argv[1:4]
fault = sys.argv[4] if len(sys.argv) > 4 else ""
kind, _, count = fault.partition(":")
count = int(count or 0)
lock = threading.Lock()
served = 0


def log(line):
    with lock, open(logpath, "a") as f:
        f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK wait

    def log_message(self, *args):
        pass

    def do_GET(self):
        global served
        with lock:
            served += 1
            n = served
        path = os.path.join(root, os.path.basename(self.path.split("?")[0]))
        if kind == "drop" and n <= count:
            log(f"GET {self.path} - drop 0")
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if kind == "500" and n <= count:
            self.reply(500, b"busy\n", None)
            return
        if kind == "stall" and n > 1:
            log(f"GET {self.path} - stall 0")
            time.sleep(3600)
            return
        if not os.path.isfile(path):
            self.reply(404, b"not found\n", None)
            return
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not m or kind == "norange":
            self.reply(200, open(path, "rb").read(), None)
            return
        first = int(m.group(1))
        last = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if first >= size:
            self.reply(416, b"", f"bytes */{size}")
            return
        with open(path, "rb") as f:
            f.seek(first)
            part = bytearray(f.read(last + 1 - first))
        if kind == "corrupt" and n > 1:
            part[len(part) // 2] ^= 0x5A
        self.reply(206, bytes(part), f"bytes {first}-{last}/{size}")

    def reply(self, status, body, content_range):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()
        self.wfile.write(body)
        span = content_range.split(" ")[1].split("/")[0] if content_range else "-"
        log(f"GET {self.path} {span} {status} {len(body)}")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up mid-answer (on purpose, in the norange case)


server = Server(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
server.serve_forever()
