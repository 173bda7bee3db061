#!/usr/bin/env python3
"""An ingest API for tests: takes a file (a multipart form's file part, or a raw PUT/POST body),
answers 201 with JSON {"id": N, "sha256": …, "size": …} and a Location, an ETag and an
X-Request-Id, and logs each request to <directory>/requests.jsonl.

    python3 Tests/Servers/answer_server.py --directory DIR [--check-digest] [--echo-digest]
        [--statuses 409,409] [--port 0]

--check-digest: a request whose Repr-Digest or Content-Digest (RFC 9530, sha-256 or sha-512)
does not match what arrived is answered 400 {"error": "digest mismatch", …}. Repr-Digest is
compared with the file (a form's file part) and with the whole body; either may match.
--echo-digest: a 2xx answer carries Repr-Digest: sha-256=:…: of the file received.
--statuses: the first requests are answered with these statuses (then 201).
Prints "listening on http://127.0.0.1:PORT" when ready.
"""
import argparse, base64, email.parser, email.policy, hashlib, json, os, signal, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"count": 0}
args = None


def file_of(content_type, body):
    """The file part of a multipart form (its bytes), or the body itself."""
    if not content_type.startswith("multipart/form-data"):
        return body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    for part in message.iter_parts():
        if part.get_filename() is not None:
            return part.get_payload(decode=True) or b""
    return b""


def digests(value):
    """RFC 9530 dictionary -> {algorithm: bytes}; malformed members are skipped."""
    found = {}
    for member in (value or "").split(","):
        name, _, rest = member.strip().partition("=")
        rest = rest.strip()
        if len(rest) >= 2 and rest[0] == ":" and rest[-1] == ":":
            try:
                found[name.strip()] = base64.b64decode(rest[1:-1], validate=True)
            except Exception:
                pass
    return found


def digest_of(algorithm, data):
    return {"sha-256": hashlib.sha256, "sha-512": hashlib.sha512}[algorithm](data).digest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def answer(self, status, document, headers=()):
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_PUT(self):
        self.do_POST()

    def do_POST(self):
        body = self.read_body()
        content_type = self.headers.get("Content-Type", "")
        data = file_of(content_type, body)
        with lock:
            state["count"] += 1
            number = state["count"]
        record = {"n": number, "method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                  "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        status, document, headers = 201, None, []
        if args.statuses and number <= len(args.statuses):
            status = args.statuses[number - 1]
            document = {"error": "planned status %d" % status}
        if status < 300 and args.check_digest:
            for algorithm, theirs in digests(self.headers.get("Repr-Digest")).items():
                if algorithm in ("sha-256", "sha-512") and theirs not in (digest_of(algorithm, data), digest_of(algorithm, body)):
                    status, document = 400, {"error": "digest mismatch", "field": "Repr-Digest"}
            for algorithm, theirs in digests(self.headers.get("Content-Digest")).items():
                if algorithm in ("sha-256", "sha-512") and theirs != digest_of(algorithm, body):
                    status, document = 400, {"error": "digest mismatch", "field": "Content-Digest"}
        if status < 300:
            document = {"id": number, "sha256": record["sha256"], "size": len(data)}
            headers = [("Location", "http://127.0.0.1:%d/media/%d" % (self.server.server_address[1], number)),
                       ("ETag", '"%s"' % record["sha256"][:16]), ("X-Request-Id", "req-%d" % number),
                       ("Set-Cookie", "session=not-for-ferry")]
            if args.echo_digest:
                headers.append(("Repr-Digest", "sha-256=:%s:" % base64.b64encode(hashlib.sha256(data).digest()).decode()))
        record["status"] = status
        with lock:
            with open(os.path.join(args.directory, "requests.jsonl"), "a") as log:
                log.write(json.dumps(record) + "\n")
        self.answer(status, document, headers)


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--directory", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--check-digest", action="store_true")
    parser.add_argument("--echo-digest", action="store_true")
    parser.add_argument("--statuses", type=lambda text: [int(s) for s in text.split(",") if s], default=[])
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print("listening on http://127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
