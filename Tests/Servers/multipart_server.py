#!/usr/bin/env python3
"""An independent multipart receiver for Ferry's integration tests.

Parses each request with a third-party parser, Werkzeug or python-multipart (`--parser`), stores
file parts, and appends one JSON line per request to <directory>/requests.jsonl:

    {"method": ..., "path": ..., "headers": {...}, "fields": {name: first value},
     "field_lists": {name: [every value, in body order]},
     "files": [{"index": 0, "field": ..., "filename": ..., "content_type": ..., "size": ..., "sha256": ...}],
     "status": 201}

`files` lists the file parts in the order they came in the body (`index` counts them from 0).
`headers` holds every request header as sent (Idempotency-Key among them).

Listens on 127.0.0.1 only and prints "listening on http://127.0.0.1:PORT" once ready.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()


def record(directory, entry):
    with lock:
        with open(os.path.join(directory, "requests.jsonl"), "a", encoding="utf-8") as log:
            log.write(json.dumps(entry, ensure_ascii=False) + "\n")


def parse_werkzeug(handler, length):
    from werkzeug.formparser import parse_form_data

    environ = {
        "REQUEST_METHOD": handler.command,
        "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(length),
        "wsgi.input": handler.rfile,
    }
    # Werkzeug groups its result by field name; the stream factory is called once per file part,
    # in body order, so the streams it made give each file its place.
    streams = []

    def stream_factory(total_content_length, content_type, filename, content_length=None):
        stream = io.BytesIO()
        streams.append(stream)
        return stream

    _stream, form, files = parse_form_data(environ, stream_factory=stream_factory, max_form_memory_size=None)
    fields = {name: form[name] for name in form}
    field_lists = {name: form.getlist(name) for name in form}
    out = []
    for field in files:
        for storage in files.getlist(field):
            data = storage.read()
            out.append({
                "index": next(i for i, stream in enumerate(streams) if stream is storage.stream),
                "field": field,
                "filename": storage.filename,
                "content_type": storage.content_type,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            })
    out.sort(key=lambda entry: entry["index"])
    return fields, field_lists, out


def parse_python_multipart(handler, length):
    import python_multipart

    field_lists = {}
    files = []

    def on_field(field):
        field_lists.setdefault(field.field_name.decode("utf-8"), []).append((field.value or b"").decode("utf-8"))

    def on_file(file):
        file.file_object.seek(0)
        data = file.file_object.read()
        content_type = getattr(file, "content_type", None)
        files.append({
            "index": len(files),
            "field": file.field_name.decode("utf-8"),
            "filename": file.file_name.decode("utf-8") if file.file_name is not None else None,
            "content_type": content_type.decode("latin-1") if isinstance(content_type, bytes) else content_type,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        })

    headers = {"Content-Type": handler.headers.get("Content-Type", ""), "Content-Length": str(length)}
    python_multipart.parse_form(headers, handler.rfile, on_field, on_file, chunk_size=1 << 16)
    # As Werkzeug's form[name]: a repeated field's first value.
    fields = {name: values[0] for name, values in field_lists.items()}
    return fields, field_lists, files


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    parser = None
    directory = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        status, fields, field_lists, files, error = 201, {}, {}, [], None
        try:
            fields, field_lists, files = self.parser(self, length)
        except Exception as exc:  # the test reads the error from the log
            status, error = 400, f"{type(exc).__name__}: {exc}"
        record(self.directory, {
            "method": self.command, "path": self.path,
            "headers": {k: v for k, v in self.headers.items()},
            "fields": fields, "field_lists": field_lists, "files": files, "status": status, "error": error,
        })
        body = json.dumps({"files": [f["filename"] for f in files]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST


def main():
    arguments = argparse.ArgumentParser()
    arguments.add_argument("--parser", choices=["werkzeug", "python-multipart"], required=True)
    arguments.add_argument("--directory", required=True)
    arguments.add_argument("--port", type=int, default=0)
    options = arguments.parse_args()
    os.makedirs(options.directory, exist_ok=True)
    Handler.parser = staticmethod(parse_werkzeug if options.parser == "werkzeug" else parse_python_multipart)
    Handler.directory = options.directory
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
