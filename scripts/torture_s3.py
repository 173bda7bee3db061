#!/usr/bin/env python3
"""Ferry's S3 torture run: kill -9 at random moments while files of every size go to a real S3 server.

It drives the built `ferryd` with one `protocol = "s3"` spool (5 MiB parts, so files from 5 MiB up
are multipart uploads and those below one PutObject) against a real S3 server on 127.0.0.1
(Tests/Servers/s3_server.py: rclone serve s3 by default, moto or SeaweedFS with --server):

  1. crash loop  files from 0 B to 24 MiB are written beside the spool and renamed in, continuously,
                 while ferryd is killed with SIGKILL every 0.5-3 s and restarted. All along, a sampler
                 checks that every file gone from the spool is already an object in the bucket.
  2. drain       no more kills: everything queued must arrive.

The oracle, at the end: every file is an object under its name with the file's SHA-256, nothing is
left in the spool (nor in its failed directory: the server makes no faults), and no multipart upload
is left open (ListMultipartUploads is empty: every upload a crash interrupted was completed or
aborted). Exit status: 0 the oracle holds, 1 it does not (each failure printed), 2 the run broke.

  scripts/torture_s3.py --quick                    # about 2 minutes
  scripts/torture_s3.py --duration 600 --server seaweedfs
Options: --bin DIR (default .build/debug; also $FERRY_BIN), --seed N, --keep, --long (20 minutes),
--part-concurrency N,
--budget-mib N (the data written over the loop, spread evenly; default 1.5 GiB). Needs boto3 and the
server (scripts/install-deps.sh --test).
"""

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Servers"))
import s3_server  # noqa: E402  (the servers and boto3 client the tests use)

MIB = 1 << 20
ACCESS_KEY = "AKIAFERRYTORTURE0001"
SECRET_KEY = "ferry/torture+secret=key000000000000000"
BUCKET = "ferry-torture"


class RunBroken(Exception):
    """The run could not go on (not an oracle failure)."""


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def file_size(rng):
    """Mostly small files, some around the 5 MiB part size, some of several parts."""
    kind = rng.random()
    if kind < 0.10:
        return 0
    if kind < 0.60:
        return rng.randint(1, 200 * 1024)
    if kind < 0.80:
        return rng.randint(200 * 1024, 5 * MIB + 1)
    return rng.randint(5 * MIB, 24 * MIB)


class Server:
    def __init__(self, kind, directory):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "Tests/Servers/s3_server.py"), "serve", "--kind", kind, "--port", "0",
             "--dir", directory, "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, "--bucket", BUCKET],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ready "):
            self.stop()
            raise RunBroken(f"the {kind} S3 server did not start: {line or 'no answer'} (scripts/install-deps.sh --test)")
        self.endpoint = line.split()[1]
        self.client = s3_server.client(self.endpoint, ACCESS_KEY, SECRET_KEY)

    def keys(self):
        keys = set()
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            keys.update(o["Key"] for o in page.get("Contents", []))
        return keys

    def sha256(self, key):
        digest = hashlib.sha256()
        for chunk in self.client.get_object(Bucket=BUCKET, Key=key)["Body"].iter_chunks(1 << 20):
            digest.update(chunk)
        return digest.hexdigest()

    def open_uploads(self):
        return [u["Key"] for u in self.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Daemon:
    def __init__(self, binary, config, log_path):
        self.binary, self.config, self.log_path = binary, config, log_path
        self.proc = None
        self.starts = 0

    def start(self, timeout=60):
        marker = f"----- torture_s3: start #{self.starts}"
        with open(self.log_path, "a") as f:
            f.write(marker + "\n")
            f.flush()
            env = dict(os.environ, FERRY_TORTURE_S3_SECRET=SECRET_KEY)
            self.proc = subprocess.Popen([self.binary, "--config", self.config], stdin=subprocess.DEVNULL, stdout=f,
                                         stderr=subprocess.STDOUT, env=env)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path, errors="replace") as f:
                text = f.read()
            if "msg=ready" in text[text.rfind(marker):]:
                return
            if self.proc.poll() is not None:
                raise RunBroken(f"ferryd exited with {self.proc.returncode} before it was ready:\n{text[-3000:]}")
            time.sleep(0.05)
        raise RunBroken("ferryd was not ready in time")

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode if self.proc else None


def write_config(path, work, spool, endpoint, part_concurrency):
    lines = [
        f'state_directory = "{work}/state"',
        f'control_socket = "{work}/state/control.sock"',
        'log_level = "info"',
        "max_concurrent_uploads = 4",
        'shutdown_timeout = "5s"',
        "",
        "[[spool]]",
        'name = "torture"',
        f'directory = "{spool}"',
        f'url = "{endpoint}"',
        'protocol = "s3"',
        f'bucket = "{BUCKET}"',
        f'access_key_id = "{ACCESS_KEY}"',
        'secret_access_key = "${env:FERRY_TORTURE_S3_SECRET}"',
        'key = "t/{relative_path}"',
        'part_size = "5MiB"',
        f"part_concurrency = {part_concurrency}",
        'settle = "300ms"',
        'after_upload = "delete"',
        "[spool.retry]",
        'initial_delay = "100ms"',
        'max_delay = "2s"',
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def spool_names(spool):
    return {e.name for e in os.scandir(spool) if e.is_file(follow_symlinks=False)}


def start_writer(spool, staging, seed, duration, budget_mib, size_of, written, lock, stop):
    """Starts the producer thread: files of `size_of(rng)` bytes, random, written beside the spool
    and renamed in, while fewer than 24 wait and the budget (spread over `duration`) allows; each
    one's SHA-256 lands in `written` (under `lock`) once it is in the spool."""
    started = time.monotonic()

    def writer():
        writer_rng = random.Random(seed + 1)
        index = written_bytes = 0
        while not stop.is_set():
            allowed = budget_mib * MIB * min(1.0, (time.monotonic() - started) / duration)
            # A backlog is enough (more would only lengthen the drain), and the disk is not endless.
            if len(spool_names(spool)) >= 24 or written_bytes > allowed:
                stop.wait(0.05)
                continue
            size = size_of(writer_rng)
            data = writer_rng.randbytes(size)
            written_bytes += size
            name = f"f{index:05d}-{size}.bin"
            index += 1
            with open(os.path.join(staging, name), "wb") as f:
                f.write(data)
            os.rename(os.path.join(staging, name), os.path.join(spool, name))
            with lock:  # after the rename: a name the sampler knows was in the spool
                written[name] = hashlib.sha256(data).hexdigest()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


def crash_loop(daemon, rng, duration, sample, pause=0.2):
    """Kills ferryd with SIGKILL every 0.5-3 s for `duration` seconds, restarting it at once, and
    calls `sample()` every `pause` seconds in between. Returns (kills, samples)."""
    end = time.monotonic() + duration
    kills = samples = 0
    while time.monotonic() < end:
        wait_until = time.monotonic() + rng.uniform(0.5, 3.0)
        while time.monotonic() < wait_until:
            sample()
            samples += 1
            time.sleep(pause)
        daemon.kill9()
        kills += 1
        daemon.start()
    return kills, samples


def drain(daemon, spool, failures):
    """Waits (up to 300 s) for the spool to empty, stops ferryd with SIGTERM and checks the failed
    directory is empty; returns the names still in the spool."""
    deadline = time.monotonic() + 300
    while spool_names(spool) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = spool_names(spool)
    if left:
        failures.append(f"{len(left)} files still in the spool 300 s after the crash loop: {sorted(left)[:10]}")
    status = daemon.terminate()
    if status != 0:
        failures.append(f"ferryd exited with {status} on SIGTERM")
    failed_dir = os.path.join(spool, ".failed")
    if os.path.isdir(failed_dir) and os.listdir(failed_dir):
        failures.append(f"files in the failed directory: {sorted(os.listdir(failed_dir))[:10]}")
    return left


def tear_down(daemon, server, work, keep):
    """Kills ferryd, stops the server, and removes the work directory unless it is to be kept."""
    if daemon:
        daemon.kill9()
    if server:
        server.stop()
    if keep:
        log(f"work directory kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def verdict(failures, seed, holds):
    """Prints each failure, or that the oracle holds (`holds`); returns the exit status."""
    if failures:
        for failure in failures[:50]:
            log(f"FAIL {failure}")
        log(f"{len(failures)} failures (seed {seed})")
        return 1
    log(holds)
    return 0


def work_directories(prefix):
    """A new work directory with its spool, staging and state directories: (work, spool, staging)."""
    work = tempfile.mkdtemp(prefix=prefix)
    spool, staging = os.path.join(work, "spool"), os.path.join(work, "staging")
    for d in (spool, staging, os.path.join(work, "state")):
        os.makedirs(d)
    return work, spool, staging


def ferryd_binary(directory, script):
    """The ferryd in `directory`, or None (said on stderr) if there is none."""
    binary = os.path.join(directory, "ferryd")
    if not os.access(binary, os.X_OK):
        print(f"{script}: no ferryd at {binary} (swift build first, or --bin DIR)", file=sys.stderr)
        return None
    return binary


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("FERRY_BIN", os.path.join(ROOT, ".build/debug")))
    p.add_argument("--server", choices=["rclone", "moto", "seaweedfs"], default="rclone")
    p.add_argument("--duration", type=float, default=300.0, help="seconds of the crash loop")
    p.add_argument("--quick", action="store_true", help="a 75-second crash loop")
    p.add_argument("--long", action="store_true", help="a 20-minute crash loop")
    p.add_argument("--part-concurrency", type=int, default=1, help="the spool's part_concurrency")
    p.add_argument("--budget-mib", type=int, default=1536,
                   help="MiB written over the crash loop at most, spread evenly (the server keeps every object)")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    duration = 75.0 if a.quick else 1200.0 if a.long else a.duration
    binary = ferryd_binary(a.bin, "torture_s3")
    if not binary:
        return 2
    rng = random.Random(a.seed)
    work, spool, staging = work_directories("ferry-torture-s3-")
    log(f"seed {a.seed}, server {a.server}, part_concurrency {a.part_concurrency}, crash loop {duration:.0f} s, "
        f"work directory {work}")
    server = daemon = None
    failures = []
    written = {}  # name -> sha256
    lock = threading.Lock()
    stop_writing = threading.Event()
    try:
        server = Server(a.server, os.path.join(work, "server"))
        config = os.path.join(work, "ferry.toml")
        write_config(config, work, spool, server.endpoint, a.part_concurrency)
        daemon = Daemon(binary, config, os.path.join(work, "ferryd.log"))
        daemon.start()

        thread = start_writer(spool, staging, a.seed, duration, a.budget_mib, file_size, written, lock, stop_writing)

        def sample():
            with lock:
                known = set(written)
            present = spool_names(spool)  # before the listing: a file gone now must be listed after
            keys = server.keys()
            for name in sorted(known - present):
                if "t/" + name not in keys:
                    failures.append(f"{name} left the spool before its object was in the bucket")

        # The crash loop, with the sampler between kills.
        kills, samples = crash_loop(daemon, rng, duration, sample)
        stop_writing.set()
        thread.join()
        log(f"crash loop over: {kills} kills, {len(written)} files written, {samples} samples; draining")

        left = drain(daemon, spool, failures)
        keys = server.keys()
        total = 0
        for name, digest in sorted(written.items()):
            if name in left:
                continue
            if "t/" + name not in keys:
                failures.append(f"{name}: no object")
                continue
            got = server.sha256("t/" + name)
            total += int(name.rsplit("-", 1)[1].split(".")[0])
            if got != digest:
                failures.append(f"{name}: the object's SHA-256 is {got}, the file's {digest}")
        open_uploads = server.open_uploads()
        if open_uploads:
            failures.append(f"{len(open_uploads)} multipart uploads left open: {open_uploads[:10]}")
        with open(daemon.log_path, errors="replace") as f:
            abandoned = f.read().count("aborted the multipart upload a crash left")
        log(f"{len(written)} files ({total / MIB:.1f} MiB), {kills} kills; {len(keys)} objects; "
            f"{len(open_uploads)} uploads open; {abandoned} left by a crash before their creation was recorded, aborted")
    except RunBroken as e:
        log(f"the run broke: {e}")
        return 2
    finally:
        stop_writing.set()
        tear_down(daemon, server, work, a.keep or bool(failures))
    return verdict(failures, a.seed, "the oracle holds: every file arrived whole, none left before its object existed, "
                                     "no upload left open")

if __name__ == "__main__":
    sys.exit(main())
