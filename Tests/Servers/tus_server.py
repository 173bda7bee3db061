#!/usr/bin/env python3
"""A real tus 1.0 server for Ferry's integration tests: tuspyserver 4.4.3 (a FastAPI router) under
uvicorn, behind a small TCP proxy in the same process that can cut one upload's connection.

    tus_server.py --files DIR [--port N] [--prefix /files] [--cut-at BYTES] [--stall-at BYTES]
                 [--pause-at BYTES]

Prints one JSON line once both listeners are up, the endpoint clients use (the proxy's port):

    {"listening": "http://127.0.0.1:PORT/files"}

GET /__stats on the same port answers JSON: patchBytes (PATCH body bytes the tus app read: stored,
except a body refused past Upload-Length), postBytes, counts (requests by method), cuts, requests
(method, path, uploadOffset, bodyBytes, status: what the app answered, which a cut request's client
never saw; cut), uploads (every upload in DIR: id, name, size, offset) and completed (id, name,
size, sha256 of the stored file). A PATCH refused before its body is read (404, 409) counts 0 bytes.

--cut-at BYTES: the first PATCH that takes an upload to BYTES (its Upload-Offset plus the body bytes
the app has read) is cut there: the app is handed exactly up to byte BYTES of the upload, then sees
a client disconnect, and the proxy resets (SO_LINGER 0) both the client's connection and its own to
uvicorn. tuspyserver keeps what it read, so afterwards HEAD answers Upload-Offset: BYTES. Once only.
POST bodies (creation-with-upload) are counted but never cut.

--pause-at BYTES: the first PATCH that takes an upload to BYTES stops being read there (the client's
writes block once the buffers are full) until GET /__release, then is read on and answered as usual.
Once only; `pauses` in the stats counts it.

How tuspyserver 4.4.3 behaves (read from its source, checked by tus_server_selftest.py):
- OPTIONS PREFIX/: 204 with Tus-Version and Tus-Resumable 1.0.0, Tus-Extension "creation,
  creation-defer-length,creation-with-upload,expiration,termination,concatenation" (no spaces),
  Tus-Max-Size (max_size, 128849018880 by default). No checksum extension: no
  Tus-Checksum-Algorithm, and Upload-Checksum is ignored. OPTIONS PREFIX (no slash) answers 405
  (POST holds that path, so there is no redirect).
- Tus-Resumable: 1.0.0 is required on POST, HEAD, PATCH and DELETE (412 with Tus-Version without
  it); optional on OPTIONS.
- POST PREFIX (or PREFIX/): 201, Location absolute, built from Host (or X-Forwarded-Host/-Proto):
  http://HOST/files/<32 hex>; Upload-Expires (RFC 7231 date, now + days_to_keep, 5 days by default).
  Upload-Length, or Upload-Defer-Length: 1. Upload-Metadata is parsed but not required at creation.
  creation-with-upload: a POST body is read whole into memory (request.body()), appended to the
  file, and answered with Upload-Offset; its Content-Type is not checked, nor the body against
  Upload-Length (a longer body is stored, offset past the length); the completion hook does not run
  even if the body completes the upload; a POST cut mid-body still answers 201 (to nobody), offset 0.
- HEAD PREFIX/<id>: 200, Upload-Offset, Upload-Length (or Upload-Defer-Length: 1), Content-Length =
  Upload-Length, Cache-Control: no-store, Upload-Metadata (filename and filetype only), Tus-Resumable.
  No Upload-Expires on HEAD. HEAD answers 400 unless the metadata has filename (or name) AND filetype
  (or type): a tus client must send both or it cannot resume. Unknown id: 404; expired: 410.
- PATCH PREFIX/<id>: needs Content-Length (422 without it: no chunked bodies), Upload-Offset (400
  without it), Content-Type exactly application/offset+octet-stream (415) and Tus-Resumable (412).
  Unknown id: 404; Upload-Offset not the stored offset: 409 "Offset mismatch" (the body is not read);
  body past Upload-Length: 400; past max_size: 413; expired: 410. Success: 204 with Upload-Offset,
  Upload-Expires, Tus-Resumable. The Content-Length, Content-Type and Tus-Resumable checks run AFTER
  the body has been stored (the body is a FastAPI dependency): a PATCH answered 422 (chunked), 415 or
  412 still advanced the offset. A body running past Upload-Length is refused (400) only at the chunk
  that crosses it, and the chunks before it stay in the data file while the offset does not move:
  the file is corrupt from then on (never complete: its size no longer matches).
- PATCH bodies stream: each chunk uvicorn hands over (at most 64 KiB buffered) is appended and
  flushed to the file; a whole 64 MiB PATCH in one request is fine and is not held in memory. The
  offset in the .info file is written once, when the body ends.
- A PATCH cut mid-body KEEPS what the app read: on ClientDisconnect it records offset + bytes
  written, so HEAD returns a partial offset that needs no chunk boundary (bytes uvicorn had
  buffered but not handed to the app are dropped, and are not counted). HEAD during a PATCH still
  shows the old offset.
- The per-upload lock is an flock on FILES/.locks/<id>.lock polled with time.sleep for up to 30 s
  on the event loop: a second PATCH to the same upload while one is still running blocks the whole
  server, then 503. (Here the cut PATCH finishes before the proxy can carry a new request.)
- uvicorn (h11) closes the connection after an answer given before the body was read (404, 409):
  a client still writing a large body may see a reset instead of the answer. Idle keep-alive
  connections are closed after 5 s. Expect: 100-continue is honoured.
- DELETE PREFIX/<id>: 204; the data and .info are removed; then HEAD/PATCH/DELETE answer 404.
- Storage: FILES/<id> is the data, exactly the upload's bytes (the name is the upload id, the last
  path segment of Location, not the filename); FILES/<id>.info is JSON with metadata (decoded),
  size, offset, expires, ...; an upload is complete when offset == size.
"""
import argparse
import asyncio
import hashlib
import json
import os
import signal
import socket
import struct
import sys
from importlib import metadata as package_metadata

METHODS = ["OPTIONS", "POST", "HEAD", "PATCH", "DELETE"]


class Proxy:
    """Forwards each client connection to uvicorn; remembers it by the port of its upstream socket
    (the port uvicorn reports as the client's) so that a request can be cut."""

    def __init__(self, backend_port):
        self.backend_port = backend_port
        self.pairs = {}
        self.clients_gone = set()

    async def handle(self, client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
        except OSError:
            reset(client_writer)
            return
        key = upstream_writer.get_extra_info("sockname")[1]
        self.pairs[key] = (client_writer, upstream_writer)

        async def from_client():
            await pipe(client_reader, upstream_writer, client_writer)
            # The client is gone (or done sending): a stalled request notices by this.
            self.clients_gone.add(key)

        try:
            await asyncio.gather(from_client(), pipe(upstream_reader, client_writer, upstream_writer))
        finally:
            self.pairs.pop(key, None)
            self.clients_gone.discard(key)
            for writer in (client_writer, upstream_writer):
                writer.close()

    def cut(self, key):
        """Resets both sides of the connection whose upstream socket has local port `key`."""
        pair = self.pairs.pop(key, None)
        for writer in pair or ():
            reset(writer)
        return pair is not None


def reset(writer):
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


async def pipe(reader, writer, other):
    try:
        while True:
            data = await reader.read(1 << 18)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof() and not writer.is_closing():
            writer.write_eof()
    except (OSError, RuntimeError):
        # One side went away mid-stream: pass it on abruptly.
        reset(writer)
        reset(other)


class Harness:
    """ASGI middleware around the FastAPI app: counts requests and PATCH bytes, makes the cut,
    and answers GET /__stats."""

    def __init__(self, app, files_dir, cut_at, proxy, stall_at=None, pause_at=None):
        self.app, self.files_dir, self.cut_at, self.proxy = app, files_dir, cut_at, proxy
        self.stall_at = stall_at
        self.stalls = 0
        self.pause_at = pause_at
        self.pauses = 0
        self.released = asyncio.Event()
        self.patch_bytes = 0
        self.post_bytes = 0
        self.counts = {method: 0 for method in METHODS}
        self.requests = []
        self.cuts = 0
        self.hashes = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/__stats":
            return await self.send_stats(send)
        if scope["path"] == "/__release":
            self.released.set()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            return await send({"type": "http.response.body", "body": b"{}"})
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        method = headers.get("x-http-method-override", scope["method"]).strip().upper()
        self.counts[method] = self.counts.get(method, 0) + 1
        try:
            offset = int(headers["upload-offset"])
        except (KeyError, ValueError):
            offset = None
        entry = {"method": method, "path": scope["path"], "uploadOffset": offset, "bodyBytes": 0,
                 "status": None, "cut": False}
        self.requests.append(entry)

        async def counting_receive():
            if entry["cut"]:
                return {"type": "http.disconnect"}
            if entry.get("paused"):
                # Read nothing more until GET /__release, then go on as usual.
                while not self.released.is_set():
                    await asyncio.sleep(0.02)
                entry["paused"] = False
            if entry.get("stalled"):
                # Read nothing more (the client's writes block) until the client goes away.
                key = scope["client"][1]
                # A client killed mid-request while the server is not reading cannot close its
                # connection (its FIN waits behind unsent data), so a test says when to give up on
                # it: GET /__release, as a real server would after a keepalive or read timeout.
                while key in self.proxy.pairs and key not in self.proxy.clients_gone and not self.released.is_set():
                    await asyncio.sleep(0.02)
                self.proxy.cut(key)
                print(f"tus_server: gave up on the stalled client of {scope['path']}", file=sys.stderr, flush=True)
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request":
                return message
            body = message.get("body", b"")
            if method == "PATCH" and self.cut_at is not None and self.cuts == 0 and offset is not None \
                    and offset + entry["bodyBytes"] + len(body) >= self.cut_at:
                body = body[:max(0, self.cut_at - offset - entry["bodyBytes"])]
                message = {"type": "http.request", "body": body, "more_body": True}
                entry["cut"] = True
                self.cuts += 1
                self.proxy.cut(scope["client"][1])
                print(f"tus_server: cut {scope['path']} at byte {offset + entry['bodyBytes'] + len(body)}",
                      file=sys.stderr, flush=True)
            if method == "PATCH" and self.stall_at is not None and self.stalls == 0 and offset is not None \
                    and not entry["cut"] and offset + entry["bodyBytes"] + len(body) >= self.stall_at:
                body = body[:max(0, self.stall_at - offset - entry["bodyBytes"])]
                message = {"type": "http.request", "body": body, "more_body": True}
                entry["stalled"] = True
                self.stalls += 1
                print(f"tus_server: stalled {scope['path']} at byte {offset + entry['bodyBytes'] + len(body)}",
                      file=sys.stderr, flush=True)
            if method == "PATCH" and self.pause_at is not None and self.pauses == 0 and offset is not None \
                    and not entry["cut"] and offset + entry["bodyBytes"] + len(body) >= self.pause_at:
                entry["paused"] = True
                self.pauses += 1
                print(f"tus_server: paused {scope['path']} at byte {offset + entry['bodyBytes'] + len(body)}",
                      file=sys.stderr, flush=True)
            entry["bodyBytes"] += len(body)
            if method == "PATCH":
                self.patch_bytes += len(body)
            elif method == "POST":
                self.post_bytes += len(body)
            return message

        async def recording_send(message):
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        await self.app(scope, counting_receive, recording_send)
        print(f"tus_server: {method} {scope['path']} offset={offset} body={entry['bodyBytes']} "
              f"-> {entry['status']}{' (cut)' if entry['cut'] else ''}", file=sys.stderr, flush=True)

    async def send_stats(self, send):
        uploads = await asyncio.to_thread(self.scan)
        body = json.dumps({
            "patchBytes": self.patch_bytes,
            "postBytes": self.post_bytes,
            "counts": self.counts,
            "cuts": self.cuts,
            "stalls": self.stalls,
            "pauses": self.pauses,
            "requests": self.requests,
            "uploads": [{k: u[k] for k in ("id", "name", "size", "offset")} for u in uploads],
            "completed": [{k: u[k] for k in ("id", "name", "size", "sha256")} for u in uploads if u["complete"]],
        }).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def scan(self):
        """Every upload in the files directory, oldest first; sha256 for the complete ones."""
        uploads = []
        for name in os.listdir(self.files_dir):
            if not name.endswith(".info"):
                continue
            uid = name[:-len(".info")]
            data_path = os.path.join(self.files_dir, uid)
            try:
                with open(os.path.join(self.files_dir, name), encoding="utf-8") as file:
                    info = json.load(file)
                stat = os.stat(data_path)
            except (OSError, ValueError):
                continue
            meta = info.get("metadata") or {}
            upload = {"id": uid, "name": meta.get("filename") or meta.get("name"), "size": info.get("size"),
                      "offset": info.get("offset", 0), "created": info.get("created_at", ""), "sha256": None}
            upload["complete"] = upload["size"] is not None and upload["offset"] == upload["size"] == stat.st_size
            if upload["complete"]:
                key = (uid, stat.st_size, stat.st_mtime_ns)
                if key not in self.hashes:
                    digest = hashlib.sha256()
                    with open(data_path, "rb") as file:
                        while chunk := file.read(1 << 20):
                            digest.update(chunk)
                    self.hashes[key] = digest.hexdigest()
                upload["sha256"] = self.hashes[key]
            uploads.append(upload)
        uploads.sort(key=lambda u: u["created"])
        return uploads


async def serve(options):
    import uvicorn
    from fastapi import FastAPI
    from tuspyserver import create_tus_router

    version = package_metadata.version("tuspyserver")
    if version != "4.4.3":
        print(f"tus_server: tuspyserver {version} installed; the notes above are for 4.4.3", file=sys.stderr, flush=True)

    prefix = options.prefix.strip("/")
    app = FastAPI()
    app.include_router(create_tus_router(
        prefix=prefix, files_dir=options.files, max_size=options.max_size, days_to_keep=options.days_to_keep))

    backend = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    backend.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    backend.bind(("127.0.0.1", 0))
    backend.listen(128)
    proxy = Proxy(backend.getsockname()[1])
    harness = Harness(app, options.files, options.cut_at, proxy, options.stall_at, options.pause_at)
    config = uvicorn.Config(harness, http="h11", loop="asyncio", lifespan="off", access_log=False,
                            log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    front = await asyncio.start_server(proxy.handle, "127.0.0.1", options.port)
    port = front.sockets[0].getsockname()[1]
    # The backend socket already listens, so connections queue until uvicorn accepts them.
    url = f"http://127.0.0.1:{port}" + (f"/{prefix}" if prefix else "")
    print(json.dumps({"listening": url}), flush=True)
    try:
        await server.serve(sockets=[backend])   # until SIGTERM or SIGINT
    finally:
        front.close()


def main():
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--files", required=True, help="where tuspyserver stores uploads")
    arguments.add_argument("--port", type=int, default=0, help="the port clients connect to (0: any free one)")
    arguments.add_argument("--prefix", default="/files", help="the mount path of the tus endpoint")
    arguments.add_argument("--cut-at", type=int, default=None, metavar="BYTES",
                           help="reset the first PATCH that takes an upload to byte BYTES, once")
    arguments.add_argument("--stall-at", type=int, default=None, metavar="BYTES",
                           help="stop reading the first PATCH that takes an upload to byte BYTES, once, until its "
                                "client goes away (for killing the client mid-upload)")
    arguments.add_argument("--pause-at", type=int, default=None, metavar="BYTES",
                           help="stop reading the first PATCH that takes an upload to byte BYTES, once, until "
                                "GET /__release, then read on")
    arguments.add_argument("--max-size", type=int, default=128849018880)
    arguments.add_argument("--days-to-keep", type=int, default=5)
    options = arguments.parse_args()
    options.files = os.path.abspath(options.files)
    os.makedirs(options.files, exist_ok=True)
    # A child of a Swift test process starts with SIGTERM and SIGINT blocked (the spawning thread's
    # mask); uvicorn shuts down on them, so take them back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    asyncio.run(serve(options))


if __name__ == "__main__":
    sys.exit(main())
