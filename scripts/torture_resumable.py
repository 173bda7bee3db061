#!/usr/bin/env python3
"""Ferry's resumable-upload torture run: kill -9 at random moments while files go to a real tus
server, or to a server of the IETF draft "Resumable Uploads for HTTP".

It drives the built `ferryd` with one spool of `protocol = "tus"` (tuspyserver 4.4.3 under uvicorn,
Tests/Servers/tus_server.py) or `protocol = "resumable"` (Tests/Servers/resumable_server.py,
interop version 9), on 127.0.0.1:

  1. crash loop  files from 0 B to 16 MiB are written beside the spool and renamed in, continuously,
                 while ferryd (held to 8 MiB/s) is killed with SIGKILL every 0.5-3 s and restarted,
                 so uploads are cut between their creation and its record, mid-append, and between
                 the last append and its record. All along, a sampler checks that every file gone from the spool is
                 already a complete upload on the server.
  2. drain       no more kills: everything queued must arrive.

The oracle, at the end: every file is a complete upload with the file's SHA-256 (and, for tus, its
name in the metadata); every complete upload on the server is one of the files, whole (an append
at a wrong offset would complete an upload with other bytes); nothing is left in the spool nor in
its failed directory (the server makes no faults). Uploads a crash cut between their creation and
its record stay incomplete on the server and are counted, not failed: ferryd never learnt their
URL. Exit status: 0 the oracle holds, 1 it does not (each failure printed), 2 the run broke.

  scripts/torture_resumable.py --quick                       # tus, about 1.5 minutes
  scripts/torture_resumable.py --quick --protocol resumable
Options: --bin DIR (default .build/debug; also $FERRY_BIN), --seed N, --keep, --duration S,
--budget-mib N (the data written over the loop, spread evenly; default 400 MiB). The tus server
needs tuspyserver (scripts/install-deps.sh --test); the draft's server is the standard library only.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from torture_s3 import (  # noqa: E402  (the same driver)
    Daemon, RunBroken, crash_loop, drain, ferryd_binary, log, spool_names, start_writer, tear_down, verdict, work_directories)

MIB = 1 << 20


def file_size(rng):
    """Mostly small files, some of several MiB (long enough to be killed mid-append)."""
    kind = rng.random()
    if kind < 0.10:
        return 0
    if kind < 0.60:
        return rng.randint(1, 200 * 1024)
    if kind < 0.85:
        return rng.randint(200 * 1024, 4 * MIB)
    return rng.randint(4 * MIB, 16 * MIB)


class Server:
    """The protocol's test server, as a child process; `completed()` asks it what it holds whole."""

    def __init__(self, protocol, directory):
        self.protocol = protocol
        script = "tus_server.py" if protocol == "tus" else "resumable_server.py"
        argv = [sys.executable, os.path.join(ROOT, "Tests/Servers", script), "--port", "0"]
        if protocol == "tus":
            argv += ["--files", directory]
        self.log = open(os.path.join(os.path.dirname(directory), "server.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        line = self.proc.stdout.readline().strip()
        try:
            base = json.loads(line)["listening"]
        except (ValueError, KeyError):
            self.stop()
            raise RunBroken(f"the {protocol} server did not start: {line or 'no answer'} (scripts/install-deps.sh --test)")
        # tus: the endpoint is the mount path; the draft's server creates uploads at any path.
        self.endpoint = base + "/" if protocol == "tus" else base + "/upload"
        self.stats_url = base.rsplit("/files", 1)[0] + "/__stats" if protocol == "tus" else base + "/__stats"

    def completed(self):
        """[(name or None, sha256)] of every complete upload, and how many uploads are incomplete."""
        with urllib.request.urlopen(self.stats_url, timeout=60) as answer:
            stats = json.load(answer)
        incomplete = sum(1 for u in stats["uploads"]
                         if not u.get("complete", u.get("size") is not None and u.get("offset") == u.get("size")))
        return [(u.get("name"), u["sha256"]) for u in stats["completed"]], incomplete

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def write_config(path, work, spool, protocol, endpoint):
    lines = [
        f'state_directory = "{work}/state"',
        f'control_socket = "{work}/state/control.sock"',
        'log_level = "info"',
        "max_concurrent_uploads = 4",
        'shutdown_timeout = "5s"',
        # Slow enough that most kills land mid-transfer (on 127.0.0.1 a 16 MiB file takes a blink).
        'bandwidth_limit = "8MiB/s"',
        "",
        "[[spool]]",
        'name = "torture"',
        f'directory = "{spool}"',
        f'url = "{endpoint}"',
        f'protocol = "{protocol}"',
        'settle = "300ms"',
        'after_upload = "delete"',
        "[spool.retry]",
        'initial_delay = "100ms"',
        'max_delay = "2s"',
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("FERRY_BIN", os.path.join(ROOT, ".build/debug")))
    p.add_argument("--protocol", choices=["tus", "resumable"], default="tus")
    p.add_argument("--duration", type=float, default=300.0, help="seconds of the crash loop")
    p.add_argument("--quick", action="store_true", help="a 60-second crash loop")
    p.add_argument("--budget-mib", type=int, default=400,
                   help="MiB written over the crash loop at most, spread evenly (the server keeps every upload)")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    duration = 60.0 if a.quick else a.duration
    binary = ferryd_binary(a.bin, "torture_resumable")
    if not binary:
        return 2
    rng = random.Random(a.seed)
    work, spool, staging = work_directories(f"ferry-torture-{a.protocol}-")
    log(f"seed {a.seed}, protocol {a.protocol}, crash loop {duration:.0f} s, work directory {work}")
    server = daemon = None
    failures = []
    written = {}  # name -> sha256
    lock = threading.Lock()
    stop_writing = threading.Event()
    try:
        server = Server(a.protocol, os.path.join(work, "server"))
        config = os.path.join(work, "ferry.toml")
        write_config(config, work, spool, a.protocol, server.endpoint)
        daemon = Daemon(binary, config, os.path.join(work, "ferryd.log"))
        daemon.start()
        thread = start_writer(spool, staging, a.seed, duration, a.budget_mib, file_size, written, lock, stop_writing)

        def sample():
            with lock:
                known = dict(written)
            present = spool_names(spool)  # before asking the server: a file gone now must be there after
            whole = {digest for _, digest in server.completed()[0]}
            for name in sorted(set(known) - present):
                if known[name] not in whole:
                    failures.append(f"{name} left the spool before the server held it whole")

        # The crash loop, with the sampler between kills.
        kills, samples = crash_loop(daemon, rng, duration, sample, pause=0.3)
        stop_writing.set()
        thread.join()
        log(f"crash loop over: {kills} kills, {len(written)} files written, {samples} samples; draining")

        left = drain(daemon, spool, failures)

        completed, incomplete = server.completed()
        names_by_digest = {}
        for name, digest in written.items():
            names_by_digest.setdefault(digest, set()).add(name)
        whole = {digest for _, digest in completed}
        total = 0
        for name, digest in sorted(written.items()):
            total += int(name.rsplit("-", 1)[1].split(".")[0])
            if name not in left and digest not in whole:
                failures.append(f"{name}: no complete upload with its SHA-256 {digest}")
        for name, digest in completed:
            if digest not in names_by_digest:
                failures.append(f"a complete upload ({name or 'no name'}) is none of the files: SHA-256 {digest}")
            elif a.protocol == "tus" and name not in names_by_digest[digest]:
                failures.append(f"the complete upload named {name} holds the bytes of {sorted(names_by_digest[digest])}")
        log(f"{len(written)} files ({total / MIB:.1f} MiB), {kills} kills; {len(completed)} complete uploads "
            f"({len(completed) - len(written)} more than files), {incomplete} left incomplete on the server")
    except RunBroken as e:
        log(f"the run broke: {e}")
        return 2
    finally:
        stop_writing.set()
        tear_down(daemon, server, work, a.keep or bool(failures))
    return verdict(failures, a.seed, "the oracle holds: every file arrived whole, none left before the server held it, "
                                     "no upload holds other bytes")

if __name__ == "__main__":
    sys.exit(main())
