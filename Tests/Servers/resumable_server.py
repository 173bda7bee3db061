#!/usr/bin/env python3
"""A server of the IETF draft "Resumable Uploads for HTTP" at interop version 9 (draft -12), for
Ferry's integration tests: the project's own, written from the draft, with faults to order.

    python3 Tests/Servers/resumable_server.py [--port N] [--max-append-size N] [--conflict-once]
        [--lose-once] [--no-resumption] [--interop 9] [--options-status N] [--max-body N]

Uploads are created at /upload (POST or PUT, or any path) and live at /uploads/<id>. A creation
gets a 104 with Location and Upload-Limit, then (Upload-Complete: ?0) 201 with Location and
Upload-Offset, or (?1, all read) the application's 200 with JSON {id, size, sha256}. HEAD reports
Upload-Offset, Upload-Complete, Upload-Length, Upload-Limit; PATCH needs Content-Type
application/partial-upload and the right Upload-Offset (else 409 with the server's offset and a
problem document), and refuses an Upload-Length once the length is known (400, as tusd does); DELETE forgets the upload. Bytes read before a connection breaks are kept.

Faults: --max-append-size answers a larger PATCH with 413 (and announces the limit, unless
--hide-limits); --conflict-once loses the last 1000 bytes of an upload when the first PATCH at a
non-zero offset arrives, and answers it 409 with the offset it has; --lose-once answers the first
PATCH with 404 and forgets the upload; --no-resumption is a server that knows nothing of the draft
(every request is an ordinary upload, OPTIONS shows no Upload-Limit); --options-status N answers
OPTIONS with N and nothing else (501: Python's http.server, and many small servers, have no
OPTIONS); --max-body N is a proxy's body limit in front of the server (nginx's
client_max_body_size): any request with a longer body is answered 413. A refused request's body is
read and dropped, so the client always gets the answer. GET /__stats answers what the server saw.

Prints one line {"listening": "http://127.0.0.1:PORT"} when ready.
"""
import argparse, email.message, email.utils, hashlib, json, os, signal, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"counts": {}, "body_bytes": {}, "requests": [], "completed": [], "ordinary": [], "next_id": 1}
uploads = {}  # id -> {"data": bytearray, "length": int|None, "complete": bool, "path": str, "content_type": str}
options = None
faults = {"conflict": False, "lose": False}


def sf_bool(text):
    text = (text or "").strip()
    return {"?1": True, "?0": False}.get(text)


def sf_int(text):
    try:
        value = int((text or "").strip())
        return value if value >= 0 else None
    except ValueError:
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, fmt % args))

    # --- bookkeeping

    def record(self):
        with lock:
            state["counts"][self.command] = state["counts"].get(self.command, 0) + 1
            entry = {"method": self.command, "path": self.path, "body_bytes": 0, "status": None,
                     "upload_complete": self.headers.get("Upload-Complete"), "upload_offset": self.headers.get("Upload-Offset"),
                     "content_type": self.headers.get("Content-Type"), "interop": self.headers.get("Upload-Draft-Interop-Version"),
                     "idempotency_key": self.headers.get("Idempotency-Key")}
            state["requests"].append(entry)
            return entry

    def count(self, entry, n):
        with lock:
            entry["body_bytes"] += n
            state["body_bytes"][self.command] = state["body_bytes"].get(self.command, 0) + n

    def read_body(self, entry, length, sink, upload=None):
        """Reads up to `length` bytes into sink(chunk); returns the count read (less if the client went
        away, or if a later request took over `upload`: its `generation` moved on)."""
        got = 0
        generation = upload["generation"] if upload else None
        while got < length:
            try:
                chunk = self.rfile.read(min(65536, length - got))
            except (ConnectionError, OSError):
                chunk = b""
            if not chunk:
                break
            if upload is not None:
                with upload["lock"]:
                    if upload["generation"] != generation:
                        break
                    sink(chunk)
            else:
                sink(chunk)
            got += len(chunk)
            self.count(entry, len(chunk))
        return got

    @staticmethod
    def take_over(upload):
        """A new request for the upload stops an earlier one still reading (the draft lets the server
        end it): what it has appended stays, nothing more."""
        with upload["lock"]:
            upload["generation"] += 1
            return len(upload["data"])

    def answer(self, entry, status, headers=(), body=b""):
        entry["status"] = status
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def limit_header(self):
        parts = ["max-size=%d" % (1 << 40)]
        if options.max_append_size and not options.hide_limits:
            parts.append("max-append-size=%d" % options.max_append_size)
        parts.append("max-age=3600")
        return ", ".join(parts)

    def resumable(self):
        return not options.no_resumption and self.headers.get("Upload-Draft-Interop-Version", "").strip() == str(options.interop)

    def upload_id(self):
        if self.path.startswith("/uploads/"):
            return self.path[len("/uploads/"):]
        return None

    def disposition_filename(self):
        """The file name in the request's Content-Disposition, read by Python's email package (a parser
        that is not Ferry's). It lists an RFC 2231 `filename*` after the plain `filename`, decoded;
        the last is taken, as RFC 6266 says (`filename*` wins)."""
        value = self.headers.get("Content-Disposition")
        if value is None:
            return None
        message = email.message.Message()
        message["Content-Disposition"] = value
        found = [v for k, v in message.get_params(header="content-disposition") or [] if k.lower() == "filename"]
        return email.utils.collapse_rfc2231_value(found[-1]) if found else None

    def finish_upload(self, uid, upload):
        digest = hashlib.sha256(upload["data"]).hexdigest()
        size = len(upload["data"])
        with lock:
            state["completed"].append({"id": uid, "size": size, "sha256": digest, "path": upload["path"],
                                       "content_type": upload["content_type"], "filename": upload["filename"]})
        return json.dumps({"id": uid, "size": size, "sha256": digest}).encode()

    def refuse(self, entry, length, status, headers=(), body=b""):
        """Reads and drops the request's body, then answers: the client always sees the answer."""
        self.read_body(entry, length, lambda chunk: None)
        self.answer(entry, status, headers, body)

    # --- methods

    def do_GET(self):
        entry = {"status": None}
        if self.path == "/__stats":
            with lock:
                body = json.dumps(dict(state, uploads=[{"id": k, "offset": len(v["data"]), "complete": v["complete"]} for k, v in uploads.items()]), default=lambda _: None).encode()
            return self.answer(entry, 200, [("Content-Type", "application/json")], body)
        return self.answer(entry, 404)

    def do_OPTIONS(self):
        entry = self.record()
        if options.options_status:
            return self.answer(entry, options.options_status)
        headers = [("Allow", "OPTIONS, POST, PUT, PATCH, HEAD, DELETE")]
        if self.resumable():
            headers.append(("Upload-Limit", self.limit_header()))
            headers.append(("Upload-Draft-Interop-Version", str(options.interop)))
        self.answer(entry, 204, headers)

    def do_POST(self):
        self.create()

    def do_PUT(self):
        self.create()

    def create(self):
        entry = self.record()
        length = sf_int(self.headers.get("Content-Length")) or 0
        if options.max_body is not None and length > options.max_body:
            return self.refuse(entry, length, 413, [("Content-Type", "text/html")], b"<html>413 Request Entity Too Large</html>")
        complete = sf_bool(self.headers.get("Upload-Complete"))
        if not self.resumable() or complete is None:
            # An ordinary upload: whatever the body is, it is the whole file.
            hasher = hashlib.sha256()
            got = self.read_body(entry, length, hasher.update)
            with lock:
                state["ordinary"].append({"path": self.path, "size": got, "sha256": hasher.hexdigest(), "filename": self.disposition_filename(),
                                          "upload_complete": self.headers.get("Upload-Complete")})
            return self.answer(entry, 200, [("Content-Type", "application/json")], json.dumps({"size": got, "sha256": hasher.hexdigest()}).encode())
        with lock:
            uid = str(state["next_id"])
            state["next_id"] += 1
            upload = {"data": bytearray(), "length": sf_int(self.headers.get("Upload-Length")), "complete": False, "path": self.path,
                      "content_type": self.headers.get("Content-Type"), "filename": self.disposition_filename(),
                      "generation": 0, "lock": threading.Lock()}
            uploads[uid] = upload
        location = "/uploads/" + uid
        # 104 Upload Resumption Supported: an interim response with the upload's URL.
        self.send_response_only(104, "Upload Resumption Supported")
        self.send_header("Location", location)
        self.send_header("Upload-Draft-Interop-Version", str(options.interop))
        self.send_header("Upload-Limit", self.limit_header())
        self.end_headers()
        self.wfile.flush()
        got = self.read_body(entry, length, upload["data"].extend, upload)
        if got < length:
            self.close_connection = True
            return
        if complete:
            upload["complete"] = True
            body = self.finish_upload(uid, upload)
            return self.answer(entry, 200, [("Content-Type", "application/json"), ("Upload-Complete", "?1"), ("Location", location)], body)
        self.answer(entry, 201, [("Location", location), ("Upload-Complete", "?0"), ("Upload-Offset", str(len(upload["data"]))),
                                 ("Upload-Limit", self.limit_header())])

    def do_HEAD(self):
        entry = self.record()
        upload = uploads.get(self.upload_id() or "")
        if upload is None or not self.resumable():
            return self.answer(entry, 404)
        offset = self.take_over(upload)
        headers = [("Upload-Offset", str(offset)), ("Upload-Complete", "?1" if upload["complete"] else "?0"),
                   ("Upload-Limit", self.limit_header()), ("Cache-Control", "no-store")]
        if upload["length"] is not None:
            headers.append(("Upload-Length", str(upload["length"])))
        self.answer(entry, 204, headers)

    def do_PATCH(self):
        entry = self.record()
        uid = self.upload_id() or ""
        upload = uploads.get(uid)
        length = sf_int(self.headers.get("Content-Length")) or 0
        offset = sf_int(self.headers.get("Upload-Offset"))
        complete = sf_bool(self.headers.get("Upload-Complete"))
        if options.max_body is not None and length > options.max_body:
            return self.refuse(entry, length, 413, [("Content-Type", "text/html")], b"<html>413 Request Entity Too Large</html>")
        if upload is None or not self.resumable():
            return self.refuse(entry, length, 404)
        if options.lose_once and not faults["lose"]:
            faults["lose"] = True
            with lock:
                uploads.pop(uid, None)
            return self.refuse(entry, length, 404)
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/partial-upload" or complete is None or offset is None:
            return self.refuse(entry, length, 400, [("Content-Type", "text/plain")],
                               b"an append needs Content-Type: application/partial-upload, Upload-Complete and Upload-Offset")
        if upload["complete"]:
            return self.refuse(entry, length, 400, [("Content-Type", "application/problem+json")],
                               json.dumps({"type": "https://iana.org/assignments/http-problem-types#completed-upload"}).encode())
        if self.headers.get("Upload-Length") is not None and upload["length"] is not None:
            # tusd's rule (the draft allows a consistent value): a length already known is not declared again.
            return self.refuse(entry, length, 400, [("Content-Type", "text/plain")],
                               b"ERR_INVALID_UPLOAD_LENGTH: invalid Upload-Length header")
        self.take_over(upload)
        if options.conflict_once and not faults["conflict"] and offset > 0:
            faults["conflict"] = True
            del upload["data"][max(0, len(upload["data"]) - 1000):]  # the server lost the tail it had
        if offset != len(upload["data"]):
            problem = {"type": "https://iana.org/assignments/http-problem-types#mismatching-upload-offset",
                       "title": "offset from request does not match offset of resource",
                       "expected-offset": len(upload["data"]), "provided-offset": offset}
            return self.refuse(entry, length, 409, [("Content-Type", "application/problem+json"), ("Upload-Complete", "?0"),
                                                    ("Upload-Offset", str(len(upload["data"])))], json.dumps(problem).encode())
        if options.max_append_size and length > options.max_append_size:
            return self.refuse(entry, length, 413, [("Upload-Limit", self.limit_header())])
        got = self.read_body(entry, length, upload["data"].extend, upload)
        if got < length:
            self.close_connection = True
            return
        if upload["length"] is not None and len(upload["data"]) > upload["length"]:
            with lock:
                uploads.pop(uid, None)
            return self.answer(entry, 400, [("Content-Type", "application/problem+json")],
                               json.dumps({"type": "https://iana.org/assignments/http-problem-types#inconsistent-upload-length"}).encode())
        if complete:
            upload["complete"] = True
            body = self.finish_upload(uid, upload)
            return self.answer(entry, 200, [("Content-Type", "application/json"), ("Upload-Complete", "?1")], body)
        self.answer(entry, 204, [("Upload-Complete", "?0"), ("Upload-Offset", str(len(upload["data"]))), ("Upload-Limit", self.limit_header())])

    def do_DELETE(self):
        entry = self.record()
        uid = self.upload_id() or ""
        with lock:
            found = uploads.pop(uid, None)
        self.answer(entry, 204 if found is not None else 404)


def main():
    global options
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--interop", type=int, default=9)
    parser.add_argument("--max-append-size", type=int)
    parser.add_argument("--hide-limits", action="store_true")
    parser.add_argument("--conflict-once", action="store_true")
    parser.add_argument("--lose-once", action="store_true")
    parser.add_argument("--no-resumption", action="store_true")
    parser.add_argument("--options-status", type=int)
    parser.add_argument("--max-body", type=int)
    options = parser.parse_args()
    # The test runner may start children with signals blocked: let SIGTERM stop the server.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    print(json.dumps({"listening": "http://127.0.0.1:%d" % server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
