#!/usr/bin/env python3
"""Ferry torture run: prove that nothing is lost under crashes, network faults, outages and SIGTERM.

It drives the built `ferryd` and `ferry-receiver` (Python 3 standard library only):

  1. crash loop   files of mixed sizes (0 B up to 8 MiB, 64 MiB with --long) are written beside the
                  spool and renamed in, continuously, while ferryd is killed with SIGKILL at random
                  moments and restarted; a sampler checks, all along, that every file gone from the
                  spool is already in the receiver's manifest (or in failed_directory).
  2. faults       meanwhile the receiver answers 500/503/429 (with and without Retry-After), resets
                  connections (TCP RST), closes them, stalls, reads slowly, answers without storing,
                  and accepts truncated bodies with a 2xx, by probability from a seed; it also goes
                  down now and then.
  3. outage       the receiver is down for a while with files queued: the gaps between attempts must
                  stay within the spool's retry max_delay, and everything drains once it is back.
  4. SIGTERM      during heavy traffic: ferryd exits within shutdown_timeout (+ a margin), and no job
                  is left `uploading`; after a restart everything drains.
  5. independent  a dozen files to a receiver whose multipart parser is not Ferry's (Werkzeug, from
                  Tests/Servers/multipart_server.py): each file and its {sha256} field must match.

The oracle, at the end: every dropped file arrived byte-identical (its sha256 in the manifest under its
unique name, stored by a request the receiver answered 2xx), nothing is left in the spool outside failed_directory, no file left the spool before its
receipt. A 2xx the receiver gave for a truncated body (the `partial` fault) is the server's loss, not
Ferry's: such files are listed apart as "acknowledged truncated" when that 2xx answered the last request
of the job that is done (Ferry trusts a 2xx; see
docs/RELIABILITY.md). Duplicates (a file received more than once) are counted, with how many repeats
carried the same Idempotency-Key.

  scripts/torture.py --quick          # about 2-3 minutes (CI)
  scripts/torture.py --long           # 20+ minutes, thousands of files, hundreds of kills
  scripts/torture.py --small-files 20000 --bin .build/release   # many small files, as fast as ferryd takes them
  scripts/torture.py --duration 600   # the crash loop's length in seconds
Options: --bin DIR (default .build/debug; also $FERRY_BIN), --seed N, --keep (keep the work directory),
--tls (serve HTTPS with a test CA made by openssl), --no-faults. Exit status: 0 the oracle holds, 1 it
does not (each failing file is printed with the reason), 2 the run itself broke (a process would not
start, a timeout).
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIB, MIB = 1024, 1024 * 1024

# The receiver's faults: probabilities per request (they add up to about 0.3).
FAULTS = [
    "500@0.04",
    "503@0.02",
    "503:retry-after=1@0.04",
    "429:retry-after=1@0.03",
    "429:retry-after=date:1@0.01",
    "500:early@0.01",
    "reset@0.05",
    "disconnect@0.02",
    "slow:rate=2m@0.02",
    "stall@0.01",
    "stall-after-body:store@0.01",
    "close@0.01",
    "close:store@0.02",
    "partial@0.02",
]


def small_file_faults(faults):
    """The faults of a --small-files run: the Retry-After answers 20 times rarer.

    Each 429 or 503 with Retry-After holds the whole spool for a second (ServerWaits). At 8 % of
    requests that caps a spool at about 10 files/s whatever ferryd can do, and a 20,000-file crash loop
    would test the hold rather than the many-small-files path. The other faults keep their rates.
    """
    scaled = []
    for fault in faults:
        spec, _, probability = fault.rpartition("@")
        if "retry-after" in spec:
            probability = f"{float(probability) / 20:g}"
        scaled.append(f"{spec}@{probability}")
    return scaled


class RunBroken(Exception):
    """The run could not go on (not an oracle failure)."""


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


class Settings:
    def __init__(self, args):
        self.long = args.long
        self.duration = args.duration or (1200 if args.long else 80)
        self.max_size = (64 if args.long else 8) * MIB
        self.files_per_second = 4.0 if args.long else 5.0
        self.kill_interval = (0.3, 4.0)
        self.outage_every = (40, 90) if args.long else (15, 25)   # receiver outages inside the crash loop
        self.outage_length = (1.0, 6.0) if args.long else (1.0, 3.0)
        self.down_time = 45 if args.long else 8                    # phase 3
        self.down_files = 12 if args.long else 8
        self.sigterm_rounds = 8 if args.long else 2
        self.sigterm_burst = 40 if args.long else 24
        self.independent_files = 40 if args.long else 12            # phase 5
        self.max_delay = 2.0
        self.shutdown_timeout = 3.0
        self.shutdown_margin = 3.0
        self.no_progress = 3.0
        self.drain_timeout = 600 if args.long else 120
        self.backlog_limit = 300                                   # the producer waits beyond this many files in the spool
        self.backlog_bytes = 2 * 1024 * MIB
        # --small-files N: the crash loop drops N files of at most 64 KiB as fast as it can, and lasts
        # until all are dropped (the many-small-files path: batched commits, bodies in memory).
        self.small_files = args.small_files
        if self.small_files:
            self.max_size = 64 * KIB
            self.backlog_limit = 2000
            self.duration = args.duration or 3600


class Work:
    """The temporary directory and the paths in it."""

    def __init__(self, keep):
        self.path = tempfile.mkdtemp(prefix="ferry-torture.")
        self.keep = keep
        self.spool = os.path.join(self.path, "spool")
        self.staging = os.path.join(self.path, "staging")   # same filesystem as the spool
        self.failed = os.path.join(self.spool, ".failed")
        self.state = os.path.join(self.path, "state")
        self.received = os.path.join(self.path, "received")
        self.manifest = os.path.join(self.path, "manifest.jsonl")
        self.requests = os.path.join(self.path, "requests.jsonl")
        self.config = os.path.join(self.path, "ferry.toml")
        self.ferryd_log = os.path.join(self.path, "ferryd.log")
        self.receiver_log = os.path.join(self.path, "receiver.log")
        self.socket = os.path.join(self.state, "control.sock")
        self.db = os.path.join(self.state, "queue.sqlite")
        for d in (self.spool, self.staging, self.received):
            os.makedirs(d, exist_ok=True)

    def cleanup(self):
        if self.keep:
            log(f"work directory kept: {self.path}")
        else:
            shutil.rmtree(self.path, ignore_errors=True)


class Child:
    """A process in its own process group, killed (group and all) on cleanup."""

    def __init__(self, argv, stdout, stderr):
        self.proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self):
        self.signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


class ReceiverProcess:
    def __init__(self, binary, work, faults, seed, tls):
        self.binary, self.work, self.faults, self.seed, self.tls = binary, work, faults, seed, tls
        self.port = 0
        self.url = None
        self.child = None
        self.starts = 0

    def start(self):
        out = os.path.join(self.work.path, f"receiver-{self.starts}.out")
        argv = [self.binary, "--directory", self.work.received, "--hash-only", "--manifest", self.work.manifest,
                "--requests", self.work.requests, "--seed", str(self.seed + self.starts), "--port", str(self.port)]
        if self.tls:
            argv += ["--tls-cert", self.tls["cert"], "--tls-key", self.tls["key"]]
        for fault in self.faults:
            argv += ["--fault", fault]
        with open(out, "w") as stdout, open(self.work.receiver_log, "a") as stderr:
            self.child = Child(argv, stdout, stderr)
        self.starts += 1
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(out) as f:
                text = f.read()
            if "listening on " in text:
                self.url = text.split("listening on ", 1)[1].split()[0]
                self.port = int(self.url.rsplit(":", 1)[1])
                return
            if not self.child.alive():
                break
            time.sleep(0.05)
        raise RunBroken(f"ferry-receiver did not start; see {self.work.receiver_log}")

    def stop(self):
        if self.child:
            self.child.kill()
            self.child = None


class Daemon:
    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.child = None
        self.starts = 0

    def start(self):
        with open(self.work.ferryd_log, "a") as f:
            f.write(f"----- torture: start #{self.starts} at {time.time():.3f}\n")
            f.flush()
            self.child = Child([self.binary, "--config", self.work.config], subprocess.DEVNULL, f)
        self.starts += 1

    def wait_ready(self, timeout=60):
        # The start marker, then msg=ready after it.
        deadline = time.time() + timeout
        marker = f"----- torture: start #{self.starts - 1} "
        while time.time() < deadline:
            with open(self.work.ferryd_log, errors="replace") as f:
                text = f.read()
            tail = text[text.rfind(marker):]
            if "msg=ready" in tail:
                return
            if not self.child.alive():
                raise RunBroken(f"ferryd exited with {self.child.proc.returncode} before it was ready:\n{tail[-3000:]}")
            time.sleep(0.05)
        raise RunBroken("ferryd was not ready in time")

    def kill9(self):
        if self.child:
            self.child.kill()
            self.child = None

    def terminate(self, timeout=60):
        """SIGTERM; returns (seconds to exit, exit status)."""
        started = time.monotonic()
        self.child.proc.send_signal(signal.SIGTERM)
        try:
            status = self.child.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.child.kill()
            status = None
        elapsed = time.monotonic() - started
        self.child = None
        return elapsed, status

    def alive(self):
        return self.child is not None and self.child.alive()


class JsonLines:
    """Reads a JSON Lines file incrementally (complete lines only)."""

    def __init__(self, path):
        self.path, self.offset, self.pending = path, 0, b""

    def read_new(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.pending + data
        lines = data.split(b"\n")
        self.pending = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


class Ledger:
    """What was dropped, and what the receiver got."""

    def __init__(self, work):
        self.lock = threading.Lock()
        self.dropped = {}          # name -> (size, sha256)
        self.bytes = 0
        self.manifest = JsonLines(work.manifest)
        self.received = {}         # name -> [manifest entries]
        self.requests = JsonLines(work.requests)
        self.faults = {}           # kind -> count
        self.partial_keys = {}     # idempotency key -> (time, Content-Length) of a request answered 2xx after a truncated body
        self.last_fault = {}       # idempotency key -> the fault of that key's latest request (None: none)
        self.request_count = 0

    def drop(self, name, size, digest):
        with self.lock:
            self.dropped[name] = (size, digest)
            self.bytes += size

    def snapshot_dropped(self):
        with self.lock:
            return set(self.dropped)

    def refresh(self):
        with self.lock:
            for entry in self.manifest.read_new():
                self.received.setdefault(entry["filename"], []).append(entry)
            for entry in self.requests.read_new():
                self.request_count += 1
                fault = entry.get("fault")
                if entry.get("idempotency_key"):
                    self.last_fault[entry["idempotency_key"]] = fault
                if fault:
                    self.faults[fault] = self.faults.get(fault, 0) + 1
                    if fault == "partial" and entry.get("idempotency_key"):
                        self.partial_keys.setdefault(entry["idempotency_key"], (entry["time"], entry.get("content_length")))

    def received_names(self):
        with self.lock:
            return set(self.received)


def spool_names(work):
    """Regular files in the spool (dot-names aside, except claims)."""
    try:
        return {n for n in os.listdir(work.spool) if not n.startswith(".")}
    except FileNotFoundError:
        return set()


def claim_files(work):
    return [n for n in os.listdir(work.spool) if n.startswith(".ferry-claim-")]


def failed_names(work):
    try:
        return {n for n in os.listdir(work.failed) if not n.endswith(".error.json")}
    except FileNotFoundError:
        return set()


def open_db(work):
    """A read-only view of the queue: a copy of the database and its WAL, so it works whether ferryd
    is running, exited or was killed."""
    snapshot = os.path.join(work.path, "db-snapshot")
    shutil.rmtree(snapshot, ignore_errors=True)
    os.makedirs(snapshot)
    for suffix in ("", "-wal"):
        source = work.db + suffix
        if os.path.exists(source):
            shutil.copyfile(source, os.path.join(snapshot, "queue.sqlite" + suffix))
    db = sqlite3.connect(os.path.join(snapshot, "queue.sqlite"))
    db.row_factory = sqlite3.Row
    return db


def jobs_by_name(work):
    db = open_db(work)
    try:
        rows = db.execute(
            "SELECT id, relative_path, state, attempts, disposed_at, "
            "(SELECT bytes_sent FROM attempt a WHERE a.job_seq = job.seq AND a.outcome = 'success' ORDER BY a.seq DESC LIMIT 1) "
            "AS success_bytes FROM job ORDER BY seq").fetchall()
    finally:
        db.close()
    result = {}
    for row in rows:
        name = bytes(row["relative_path"]).decode("utf-8", "replace")
        result.setdefault(name, []).append(dict(row))
    return result


def random_size(rng, max_size):
    r = rng.random()
    if r < 0.05:
        return 0
    if r < 0.55:
        low, high = 1, 64 * KIB
    elif r < 0.88:
        low, high = 64 * KIB, MIB
    else:
        low, high = MIB, max_size
    return int(round(low * (high / low) ** rng.random()))


class Producer(threading.Thread):
    """Writes files beside the spool and renames them in."""

    def __init__(self, work, ledger, settings, rng):
        super().__init__(daemon=True)
        self.work, self.ledger, self.settings, self.rng = work, ledger, settings, rng
        self.stop_event = threading.Event()
        self.sequence = 0
        self.error = None

    def make(self, size, tag="c"):
        name = f"{tag}{self.sequence:06d}-{size}.bin"
        self.sequence += 1
        staging = os.path.join(self.work.staging, name)
        digest = hashlib.sha256()
        with open(staging, "wb") as f:
            left = size
            while left > 0:
                chunk = os.urandom(min(left, 4 * MIB))
                digest.update(chunk)
                f.write(chunk)
                left -= len(chunk)
        os.rename(staging, os.path.join(self.work.spool, name))
        # Recorded after the rename, so the sampler never expects a file not yet in the spool (one
        # that leaves before this line is checked by the final oracle all the same).
        self.ledger.drop(name, size, digest.hexdigest())
        return name

    def backlog(self):
        total, count = 0, 0
        for entry in os.scandir(self.work.spool):
            if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
                count += 1
                try:
                    total += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    pass
        return count, total

    @property
    def finished(self):
        """With --small-files, whether all of them have been dropped."""
        return bool(self.settings.small_files) and self.sequence >= self.settings.small_files

    def run(self):
        try:
            interval = 1.0 / self.settings.files_per_second
            small = self.settings.small_files
            while not self.stop_event.is_set() and not self.finished:
                if not small or self.sequence % 200 == 0:
                    count, total = self.backlog()
                    if count > self.settings.backlog_limit or total > self.settings.backlog_bytes:
                        self.stop_event.wait(0.5 if not small else 0.05)
                        continue
                if small:
                    self.make(int(round((self.settings.max_size + 1) ** self.rng.random())) - 1)
                    continue
                self.make(random_size(self.rng, self.settings.max_size))
                self.stop_event.wait(self.rng.expovariate(1.0 / interval))
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            self.error = error


class Sampler(threading.Thread):
    """Checks, while everything runs, that a file gone from the spool has its receipt (or is in
    failed_directory). Order matters: the dropped set first, then the spool, then the receipts."""

    def __init__(self, work, ledger, interval):
        super().__init__(daemon=True)
        self.work, self.ledger, self.interval = work, ledger, interval
        self.stop_event = threading.Event()
        self.suspects = {}   # name -> time first seen missing without a receipt
        self.samples = 0
        self.error = None

    def sample(self):
        dropped = self.ledger.snapshot_dropped()
        present = spool_names(self.work)
        # The moment the spool was seen: a receipt written after it does not excuse a file gone before it.
        listed_at = time.time()
        self.ledger.refresh()
        received = self.ledger.received_names()
        failed = failed_names(self.work)
        self.samples += 1
        for name in dropped - present - received - failed:
            self.suspects.setdefault(name, listed_at)

    def run(self):
        try:
            while not self.stop_event.is_set():
                self.sample()
                self.stop_event.wait(self.interval)
        except Exception as error:  # noqa: BLE001
            self.error = error


class Killer(threading.Thread):
    """SIGKILLs ferryd at random moments and restarts it; takes the receiver down now and then."""

    def __init__(self, daemon, receiver, settings, rng):
        super().__init__(daemon=True)
        self.daemon_process, self.receiver, self.settings, self.rng = daemon, receiver, settings, rng
        self.stop_event = threading.Event()
        self.kills = 0
        self.outages = 0
        self.error = None

    def run(self):
        try:
            next_outage = time.monotonic() + self.rng.uniform(*self.settings.outage_every)
            outage_end = None
            while not self.stop_event.is_set():
                self.stop_event.wait(self.rng.uniform(*self.settings.kill_interval))
                if self.stop_event.is_set():
                    break
                now = time.monotonic()
                if outage_end is None and now >= next_outage:
                    self.receiver.stop()
                    self.outages += 1
                    outage_end = now + self.rng.uniform(*self.settings.outage_length)
                elif outage_end is not None and now >= outage_end:
                    self.receiver.start()
                    outage_end = None
                    next_outage = now + self.rng.uniform(*self.settings.outage_every)
                self.daemon_process.kill9()
                self.kills += 1
                self.daemon_process.start()
            if outage_end is not None:
                self.receiver.start()
        except Exception as error:  # noqa: BLE001
            self.error = error


def write_config(work, settings, url, ca_file):
    lines = [
        f'state_directory = "{work.state}"',
        f'control_socket = "{work.socket}"',
        'log_level = "info"',
        "max_concurrent_uploads = 4",
        f'shutdown_timeout = "{int(settings.shutdown_timeout * 1000)}ms"',
        'rescan_interval = "30s"',
        "",
        "[[spool]]",
        'name = "torture"',
        f'directory = "{work.spool}"',
        f'url = "{url}/upload"',
        'settle = "1s"',
        'after_upload = "delete"',
        # The receiver's `partial` fault answers 2xx for a truncated body, sometimes before ferryd sent it
        # all; the run counts those as "acknowledged truncated". Ferry's default would keep such a file in
        # the spool (EarlyAnswerTests.swift).
        "trust_early_answers = true",
        f'no_progress_timeout = "{int(settings.no_progress * 1000)}ms"',
        'connect_timeout = "2s"',
    ]
    if ca_file:
        lines.append(f'ca_file = "{ca_file}"')
    lines += [
        "[spool.fields]",
        'sha256 = "{sha256}"',
        "[spool.retry]",
        'initial_delay = "100ms"',
        f'max_delay = "{int(settings.max_delay * 1000)}ms"',
        "max_attempts = 0",
        'max_age = "1d"',
    ]
    with open(work.config, "w") as f:
        f.write("\n".join(lines) + "\n")


def make_tls(work):
    pki = os.path.join(work.path, "pki")
    os.makedirs(pki)
    with open(os.path.join(pki, "san.cnf"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Ferry Torture CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
         "-days", "2", "-extfile", "san.cnf"],
    ]
    for step in steps:
        subprocess.run(["openssl"] + step, cwd=pki, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"ca": os.path.join(pki, "ca.pem"), "cert": os.path.join(pki, "server.pem"), "key": os.path.join(pki, "server.key")}


def wait_drained(work, ledger, ferryctl, timeout, why):
    """Until every dropped file has left the spool and the queue has no active job.

    `timeout` bounds the time without progress: the deadline moves on whenever fewer files are left,
    so a large backlog drains however long it takes, and a stuck one fails after `timeout` seconds.
    """
    deadline = time.time() + timeout
    fewest = None
    while time.time() < deadline:
        ledger.refresh()
        dropped = ledger.snapshot_dropped()
        left = dropped & spool_names(work)
        if fewest is None or len(left) < fewest:
            fewest = len(left)
            deadline = time.time() + timeout
        if not left and not claim_files(work):
            result = subprocess.run([ferryctl, "--socket", work.socket, "wait", "--timeout", "5s"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if result.returncode in (0, 1):   # 1: some jobs failed (the oracle will say which)
                return time.time()
        time.sleep(0.25)
    left = sorted(ledger.snapshot_dropped() & spool_names(work))
    raise RunBroken(f"{why}: no progress for {timeout}s; {len(left)} files still in the spool, e.g. {left[:5]}")


def phase_crash_loop(ctx):
    s = ctx.settings
    if s.small_files:
        log(f"phase 1+2: crash loop with faults until {s.small_files:,} files of up to {human_bytes(s.max_size)} are dropped")
    else:
        log(f"phase 1+2: crash loop with faults for {s.duration}s (files up to {human_bytes(s.max_size)})")
    producer = Producer(ctx.work, ctx.ledger, s, random.Random(ctx.rng.random()))
    ctx.producer = producer
    killer = Killer(ctx.daemon, ctx.receiver, s, random.Random(ctx.rng.random()))
    producer.start()
    killer.start()
    started = time.time()
    last_report = started
    while time.time() - started < s.duration and not producer.finished:
        time.sleep(1)
        for thread in (producer, killer, ctx.sampler):
            if thread.error:
                raise RunBroken(f"{type(thread).__name__} failed: {thread.error!r}")
        if time.time() - last_report >= (60 if s.long else 15):
            last_report = time.time()
            ctx.ledger.refresh()
            log(f"  {len(ctx.ledger.dropped)} files dropped, {len(ctx.ledger.received)} received, "
                f"{killer.kills} kills, {killer.outages} outages, {len(spool_names(ctx.work))} in the spool")
    producer.stop_event.set()
    killer.stop_event.set()
    producer.join()
    killer.join()
    ctx.kills += killer.kills
    ctx.outages += killer.outages
    if not ctx.daemon.alive():
        ctx.daemon.start()
    log(f"  dropping stopped: {len(ctx.ledger.dropped)} files; draining")
    t0 = time.time()
    wait_drained(ctx.work, ctx.ledger, ctx.ferryctl, s.drain_timeout, "crash loop")
    log(f"  drained in {time.time() - t0:.1f}s")


def phase_outage(ctx):
    s = ctx.settings
    log(f"phase 3: receiver down for {s.down_time}s with {s.down_files} files queued")
    ctx.daemon.wait_ready()
    ctx.receiver.stop()
    ctx.outages += 1
    down_at = time.time()
    names = []
    rng = random.Random(ctx.rng.random())
    for i in range(s.down_files):
        names.append(ctx.producer.make(rng.choice([0, 1000, 50 * KIB, MIB, 3 * MIB]), tag="d"))
    time.sleep(s.down_time)
    ctx.receiver.start()
    up_at = time.time()
    drained_at = wait_drained(ctx.work, ctx.ledger, ctx.ferryctl, s.drain_timeout, "outage")
    db = sqlite3.connect(f"file:{ctx.work.db}?mode=ro", uri=True)   # ferryd is running: a live read-only view
    db.row_factory = sqlite3.Row
    worst_gap, attempts = 0.0, 0
    try:
        # A 429 or 503 with Retry-After holds the whole spool (ServerWaits) for its 1 s, and a
        # connection that cannot be made holds it for at most max_delay (UnreachableServer): every
        # file due meanwhile starts when the hold ends, so a file's gap is bounded by its own
        # backoff or the last hold. Holds as (start, latest end).
        holds = [(row[0] + row[1], row[0] + row[1] + 1.0) for row in db.execute(
            "SELECT started_at, duration FROM attempt WHERE http_status IN (429, 503)")]
        holds += [(row[0] + row[1], row[0] + row[1] + s.max_delay) for row in db.execute(
            "SELECT started_at, duration FROM attempt WHERE http_status IS NULL AND "
            "(error LIKE '%Connection refused%' OR error LIKE 'cannot connect%' OR error LIKE 'connecting to % timed out')")]
        for name in names:
            rows = db.execute(
                "SELECT a.started_at, a.duration, a.outcome, a.error, a.http_status FROM attempt a JOIN job j ON a.job_seq = j.seq "
                "WHERE j.relative_path = ? ORDER BY a.seq", (name.encode(),)).fetchall()
            if not rows:
                rows = db.execute(
                    "SELECT a.started_at, a.duration, a.outcome, a.error, a.http_status FROM attempt a JOIN job j ON a.job_seq = j.seq "
                    "WHERE j.relative_path = ? ORDER BY a.seq", (name,)).fetchall()
            attempts += len(rows)
            for previous, current in zip(rows, rows[1:]):
                ended = previous["started_at"] + previous["duration"]
                gap = current["started_at"] - ended
                held_until = max((end for start, end in holds if ended < start < current["started_at"]), default=0.0)
                worst_gap = max(worst_gap, gap - max(0.0, held_until - (ended + s.max_delay)))
    finally:
        db.close()
    ctx.outage_result = {"down": up_at - down_at, "drain_after_up": drained_at - up_at, "worst_gap": worst_gap, "attempts": attempts}
    if attempts < len(names):
        ctx.failures.append(f"outage: found {attempts} attempts for {len(names)} files: the retry-gap check could not be made")
    log(f"  {attempts} attempts, longest gap between attempts {worst_gap:.2f}s (max_delay {s.max_delay:.1f}s), "
        f"drained {drained_at - up_at:.1f}s after the receiver came back")
    # The gap beyond a spool hold; neither hold exceeds max_delay here; 0.75 s covers the
    # scheduler's wake-up and a debug build.
    if worst_gap > s.max_delay + 0.75:
        ctx.failures.append(f"outage: a gap of {worst_gap:.2f}s between attempts exceeds max_delay {s.max_delay}s")
    if drained_at - up_at > s.max_delay + 2 * s.no_progress + 10:
        ctx.failures.append(f"outage: draining took {drained_at - up_at:.1f}s after the receiver came back")


def phase_independent_parser(ctx):
    """The same ferryd, sent to a receiver whose multipart parser is not Ferry's (Werkzeug): every file
    and its {sha256} field must arrive as dropped. The rest of the run checks bytes through Ferry's own
    parser; this checks that parser's verdicts once per run against another's."""
    s = ctx.settings
    log(f"phase 5: {s.independent_files} files to an independent parser (Werkzeug)")
    directory = os.path.join(ctx.work.path, "independent")
    os.makedirs(directory)
    server = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "Tests", "Servers", "multipart_server.py"), "--parser", "werkzeug", "--directory", directory],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        if "listening on " not in line:
            raise RunBroken(f"the independent receiver did not start: {line!r}")
        url = line.split("listening on ", 1)[1].strip()
        write_config(ctx.work, s, url, None)
        reload = subprocess.run([ctx.ferryctl, "--socket", ctx.work.socket, "reload"], capture_output=True, text=True)
        if reload.returncode != 0:
            raise RunBroken(f"ferryctl reload failed: {reload.stderr}")
        rng = random.Random(ctx.rng.random())
        expected = {}
        for i in range(s.independent_files):
            size = rng.choice([0, 1, 1000, 64 * KIB, MIB, 3 * MIB + 7])
            name = f"w{i:04d}-{size}.bin"
            data = os.urandom(size)
            staging = os.path.join(ctx.work.staging, name)
            with open(staging, "wb") as f:
                f.write(data)
            os.rename(staging, os.path.join(ctx.work.spool, name))
            expected[name] = (size, hashlib.sha256(data).hexdigest())
        deadline = time.time() + s.drain_timeout
        while time.time() < deadline and expected.keys() & spool_names(ctx.work):
            time.sleep(0.1)
        received = {}
        path = os.path.join(directory, "requests.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                for entry_line in f:
                    entry = json.loads(entry_line)
                    for part in entry.get("files", []):
                        received[part["filename"]] = (part["size"], part["sha256"], entry.get("fields", {}).get("sha256"))
        for name, (size, digest) in sorted(expected.items()):
            got = received.get(name)
            if got is None:
                ctx.failures.append(f"independent parser: {name} never arrived")
            elif got[:2] != (size, digest) or got[2] != digest:
                ctx.failures.append(f"independent parser: {name} arrived as size {got[0]} sha256 {got[1][:16]}… field {str(got[2])[:16]}…, "
                                    f"expected size {size} sha256 {digest[:16]}…")
        ctx.independent_result = {"files": len(expected), "received": len(expected.keys() & received.keys())}
        log(f"  {ctx.independent_result['received']} of {len(expected)} files arrived whole at Werkzeug, with the right sha256 field")
    finally:
        server.kill()
        server.wait()


def phase_sigterm(ctx):
    s = ctx.settings
    log(f"phase 4: SIGTERM during heavy traffic, {s.sigterm_rounds} rounds of {s.sigterm_burst} files")
    rng = random.Random(ctx.rng.random())
    ctx.sigterm_exits = []
    for round_number in range(s.sigterm_rounds):
        if not ctx.daemon.alive():
            ctx.daemon.start()
        ctx.daemon.wait_ready()
        for i in range(s.sigterm_burst):
            size = rng.choice([s.max_size, s.max_size // 2, 4 * MIB]) if i % 4 == 0 else random_size(rng, 2 * MIB)
            ctx.producer.make(size, tag="t")
        # Heavy traffic: wait until uploads are in flight, then strike at a random moment.
        deadline = time.time() + 20
        in_flight = 0
        while time.time() < deadline and in_flight < 2:
            try:
                live = sqlite3.connect(f"file:{ctx.work.db}?mode=ro", uri=True)
                in_flight = live.execute("SELECT count(*) FROM job WHERE state = 'uploading'").fetchone()[0]
                live.close()
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.5))
        elapsed, status = ctx.daemon.terminate()
        ctx.sigterm_exits.append(elapsed)
        db = open_db(ctx.work)
        try:
            stuck = db.execute("SELECT id, relative_path FROM job WHERE state = 'uploading'").fetchall()
        finally:
            db.close()
        log(f"  round {round_number + 1}: SIGTERM with {in_flight} uploads in flight; exited {status} after {elapsed:.2f}s, "
            f"{len(stuck)} jobs left uploading")
        if status != 0:
            ctx.failures.append(f"SIGTERM round {round_number + 1}: ferryd exited with status {status}")
        if elapsed > s.shutdown_timeout + s.shutdown_margin:
            ctx.failures.append(f"SIGTERM round {round_number + 1}: exit took {elapsed:.2f}s, more than shutdown_timeout "
                                f"{s.shutdown_timeout}s + {s.shutdown_margin}s")
        for row in stuck:
            ctx.failures.append(f"SIGTERM round {round_number + 1}: job {row['id']} "
                                f"({bytes(row['relative_path']).decode(errors='replace')}) left in state uploading")
    ctx.daemon.start()
    wait_drained(ctx.work, ctx.ledger, ctx.ferryctl, s.drain_timeout, "after SIGTERM")


def oracle(ctx):
    work, ledger = ctx.work, ctx.ledger
    ledger.refresh()
    jobs = jobs_by_name(work)
    present = spool_names(work)
    failed = failed_names(work)
    problems = []
    truncated_acks, truncated_early = [], []
    duplicates = same_key = 0
    for name, (size, digest) in sorted(ledger.dropped.items()):
        entries = ledger.received.get(name, [])
        # Only a copy the server answered 2xx for is a delivery: one stored by a server that then closed
        # or stalled without answering (close:store, stall-after-body:store) must not excuse a deletion.
        delivered = [e for e in entries if e.get("status") is not None and 200 <= e["status"] < 300]
        good = [e for e in delivered if e["sha256"] == digest and e["size"] == size]
        bad = [e for e in entries if e["sha256"] != digest or e["size"] != size]
        for e in bad:
            problems.append(f"{name}: received with sha256 {e['sha256'][:16]}… size {e['size']}, expected {digest[:16]}… size {size} (corrupt)")
        if len(entries) > 1:
            duplicates += 1
            keys = {e.get("idempotency_key") for e in entries}
            if len(keys) == 1:
                same_key += 1
        if name in present:
            problems.append(f"{name}: still in the spool after draining")
        if name in failed:
            problems.append(f"{name}: moved to failed_directory (no permanent fault was injected)")
            continue
        if not good:
            # Excused only when the job that is done got its 2xx for a truncated body on its last request.
            if any(j["state"] == "done" and ledger.last_fault.get(j["id"]) == "partial" for j in jobs.get(name, [])):
                truncated_acks.append(name)
                # Could ferryd have known? It had not handed the whole body over when the 2xx came.
                for job in jobs[name]:
                    if job["state"] == "done" and job["id"] in ledger.partial_keys:
                        length = ledger.partial_keys[job["id"]][1]
                        if length and job["success_bytes"] is not None and job["success_bytes"] < length:
                            truncated_early.append(name)
            else:
                states = ", ".join(f"{j['id']}={j['state']}" for j in jobs.get(name, [])) or "no job"
                problems.append(f"{name}: LOST (never received; jobs: {states})")
    for name, since in sorted(ctx.sampler.suspects.items()):
        if name in truncated_acks:
            continue
        # Its job was told 200 for a truncated body before the file went: the server's word, taken
        # (a copy may still arrive later, e.g. from an earlier attempt the server was slowly reading).
        partial_times = [ledger.partial_keys[j["id"]][0] for j in jobs.get(name, [])
                         if j["state"] == "done" and j["id"] in ledger.partial_keys]
        if partial_times and min(partial_times) <= since:
            continue
        # A file seen missing without a receipt is a violation unless it turned up in failed_directory
        # afterwards (its move goes through a claim name) or was back in the spool.
        if name in failed:
            continue
        entries = ledger.received.get(name, [])
        first = min((e["time"] for e in entries), default=None)
        if first is not None and first <= since:
            continue   # the receipt was written before the sample saw the file missing (a read race)
        problems.append(f"{name}: left the spool before its receipt (seen missing at {since:.3f}, "
                        f"first receipt {'never' if first is None else f'{first:.3f}'})")
    leftovers = claim_files(work)
    for name in leftovers:
        problems.append(f"{name}: claim file left in the spool")
    lost = sum(1 for p in problems if "LOST" in p)
    return {"problems": problems, "lost": lost, "duplicates": duplicates, "same_key": same_key,
            "truncated_acks": truncated_acks, "truncated_early": truncated_early, "jobs": sum(len(v) for v in jobs.values())}


class Context:
    pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="about 2-3 minutes (the default)")
    mode.add_argument("--long", action="store_true", help="20+ minutes, files up to 64 MiB")
    parser.add_argument("--duration", type=float, help="the crash loop's length in seconds")
    parser.add_argument("--small-files", type=int, metavar="N",
                        help="the crash loop drops N files of 0-64 KiB as fast as ferryd takes them, then ends "
                             "(e.g. --small-files 20000 --bin .build/release)")
    parser.add_argument("--bin", default=os.environ.get("FERRY_BIN", os.path.join(ROOT, ".build", "debug")),
                        help="the directory holding ferryd, ferryctl and ferry-receiver")
    parser.add_argument("--seed", type=int, default=None, help="replay sizes, kill times and fault draws (default: random, printed)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a test CA (ca_file)")
    parser.add_argument("--no-faults", action="store_true", help="crashes and outages only")
    args = parser.parse_args()
    settings = Settings(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)

    binaries = {name: os.path.join(args.bin, name) for name in ("ferryd", "ferryctl", "ferry-receiver")}
    for name, path in binaries.items():
        if not os.access(path, os.X_OK):
            print(f"torture: {path} is not built (swift build, or --bin DIR)", file=sys.stderr)
            return 2

    ctx = Context()
    ctx.settings, ctx.rng, ctx.failures = settings, random.Random(seed), []
    ctx.kills = ctx.outages = 0
    ctx.work = Work(args.keep)
    # Run private copies: a rebuild of .build during a long run must not swap the binaries under it.
    private = os.path.join(ctx.work.path, "bin")
    os.makedirs(private)
    for name, path in list(binaries.items()):
        binaries[name] = shutil.copy2(path, os.path.join(private, name))
    ctx.ferryctl = binaries["ferryctl"]
    started = time.time()
    log(f"torture {'long' if args.long else 'quick'}: seed {seed}, work {ctx.work.path}, binaries {args.bin}")
    faults = [] if args.no_faults else (small_file_faults(FAULTS) if settings.small_files else FAULTS)
    ctx.receiver = ctx.daemon = ctx.sampler = None
    result = None
    try:
        tls = make_tls(ctx.work) if args.tls else None
        ctx.receiver = ReceiverProcess(binaries["ferry-receiver"], ctx.work, faults, seed, tls)
        ctx.receiver.start()
        write_config(ctx.work, settings, ctx.receiver.url, tls and tls["ca"])
        check = subprocess.run([binaries["ferryd"], "check-config", "--config", ctx.work.config], capture_output=True, text=True)
        if check.returncode != 0:
            raise RunBroken(f"check-config failed: {check.stderr}")
        ctx.ledger = Ledger(ctx.work)
        ctx.daemon = Daemon(binaries["ferryd"], ctx.work)
        ctx.daemon.start()
        ctx.daemon.wait_ready()
        ctx.sampler = Sampler(ctx.work, ctx.ledger, 0.25)
        ctx.sampler.start()

        phase_crash_loop(ctx)
        phase_outage(ctx)
        phase_sigterm(ctx)
        phase_independent_parser(ctx)

        ctx.sampler.stop_event.set()
        ctx.sampler.join()
        ctx.sampler.sample()
        ctx.daemon.terminate()
        result = oracle(ctx)
    except RunBroken as error:
        log(f"RUN BROKEN: {error}")
        log(f"ferryd log tail:\n{tail(ctx.work.ferryd_log)}")
        return 2
    finally:
        if ctx.sampler:
            ctx.sampler.stop_event.set()
        if ctx.daemon:
            ctx.daemon.kill9()
        if ctx.receiver:
            ctx.receiver.stop()
        if ctx.failures or result is None or result["problems"]:
            ctx.work.keep = True
        ctx.work.cleanup()

    duration = time.time() - started
    problems = result["problems"] + ctx.failures
    ledger = ctx.ledger
    sizes = [size for size, _ in ledger.dropped.values()]
    rows = [
        ("mode", f"{'long' if args.long else 'quick'}{' +tls' if args.tls else ''}, seed {seed}"),
        ("duration", f"{duration:.0f} s (crash loop {settings.duration:.0f} s)"),
        ("ferryd kills (SIGKILL)", str(ctx.kills)),
        ("ferryd starts", str(ctx.daemon.starts)),
        ("receiver outages", f"{ctx.outages} (+ {settings.down_time}s outage phase)"),
        ("SIGTERM exits", ", ".join(f"{t:.1f}s" for t in ctx.sigterm_exits) + f" (limit {settings.shutdown_timeout + settings.shutdown_margin:.0f}s)"),
        ("requests", str(ledger.request_count)),
        ("faults injected", str(sum(ledger.faults.values()))),
    ]
    for kind, count in sorted(ledger.faults.items(), key=lambda item: -item[1]):
        rows.append((f"  {kind}", str(count)))
    rows += [
        ("files", f"{len(sizes)} (0 B to {human_bytes(max(sizes) if sizes else 0)})"),
        ("bytes", f"{sum(sizes)} ({human_bytes(sum(sizes))})"),
        ("jobs", str(result["jobs"])),
        ("lost", str(result["lost"])),
        ("duplicates", f"{result['duplicates']} ({result['same_key']} with the same Idempotency-Key)"),
        ("acknowledged truncated (partial 2xx)", f"{len(result['truncated_acks'])} ({len(result['truncated_early'])} "
                                                 "answered before ferryd had sent the whole body)"),
        ("outage: longest retry gap", f"{ctx.outage_result['worst_gap']:.2f} s (max_delay {settings.max_delay:.0f} s)"),
        ("spool samples", str(ctx.sampler.samples)),
        ("problems", str(len(problems))),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    print(f"{'':-<{width + 30}}")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(f"{'':-<{width + 30}}")
    if problems:
        print(f"\nFAIL: {len(problems)} problems (work directory kept: {ctx.work.path})")
        for problem in problems[:200]:
            print(f"  {problem}")
        if len(problems) > 200:
            print(f"  … and {len(problems) - 200} more")
        return 1
    print("\nOK: every file arrived byte-identical; nothing lost")
    return 0


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _terminated(signum, frame):
    raise SystemExit(128 + signum)   # unwinds through main's finally: processes killed, work directory handled


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
