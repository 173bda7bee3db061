#!/usr/bin/env python3
"""Checks tus_server.py and the tuspyserver behaviour its docstring describes, with a plain
http.client tus client: OPTIONS, creation, a whole-file PATCH cut by --cut-at and resumed from the
offset HEAD reports, a PATCH the client abandons mid-body, creation-with-upload, the error statuses,
DELETE, and /__stats. Runs in a few seconds; exits 1 on the first failed check.

    python3 Tests/Servers/tus_server_selftest.py
"""
import base64
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tus_server.py")
CUT_AT = 600_000
TUS = {"Tus-Resumable": "1.0.0"}


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok   {what}")


def metadata(**values):
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


class Client:
    def __init__(self, url):
        parts = urlsplit(url)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path

    def request(self, method, path, headers=None, body=None):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()

    def create(self, length, name="f.bin", body=None, **extra):
        headers = {**TUS, "Upload-Length": str(length), "Upload-Metadata": metadata(filename=name, filetype="application/octet-stream")}
        if body is not None:
            headers["Content-Type"] = "application/offset+octet-stream"
        headers.update(extra)
        status, headers = self.request("POST", self.prefix, headers, body)
        check(status == 201, f"POST creates an upload (201, got {status})")
        return headers

    def patch(self, path, offset, body, content_type="application/offset+octet-stream"):
        return self.request("PATCH", path, {**TUS, "Upload-Offset": str(offset), "Content-Type": content_type}, body)

    def head(self, path):
        return self.request("HEAD", path, TUS)

    def stats(self):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request("GET", "/__stats")
            return json.loads(connection.getresponse().read())
        finally:
            connection.close()


def run(client):
    prefix = client.prefix

    status, headers = client.request("OPTIONS", prefix + "/")
    check(status == 204, f"OPTIONS {prefix}/ answers 204 (got {status})")
    check(headers.get("tus-version") == "1.0.0" and headers.get("tus-resumable") == "1.0.0", "Tus-Version and Tus-Resumable 1.0.0")
    check(headers.get("tus-extension") == "creation,creation-defer-length,creation-with-upload,expiration,termination,concatenation",
          f"Tus-Extension: {headers.get('tus-extension')}")
    check(headers.get("tus-max-size") == "128849018880", f"Tus-Max-Size: {headers.get('tus-max-size')}")
    check("tus-checksum-algorithm" not in headers, "no Tus-Checksum-Algorithm (no checksum extension)")
    status, headers = client.request("OPTIONS", prefix)
    check(status == 405, f"OPTIONS {prefix} (no slash) answers 405 (got {status}, Allow: {headers.get('allow')})")

    # A whole-file PATCH cut by --cut-at, resumed from HEAD's offset.
    data = os.urandom(1_000_000)
    created = client.create(len(data), name="cut.bin")
    location = created["location"]
    check(location.startswith(f"http://{client.host}:{client.port}{prefix}/"), f"Location is absolute: {location}")
    check("upload-expires" in created and created["upload-expires"].endswith("GMT"), f"Upload-Expires: {created.get('upload-expires')}")
    path = urlsplit(location).path
    try:
        status, _ = client.patch(path, 0, data)
        cut = False
    except (OSError, http.client.HTTPException) as error:
        cut, status = True, repr(error)
    check(cut, f"the whole-file PATCH was cut ({status})")
    status, headers = client.head(path)
    check(status == 200, f"HEAD after the cut answers 200 (got {status})")
    check(headers.get("upload-offset") == str(CUT_AT), f"HEAD keeps the partial PATCH: Upload-Offset {headers.get('upload-offset')} == {CUT_AT}")
    check(headers.get("upload-length") == str(len(data)) and headers.get("cache-control") == "no-store", "HEAD: Upload-Length, Cache-Control: no-store")
    check("upload-expires" not in headers, "HEAD carries no Upload-Expires")
    status, headers = client.patch(path, 0, data)
    check(status == 409, f"PATCH at a stale offset answers 409 (got {status})")
    status, headers = client.patch(path, CUT_AT, data[CUT_AT:])
    check(status == 204 and headers.get("upload-offset") == str(len(data)), f"the resumed PATCH completes (204, offset {headers.get('upload-offset')})")
    check("upload-expires" in headers, "PATCH answers Upload-Expires")

    # A whole-file PATCH with no cut (the cut is spent).
    whole = os.urandom(2_000_000)
    path2 = urlsplit(client.create(len(whole), name="whole.bin")["location"]).path
    status, headers = client.patch(path2, 0, whole)
    check(status == 204 and headers.get("upload-offset") == str(len(whole)), "a whole-file PATCH succeeds")

    # A PATCH the client abandons mid-body (no proxy cut): the bytes the app read are kept.
    partial = os.urandom(500_000)
    path3 = urlsplit(client.create(len(partial), name="abandoned.bin")["location"]).path
    connection = http.client.HTTPConnection(client.host, client.port, timeout=30)
    connection.putrequest("PATCH", path3)
    for name, value in {**TUS, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream",
                        "Content-Length": str(len(partial))}.items():
        connection.putheader(name, value)
    connection.endheaders()
    sent = 123_457
    connection.send(partial[:sent])
    deadline = time.monotonic() + 10
    while not any(r["path"] == path3 and r["method"] == "PATCH" and r["bodyBytes"] == sent for r in client.stats()["requests"]):
        check(time.monotonic() < deadline, "the server read the abandoned PATCH's bytes")
        time.sleep(0.02)
    connection.close()
    deadline = time.monotonic() + 10
    while client.head(path3)[1].get("upload-offset") == "0" and time.monotonic() < deadline:
        time.sleep(0.02)
    check(client.head(path3)[1].get("upload-offset") == str(sent), f"an abandoned PATCH keeps its {sent} bytes (no chunk boundary)")

    # The checks run after the body is stored: a PATCH answered 415 still advanced the offset.
    status, headers = client.patch(path3, sent, partial[sent:sent + 1000], content_type="application/octet-stream")
    check(status == 415, f"PATCH with another Content-Type answers 415 (got {status})")
    check(client.head(path3)[1].get("upload-offset") == str(sent + 1000), "... and its body was stored anyway")

    # creation-with-upload.
    small = os.urandom(70_000)
    created = client.create(len(small) * 2, name="cwu.bin", body=small)
    check(created.get("upload-offset") == str(len(small)), f"creation-with-upload answers Upload-Offset {created.get('upload-offset')}")
    path4 = urlsplit(created["location"]).path
    status, headers = client.patch(path4, len(small), small)
    check(status == 204 and headers.get("upload-offset") == str(len(small) * 2), "and a PATCH completes it")

    # Errors.
    status, _ = client.head(prefix + "/" + "0" * 32)
    check(status == 404, f"HEAD of an unknown upload answers 404 (got {status})")
    status, _ = client.patch(prefix + "/" + "0" * 32, 0, b"x")
    check(status == 404, f"PATCH of an unknown upload answers 404 (got {status})")
    status, _ = client.request("HEAD", path)
    check(status == 412, f"HEAD without Tus-Resumable answers 412 (got {status})")
    status, headers = client.request("POST", prefix, {**TUS, "Upload-Length": "10", "Upload-Metadata": metadata(filename="x")})
    check(status == 201, "POST without filetype metadata is accepted")
    status, _ = client.head(urlsplit(headers["location"]).path)
    check(status == 400, f"... but its HEAD answers 400 (got {status})")
    status, _ = client.patch(path2, len(whole), b"extra")
    check(status == 400, f"PATCH past Upload-Length answers 400 (got {status})")

    # Termination.
    path5 = urlsplit(client.create(10, name="deleted.bin")["location"]).path
    status, _ = client.request("DELETE", path5, TUS)
    check(status == 204, f"DELETE answers 204 (got {status})")
    status, _ = client.head(path5)
    check(status == 404, f"HEAD after DELETE answers 404 (got {status})")

    stats = client.stats()
    check(stats["cuts"] == 1, "stats: one cut")
    completed = {c["name"]: c for c in stats["completed"]}
    for name, content in (("cut.bin", data), ("whole.bin", whole), ("cwu.bin", small + small)):
        check(name in completed and completed[name]["size"] == len(content)
              and completed[name]["sha256"] == hashlib.sha256(content).hexdigest(), f"stats: {name} stored intact (sha256)")
    check("abandoned.bin" not in completed, "stats: the abandoned upload is not complete")
    check(stats["counts"]["DELETE"] == 1 and stats["counts"]["OPTIONS"] == 2, f"stats: counts {stats['counts']}")
    # The bytes the app read, stored or not: the 5 bytes past Upload-Length were read, then refused.
    expected = CUT_AT + (len(data) - CUT_AT) + len(whole) + sent + 1000 + len(small) + len(b"extra")
    check(stats["patchBytes"] == expected, f"stats: patchBytes {stats['patchBytes']} == {expected}")
    check(stats["postBytes"] == len(small), f"stats: postBytes {stats['postBytes']}")


def main():
    with tempfile.TemporaryDirectory() as directory:
        process = subprocess.Popen(
            [sys.executable, SERVER, "--files", os.path.join(directory, "files"), "--cut-at", str(CUT_AT)],
            stdout=subprocess.PIPE, stderr=open(os.path.join(directory, "server.log"), "w"), text=True)
        try:
            line = process.stdout.readline()
            if not line:
                print(open(os.path.join(directory, "server.log")).read(), file=sys.stderr)
                print("FAIL the server did not start", file=sys.stderr)
                return 1
            url = json.loads(line)["listening"]
            print(f"server at {url}")
            try:
                run(Client(url))
            except AssertionError as failure:
                print(open(os.path.join(directory, "server.log")).read(), file=sys.stderr)
                print(f"FAIL {failure}", file=sys.stderr)
                return 1
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    print("tus_server self test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
