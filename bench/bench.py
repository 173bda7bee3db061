#!/usr/bin/env python3
"""Ferry's benchmarks: ferryd against curl and Python `requests`, in one run, on one machine.

Every scenario sends to the same loopback receiver (`ferry-receiver --discard`: it parses each
multipart body and throws the bytes away, so the figures measure the clients), repeats its
measurements and reports medians and the ratio Ferry/peer. See docs/PERFORMANCE.md.

  1 large    one file (1 GiB): drop -> fully received wall time, ferryd peak RSS;
             peers `curl -F`, `curl -T`
  2 small    5,000 files of 16 KiB: files/s from first drop to last receipt; peers a `curl -F`
             loop, `xargs -P4 curl`, a Python `requests.Session` loop (keep-alive)
  3 latency  500 files renamed into the spool one at a time: drop -> first body byte at the
             server (a tiny timestamping sink in this process), p50 and p99
  4 scale    100,000 files queued while uploads are paused (server down): ferryd RSS, start-up
             to READY=1 (sd_notify), `ferryctl status` and `list --limit 50` latency; then the
             server comes up and uploads resume: drain rate (--runs times, medians)
  5 memory   ferryd peak RSS for a 10 MiB file and for a 4 GiB sparse file
  6 idle     wake-ups per second (threads put on a CPU, /proc/PID/task/*/schedstat) and CPU of an
             idle ferryd with 1 and with 10 spools; the Go peer of scenario 2 (bench/gopeer, net/http
             with keep-alive, 1 and 4 workers) runs when `go` is installed

  python3 bench/bench.py                 # everything (builds release binaries first, as the Debian
                                         # package does, in .build/packaged; ~15 min)
  python3 bench/bench.py --smoke         # tiny sizes, one run, seconds, no targets
  python3 bench/bench.py --only 2,3      # some scenarios
  python3 bench/bench.py --bin DIR       # use ferryd, ferryctl, ferry-receiver from DIR (no build)
  python3 bench/bench.py --smoke --configuration debug   # CI: the debug build `make test` made

Results: a Markdown report on stdout and, with --out DIR, report.md and results.json there.
Targets (docs/PERFORMANCE.md) are checked and reported, never enforced: the exit status is 0
when every measurement ran, whatever the figures.
"""

import argparse
import asyncio
import json
import os
import platform
import resource
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1024 * 1024

FULL = dict(runs=3, large_mb=1024, small_files=5000, small_kb=16, latency_files=500, scale_files=100_000,
            memory_small_mb=10, memory_big_mb=4096, idle_s=30)
SMOKE = dict(runs=1, large_mb=16, small_files=100, small_kb=16, latency_files=20, scale_files=1000,
             memory_small_mb=10, memory_big_mb=64, idle_s=2)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def median(values):
    return statistics.median(values) if values else float("nan")


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def wait_until(predicate, timeout, interval=0.002, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_empty_spool(directory, timeout, what="the spool to empty"):
    """Waits until `directory` holds no file Ferry would take. Listing a directory costs about 0.5 µs
    of CPU per entry, on the same two cores as ferryd: the next look comes after 25 µs per file
    still there (2.5 s with 100,000 left, 10 ms at most once 400 or fewer are), so the looks take
    about 2 % of a core whatever the spool's size, and the end is still seen within 10 ms."""
    deadline = time.monotonic() + timeout
    while True:
        left = spool_files(directory)
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} ({left} files left)")
        time.sleep(max(0.01, left * 25e-6))


def spool_files(directory):
    """Regular files Ferry would take (not dot-names) directly in `directory`."""
    count = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                count += 1
    return count


def proc_kib(pid, field):
    """VmRSS / VmHWM of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def cpu_seconds(pid):
    """User + system CPU time a process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def io_counters(pid):
    """A process's /proc/PID/io: `syscr`/`syscw` (read and write system calls: read, pread, write,
    pwrite, sendfile...) and `wchar` (bytes handed to them), whatever lands on disk."""
    with open(f"/proc/{pid}/io") as f:
        return {key: int(value) for key, value in (line.split(": ") for line in f)}


def io_per_file(before, after, count):
    """Write calls and KiB written per file between two io_counters readings, for the log."""
    return (f"{(after['syscw'] - before['syscw']) / count:.1f} write calls, "
            f"{(after['wchar'] - before['wchar']) / count / 1024:.1f} KiB written per file")


PEER_CPU = {}   # peer name -> CPU seconds per run (the peer and every process it started)


def machine_busy_seconds():
    """CPU seconds the whole machine spent not idle (all cores, from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]   # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(command, **kwargs):
    """Runs a command; returns (wall seconds, its peak RSS in KiB, exit status)."""
    t0 = time.monotonic()
    process = subprocess.Popen(command, **kwargs)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - t0
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss, process.returncode


# ---------------------------------------------------------------------------------------------
# Processes under test


class Receiver:
    """ferry-receiver --discard on 127.0.0.1."""

    def __init__(self, binary, work, port=0):
        self.directory = os.path.join(work, f"received-{time.monotonic_ns()}")
        os.makedirs(self.directory)
        self.process = subprocess.Popen(
            [binary, "--directory", self.directory, "--discard", "--port", str(port)],
            stdout=subprocess.PIPE, stderr=open(os.path.join(work, "receiver.log"), "ab"), text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"ferry-receiver did not start: {line!r}")
        self.base = line.split()[-1]
        self.url = self.base + "/upload"

    def stop(self):
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Ferryd:
    """One ferryd with a fresh state directory and one spool, started with NOTIFY_SOCKET so that its
    READY=1 is seen the moment it is sent."""

    def __init__(self, bins, work, name, url, extra="", spools=1):
        self.bins = bins
        self.home = os.path.join(work, name)
        self.spool = os.path.join(self.home, "spool")
        self.state = os.path.join(self.home, "state")
        self.socket_path = os.path.join(self.home, "control.sock")
        self.config = os.path.join(self.home, "ferry.toml")
        self.log_path = os.path.join(self.home, "ferryd.log")
        os.makedirs(self.spool, exist_ok=True)
        with open(self.config, "w") as f:
            f.write(f'state_directory = "{self.state}"\ncontrol_socket = "{self.socket_path}"\nlog_level = "info"\n{extra}\n'
                    f'[[spool]]\nname = "bench"\ndirectory = "{self.spool}"\nurl = "{url}"\n')
            for number in range(2, spools + 1):
                directory = os.path.join(self.home, f"spool{number}")
                os.makedirs(directory, exist_ok=True)
                f.write(f'[[spool]]\nname = "bench{number}"\ndirectory = "{directory}"\nurl = "{url}"\n')
        self.process = None

    def start(self, timeout=120):
        """Starts ferryd; returns seconds from exec to READY=1."""
        notify_path = os.path.join(self.home, "notify.sock")
        if os.path.exists(notify_path):
            os.unlink(notify_path)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        t0 = time.monotonic()
        self.process = subprocess.Popen([os.path.join(self.bins, "ferryd"), "--config", self.config],
                                        stdout=subprocess.DEVNULL, stderr=open(self.log_path, "ab"), env=env)
        notify.settimeout(0.1)
        deadline = t0 + timeout
        try:
            while True:
                try:
                    message = notify.recv(4096).decode(errors="replace")
                except socket.timeout:
                    if self.process.poll() is not None:
                        raise RuntimeError(f"ferryd exited with {self.process.returncode}; see {self.log_path}")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"ferryd not READY after {timeout}s; see {self.log_path}")
                    continue
                if "READY=1" in message.split("\n"):
                    return time.monotonic() - t0
        finally:
            notify.close()

    @property
    def pid(self):
        return self.process.pid

    def hwm_mib(self):
        return proc_kib(self.pid, "VmHWM") / 1024

    def rss_mib(self):
        return proc_kib(self.pid, "VmRSS") / 1024

    def ctl(self, *args):
        result = subprocess.run([os.path.join(self.bins, "ferryctl"), "--socket", self.socket_path, *args],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"ferryctl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    def counts(self):
        status = json.loads(self.ctl("status", "--json"))
        return status["spools"][0]["counts"]

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def failed_files(self):
        failed = os.path.join(self.spool, ".failed")
        return os.listdir(failed) if os.path.isdir(failed) else []


# ---------------------------------------------------------------------------------------------
# A sink that timestamps the first body byte of each request (scenario 3)


class TimestampSink:
    """A minimal HTTP/1.1 server on 127.0.0.1 in a thread of this process: for each request it notes
    time.monotonic() when the first body byte is read, reads Content-Length bytes and answers 201."""

    def __init__(self):
        self.first_byte = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait()
        self.url = f"http://127.0.0.1:{self.port}/upload"

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer):
        buffered = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffered:
                    data = await reader.read(65536)
                    if not data:
                        return
                    at = time.monotonic()
                    buffered += data
                head, _, rest = buffered.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if length and not rest:
                    rest = await reader.read(65536)
                    at = time.monotonic()
                self.first_byte.append(at)
                while len(rest) < length:
                    data = await reader.read(65536)
                    if not data:
                        return
                    rest += data
                buffered = rest[length:]
                body = b'{"ok":true}'
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        finally:
            writer.close()

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


# ---------------------------------------------------------------------------------------------
# The peers

PYTHON_PEER = r"""
import os, sys, time, requests
url, listing = sys.argv[1], sys.argv[2]
paths = open(listing).read().split("\n")[:-1]
session = requests.Session()
t0 = time.monotonic()
for path in paths:
    with open(path, "rb") as f:
        r = session.post(url, files={"file": (os.path.basename(path), f)})
    if r.status_code // 100 != 2:
        sys.exit(f"{path}: {r.status_code}")
print(time.monotonic() - t0)
"""


def write_listing(work, paths):
    listing = os.path.join(work, "files.txt")
    with open(listing, "w") as f:
        f.write("".join(p + "\n" for p in paths))
    return listing


def peer_curl_loop(url, listing):
    script = 'while IFS= read -r f; do curl -sS -o /dev/null --fail -F "file=@$f" "$1" || exit 1; done < "$2"'
    elapsed, _, rc = run_measured(["bash", "-c", script, "_", url, listing])
    if rc:
        raise RuntimeError("curl -F loop failed")
    return elapsed


def peer_xargs(url, listing):
    with open(listing) as stdin:
        elapsed, _, rc = run_measured(["xargs", "-d", "\n", "-P4", "-I{}", "curl", "-sS", "-o", "/dev/null", "--fail",
                                       "-F", "file=@{}", url], stdin=stdin)
    if rc:
        raise RuntimeError("xargs curl failed")
    return elapsed


def go_peer(work):
    """Builds bench/gopeer (Go's net/http client, keep-alive) once; None without a Go toolchain."""
    go = shutil.which("go")
    if not go:
        return None
    binary = os.path.join(work, "gopeer")
    if not os.path.exists(binary):
        subprocess.run([go, "build", "-o", binary, "."], cwd=os.path.join(ROOT, "bench", "gopeer"), check=True,
                       env=dict(os.environ, GOCACHE=os.path.join(work, "gocache"), GOFLAGS="-mod=mod"))
    return binary


def peer_go(binary, workers):
    def run(url, listing):
        result = subprocess.run([binary, "-url", url, "-workers", str(workers), listing], capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"go peer failed: {result.stderr.strip()}")
        return float(result.stdout.strip())
    return run


def peer_python(url, listing):
    result = subprocess.run([sys.executable, "-c", PYTHON_PEER, url, listing], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"python requests peer failed: {result.stderr.strip()}")
    return float(result.stdout.strip())


# ---------------------------------------------------------------------------------------------
# Scenarios


class Bench:
    def __init__(self, args, sizes, bins):
        self.args = args
        self.sizes = sizes
        self.bins = bins
        self.work = tempfile.mkdtemp(prefix="ferry-bench.", dir=args.work_dir)
        self.results = {}
        self.instance = 0
        self.small_hwm = []
        self.small_cpu = {}
        self.processes = []   # every ferryd and receiver started, stopped at the end whatever happened

    def ferryd(self, url, extra="", spools=1):
        self.instance += 1
        daemon = Ferryd(self.bins, self.work, f"ferryd{self.instance}", url, extra or self.args.ferryd_config, spools)
        self.processes.append(daemon)
        return daemon

    def receiver(self, port=0):
        receiver = Receiver(os.path.join(self.bins, "ferry-receiver"), self.work, port)
        self.processes.append(receiver)
        return receiver

    def stop_all(self):
        for process in self.processes:
            try:
                process.stop()
            except Exception as error:  # keep stopping the others
                log(f"bench: stopping {process}: {error}")

    def profiler(self, daemon, label):
        """With --profile DIR: `perf record -g` of this ferryd until the returned function is called;
        with --strace DIR: `strace -f -c` (system calls by count and time) instead."""
        if self.args.strace:
            os.makedirs(self.args.strace, exist_ok=True)
            output = os.path.join(self.args.strace, f"{label}.strace.txt")
            tracer = subprocess.Popen(["strace", "-f", "-c", "-o", output, "-p", str(daemon.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_until(lambda: os.path.exists(f"/proc/{daemon.pid}/status") and
                       any(line.startswith("TracerPid:") and line.split()[1] != "0"
                           for line in open(f"/proc/{daemon.pid}/status")), 10, 0.01, "strace to attach")

            def stop_trace():
                tracer.send_signal(signal.SIGINT)
                tracer.wait(60)
                log(f"   system calls: {output}")
            return stop_trace
        if not self.args.profile:
            return lambda: None
        os.makedirs(self.args.profile, exist_ok=True)
        output = os.path.join(self.args.profile, f"{label}.perf.data")
        perf = subprocess.Popen(["perf", "record", "-F", "1999", *os.environ.get("FERRY_PERF_CALLGRAPH", "-g").split(), "-o", output, "-p", str(daemon.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

        def stop():
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
            log(f"   profile: perf report -i {output}")
        return stop

    def cleanup_instance(self, daemon):
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)

    # 1 ---------------------------------------------------------------------------------------
    def large(self):
        size_mb, runs = self.sizes["large_mb"], self.sizes["runs"]
        log(f"== 1 large: one {size_mb} MiB file, {runs} run(s)")
        master = os.path.join(self.work, "large.bin")
        block = os.urandom(MiB)
        with open(master, "wb") as f:
            for _ in range(size_mb):
                f.write(block)
        receiver = self.receiver()
        rows = {"ferryd": [], "curl -F": [], "curl -T": []}
        try:
            for run in range(runs):
                t, rss, rc = run_measured(["curl", "-sS", "-o", "/dev/null", "--fail", "-F", f"file=@{master}", receiver.url])
                assert rc == 0, "curl -F failed"
                rows["curl -F"].append((t, rss / 1024))
                t, rss, rc = run_measured(["curl", "-sS", "-o", "/dev/null", "--fail", "-T", master, receiver.base + "/put/large.bin"])
                assert rc == 0, "curl -T failed"
                rows["curl -T"].append((t, rss / 1024))
                daemon = self.ferryd(receiver.url)
                daemon.start()
                staged = os.path.join(daemon.spool, ".large.bin")
                dropped = os.path.join(daemon.spool, "large.bin")
                os.link(master, staged)   # the producer's copy is not timed; a hard link costs nothing
                stop_profile = self.profiler(daemon, f"large-{run + 1}")
                t0 = time.monotonic()
                os.rename(staged, dropped)
                wait_until(lambda: not os.path.lexists(dropped), 600, 0.001, "the large file to leave the spool")
                t = time.monotonic() - t0
                stop_profile()
                hwm = daemon.hwm_mib()
                failed = daemon.failed_files()
                self.cleanup_instance(daemon)
                if failed:
                    raise RuntimeError(f"ferryd failed the large file: {failed}")
                rows["ferryd"].append((t, hwm))
                log(f"   run {run + 1}: ferryd {t:.3f}s {hwm:.1f} MiB; curl -F {rows['curl -F'][-1][0]:.3f}s; "
                    f"curl -T {rows['curl -T'][-1][0]:.3f}s")
        finally:
            receiver.stop()
            os.unlink(master)
        result = {name: {"wall_s": median([r[0] for r in rs]), "peak_rss_mib": median([r[1] for r in rs]),
                         "runs": [r[0] for r in rs]} for name, rs in rows.items()}
        self.results["large"] = {"size_mib": size_mb, "runs": runs, "clients": result}

    # 2 ---------------------------------------------------------------------------------------
    def small_files(self, directory, count, kib):
        os.makedirs(directory)
        paths = []
        for i in range(count):
            path = os.path.join(directory, f"f{i:06d}.bin")
            with open(path, "wb") as f:
                f.write(os.urandom(kib * 1024))
            paths.append(path)
        return paths

    def small(self):
        count, kib, runs = self.sizes["small_files"], self.sizes["small_kb"], self.sizes["runs"]
        log(f"== 2 small: {count} files of {kib} KiB, {runs} run(s)")
        paths = self.small_files(os.path.join(self.work, "small"), count, kib)
        listing = write_listing(self.work, paths)
        receiver = self.receiver()
        peers = {"curl -F loop": peer_curl_loop, "xargs -P4 curl": peer_xargs, "python requests.Session": peer_python}
        gopeer = None if self.args.skip_peers else go_peer(self.work)
        if gopeer:
            peers["go net/http, 1 worker"] = peer_go(gopeer, 1)
            peers["go net/http, 4 workers"] = peer_go(gopeer, 4)
        elif not self.args.skip_peers:
            log("   no Go toolchain (scripts/install-deps.sh --bench installs golang-go): the Go peer is not measured")
        # ferryd as installed (the default upload slots), and with more slots: how much of the rate is the
        # latency of each upload's chain (claim, body, request, commits) rather than CPU.
        variants = {"ferryd": "", "ferryd, 16 upload slots": "max_concurrent_uploads = 16"}
        rows = {**{name: [] for name in variants}, **{name: [] for name in peers}}
        try:
            for run in range(runs):
                for name, peer in peers.items():
                    if not self.args.skip_peers:
                        cpu0 = children_cpu()   # the peer's processes are this process's waited-for children
                        rows[name].append(count / peer(receiver.url, listing))
                        PEER_CPU.setdefault(name, []).append((children_cpu() - cpu0) / count * 1000)
                for variant, extra in variants.items():
                    rows[variant].append(self.small_ferryd(receiver, paths, extra, f"small-{run + 1}" + ("-16" if extra else "")))
                log(f"   run {run + 1}: " + ", ".join(f"{n} {v[-1]:.0f}/s" for n, v in rows.items() if v))
        finally:
            receiver.stop()
            shutil.rmtree(os.path.join(self.work, "small"), ignore_errors=True)
        result = {name: {"files_per_s": median(v), "runs": v} for name, v in rows.items() if v}
        self.results["small"] = {"files": count, "kib": kib, "runs": runs, "clients": result,
                                 "ferryd_peak_rss_mib": max(self.small_hwm),
                                 "ferryd_cpu_ms_per_file": median(self.small_cpu.get("default", [])),
                                 "peer_cpu_ms_per_file": {name: median(v) for name, v in PEER_CPU.items()}}

    def small_ferryd(self, receiver, paths, extra, label):
        """One ferryd run of scenario 2: files per second from the first rename to an empty spool."""
        daemon = self.ferryd(receiver.url, extra)
        try:
            daemon.start()
            staging = os.path.join(daemon.spool, ".staging")
            os.mkdir(staging)
            for path in paths:
                os.link(path, os.path.join(staging, os.path.basename(path)))
            stop_profile = self.profiler(daemon, label)
            cpu0, receiver0, busy0 = cpu_seconds(daemon.pid), cpu_seconds(receiver.process.pid), machine_busy_seconds()
            io0 = io_counters(daemon.pid)
            t0 = time.monotonic()
            for path in paths:
                name = os.path.basename(path)
                os.rename(os.path.join(staging, name), os.path.join(daemon.spool, name))
            wait_for_empty_spool(daemon.spool, 600)
            t = time.monotonic() - t0
            cpu = (cpu_seconds(daemon.pid) - cpu0) / len(paths) * 1000
            self.small_cpu.setdefault(label.split("-")[-1] if extra else "default", []).append(cpu)
            log(f"   {label}: {len(paths) / t:.0f} files/s; CPU per file: ferryd {cpu:.2f} ms, receiver "
                f"{(cpu_seconds(receiver.process.pid) - receiver0) / len(paths) * 1000:.2f} ms; machine "
                f"{(machine_busy_seconds() - busy0) / t / os.cpu_count() * 100:.0f} % busy; "
                f"{io_per_file(io0, io_counters(daemon.pid), len(paths))}")
            stop_profile()
            self.small_hwm.append(daemon.hwm_mib())
            failed = daemon.failed_files()
        finally:
            self.cleanup_instance(daemon)
        if failed:
            raise RuntimeError(f"ferryd failed {len(failed)} small files")
        return len(paths) / t

    # 3 ---------------------------------------------------------------------------------------
    def latency(self):
        count = self.sizes["latency_files"]
        log(f"== 3 latency: {count} files, one at a time")
        sink = TimestampSink()
        daemon = self.ferryd(sink.url)
        first_byte, delivered = [], []
        try:
            daemon.start()
            content = os.urandom(16 * 1024)
            for i in range(count):
                staged = os.path.join(daemon.spool, f".l{i}")
                dropped = os.path.join(daemon.spool, f"l{i:04d}.bin")
                with open(staged, "wb") as f:
                    f.write(content)
                time.sleep(0.02 + random.random() * 0.01)   # the daemon is idle when each file arrives
                before = len(sink.first_byte)
                t0 = time.monotonic()
                os.rename(staged, dropped)
                wait_until(lambda: not os.path.lexists(dropped), 60, 0.0005, "a file to leave the spool")
                delivered.append(time.monotonic() - t0)
                wait_until(lambda: len(sink.first_byte) > before, 10, 0.0005, "the sink to see the request")
                first_byte.append(sink.first_byte[before] - t0)
            failed = daemon.failed_files()
            if failed:
                raise RuntimeError(f"ferryd failed {len(failed)} latency files")
        finally:
            self.cleanup_instance(daemon)
            sink.stop()
        ms = [x * 1000 for x in first_byte]
        dms = [x * 1000 for x in delivered]
        self.results["latency"] = {
            "files": count,
            "first_byte_ms": {"p50": percentile(ms, 50), "p90": percentile(ms, 90), "p99": percentile(ms, 99), "max": max(ms)},
            "delivered_ms": {"p50": percentile(dms, 50), "p99": percentile(dms, 99), "max": max(dms)},
        }
        log(f"   first body byte p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms")

    # 4 ---------------------------------------------------------------------------------------
    def scale(self):
        """Scenario 4, `runs` times (each with a ferryd of its own and a backlog written anew): the
        medians of the times and rates, the largest of the memory figures, and every run's drain."""
        count, kib, runs = self.sizes["scale_files"], self.sizes["small_kb"], self.sizes["runs"]
        log(f"== 4 scale: {count} queued files of {kib} KiB, {runs} run(s)")
        each = [self.scale_once(count, kib, f"drain-{run + 1}" if runs > 1 else "drain") for run in range(runs)]
        r = {"files": count, "runs": runs, "drain_runs": [x["drain_files_per_s"] for x in each]}
        for key in each[0]:
            values = [x[key] for x in each]
            if isinstance(values[0], dict):
                r[key] = {k: median([v[k] for v in values]) for k in values[0]}
            elif "mib" in key:
                r[key] = max(values)
            elif key != "files":
                r[key] = median(values)
        if runs > 1:
            log(f"   drains: " + ", ".join(f"{v:.0f}" for v in r["drain_runs"]) + f" files/s; median {r['drain_files_per_s']:.0f}")
        self.results["scale"] = r

    def scale_once(self, count, kib, label):
        port = free_port()
        daemon = self.ferryd(f"http://127.0.0.1:{port}/upload")
        receiver = None
        r = {"files": count}
        try:
            daemon.start()
            daemon.ctl("pause")
            staging = os.path.join(daemon.spool, ".staging")
            os.mkdir(staging)
            content = os.urandom(kib * 1024)
            names = [f"s{i:07d}.bin" for i in range(count)]
            for name in names:
                with open(os.path.join(staging, name), "wb") as f:
                    f.write(content)
            # A backlog that built up while the server was down is on disk: without this, the kernel
            # writes the 1.6 GB back during the intake and the drain (its 30 s dirty expiry), and
            # ferryd's commits wait behind it.
            os.sync()
            t0 = time.monotonic()
            for name in names:
                os.rename(os.path.join(staging, name), os.path.join(daemon.spool, name))
            wait_until(lambda: daemon.counts().get("queued", 0) == count, 1800, 0.25, f"{count} jobs queued")
            r["intake_s"] = time.monotonic() - t0
            r["rss_queued_mib"] = daemon.rss_mib()
            r["hwm_intake_mib"] = daemon.hwm_mib()
            log(f"   queued in {r['intake_s']:.1f}s; RSS {r['rss_queued_mib']:.1f} MiB (peak {r['hwm_intake_mib']:.1f})")
            daemon.stop()
            r["ready_s"] = daemon.start()
            r["rss_ready_mib"] = daemon.rss_mib()
            status, listing = [], []
            for _ in range(20):
                t = time.monotonic(); daemon.ctl("status"); status.append(time.monotonic() - t)
                t = time.monotonic(); daemon.ctl("list", "--limit", "50"); listing.append(time.monotonic() - t)
            r["status_ms"] = {"p50": median(status) * 1000, "max": max(status) * 1000}
            r["list_ms"] = {"p50": median(listing) * 1000, "max": max(listing) * 1000}
            r["rss_restarted_mib"] = daemon.rss_mib()
            r["hwm_restarted_mib"] = daemon.hwm_mib()
            log(f"   READY {r['ready_s']:.2f}s; status {r['status_ms']['p50']:.1f} ms; list {r['list_ms']['p50']:.1f} ms; "
                f"RSS {r['rss_restarted_mib']:.1f} MiB")
            receiver = self.receiver(port)
            stop_profile = self.profiler(daemon, label)
            cpu0, receiver0, busy0 = cpu_seconds(daemon.pid), cpu_seconds(receiver.process.pid), machine_busy_seconds()
            io0 = io_counters(daemon.pid)
            t0 = time.monotonic()
            daemon.ctl("resume")
            wait_for_empty_spool(daemon.spool, 3600, "the spool to drain")
            r["drain_s"] = time.monotonic() - t0
            r["drain_cpu_ms_per_file"] = (cpu_seconds(daemon.pid) - cpu0) / count * 1000
            r["drain_receiver_cpu_ms_per_file"] = (cpu_seconds(receiver.process.pid) - receiver0) / count * 1000
            r["drain_machine_busy"] = (machine_busy_seconds() - busy0) / r["drain_s"] / os.cpu_count()
            drain_io = io_per_file(io0, io_counters(daemon.pid), count)
            stop_profile()
            r["drain_files_per_s"] = count / r["drain_s"]
            r["hwm_drain_mib"] = daemon.hwm_mib()
            failed = daemon.failed_files()
            if failed:
                raise RuntimeError(f"ferryd failed {len(failed)} files while draining")
            log(f"   drained at {r['drain_files_per_s']:.0f} files/s; peak RSS {r['hwm_drain_mib']:.1f} MiB; CPU per file: "
                f"ferryd {r['drain_cpu_ms_per_file']:.2f} ms, receiver {r['drain_receiver_cpu_ms_per_file']:.2f} ms; "
                f"machine {r['drain_machine_busy'] * 100:.0f} % busy; {drain_io}")
        finally:
            self.cleanup_instance(daemon)
            if receiver:
                receiver.stop()
        return r

    # 5 ---------------------------------------------------------------------------------------
    def memory(self):
        small_mb, big_mb = self.sizes["memory_small_mb"], self.sizes["memory_big_mb"]
        log(f"== 5 memory: ferryd peak RSS, {small_mb} MiB file vs {big_mb} MiB sparse file")
        receiver = self.receiver()
        r = {}
        try:
            for label, size in (("small", small_mb), ("big", big_mb)):
                daemon = self.ferryd(receiver.url)
                daemon.start()
                staged = os.path.join(daemon.spool, ".m.bin")
                with open(staged, "wb") as f:
                    f.truncate(size * MiB)
                dropped = os.path.join(daemon.spool, "m.bin")
                idle = daemon.rss_mib()
                t0 = time.monotonic()
                os.rename(staged, dropped)
                wait_until(lambda: not os.path.lexists(dropped), 1800, 0.005, "the file to leave the spool")
                t = time.monotonic() - t0
                hwm = daemon.hwm_mib()
                failed = daemon.failed_files()
                self.cleanup_instance(daemon)
                if failed:
                    raise RuntimeError("ferryd failed the memory-test file")
                r[label] = {"size_mib": size, "idle_rss_mib": idle, "peak_rss_mib": hwm, "wall_s": t}
                log(f"   {size} MiB: peak {hwm:.1f} MiB (idle {idle:.1f}), {t:.2f}s")
        finally:
            receiver.stop()
        r["difference_mib"] = r["big"]["peak_rss_mib"] - r["small"]["peak_rss_mib"]
        self.results["memory"] = r


    # 6 ---------------------------------------------------------------------------------------
    def idle(self):
        seconds = self.sizes["idle_s"]
        log(f"== 6 idle: wake-ups per second of an idle ferryd, 1 and 10 spools, over {seconds}s")
        r = {"seconds": seconds}
        for spools in (1, 10):
            daemon = self.ferryd("http://127.0.0.1:9/unused", spools=spools)
            try:
                daemon.start()
                # Let start-up's aftermath end: libdispatch's worker threads that ran it exit after
                # 5 s without work, and each exit is a wake-up that is not periodic.
                time.sleep(6)
                counts = WakeupCounter(daemon.pid)
                cpu0 = cpu_seconds(daemon.pid)
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    time.sleep(0.2)
                    counts.sample()
                cpu1 = cpu_seconds(daemon.pid)
                woken = counts.total()
            finally:
                self.cleanup_instance(daemon)
            r[str(spools)] = {"wakeups_per_s": woken / seconds, "cpu_ms_per_s": (cpu1 - cpu0) * 1000 / seconds}
            log(f"   {spools} spool(s): {r[str(spools)]['wakeups_per_s']:.1f} wake-ups/s, "
                f"{r[str(spools)]['cpu_ms_per_s']:.2f} ms CPU/s")
        self.results["idle"] = r


class WakeupCounter:
    """How many times the threads of a process are put on a CPU (the third field of each thread's
    /proc/PID/task/TID/schedstat), counted from the first sample; sampled often, so that a thread
    which ends between samples loses little, and a thread started meanwhile counts in full."""

    def __init__(self, pid):
        self.pid = pid
        self.first = {}
        self.last = {}
        self.sample(initial=True)

    def sample(self, initial=False):
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                    count = int(f.read().split()[2])
            except (OSError, IndexError, ValueError):
                continue   # a thread that ended meanwhile
            self.first.setdefault(tid, count if initial else 0)
            self.last[tid] = count

    def total(self):
        return sum(self.last[tid] - self.first[tid] for tid in self.last)


# ---------------------------------------------------------------------------------------------
# Report


def targets(results):
    """(target, measured, met) for each target whose scenario ran."""
    out = []
    s = results.get("small")
    if s and "python requests.Session" in s["clients"]:
        f, p = s["clients"]["ferryd"]["files_per_s"], s["clients"]["python requests.Session"]["files_per_s"]
        out.append(("2: files/s ≥ 1.5 × Python requests.Session", f"{f / p:.2f} ×", f >= 1.5 * p))
    lg = results.get("large")
    if lg:
        c = lg["clients"]
        ratio = c["ferryd"]["wall_s"] / c["curl -F"]["wall_s"]
        out.append(("1: wall time ≤ 2.5 × curl -F", f"{ratio:.2f} ×", ratio <= 2.5))
        out.append(("1: ferryd peak RSS ≤ 48 MiB", f"{c['ferryd']['peak_rss_mib']:.1f} MiB", c["ferryd"]["peak_rss_mib"] <= 48))
    la = results.get("latency")
    if la:
        out.append(("3: first body byte p50 ≤ 15 ms", f"{la['first_byte_ms']['p50']:.1f} ms", la["first_byte_ms"]["p50"] <= 15))
        out.append(("3: first body byte p99 ≤ 50 ms", f"{la['first_byte_ms']['p99']:.1f} ms", la["first_byte_ms"]["p99"] <= 50))
    sc = results.get("scale")
    if sc:
        rss = max(sc["rss_queued_mib"], sc["rss_restarted_mib"])
        out.append((f"4: RSS with {sc['files']:,} queued ≤ 96 MiB", f"{rss:.1f} MiB", rss <= 96))
        out.append(("4: start-up to READY ≤ 2 s", f"{sc['ready_s']:.2f} s", sc["ready_s"] <= 2))
        out.append(("4: `ferryctl status` ≤ 50 ms", f"{sc['status_ms']['p50']:.1f} ms", sc["status_ms"]["p50"] <= 50))
        if s:
            f = s["clients"]["ferryd"]["files_per_s"]
            out.append(("4: drain rate ≥ scenario 2's rate", f"{sc['drain_files_per_s']:.0f} vs {f:.0f} files/s",
                        sc["drain_files_per_s"] >= f))
    m = results.get("memory")
    if m:
        out.append(("5: peak RSS difference < 16 MiB", f"{m['difference_mib']:.1f} MiB", m["difference_mib"] < 16))
    if s and "go net/http, 4 workers" in s["clients"]:
        f, g = s["clients"]["ferryd"]["files_per_s"], s["clients"]["go net/http, 4 workers"]["files_per_s"]
        out.append(("2 (stretch): files/s ≥ ½ × Go net/http, 4 workers", f"{f / g:.2f} ×", f >= 0.5 * g))
    if s and s.get("ferryd_cpu_ms_per_file") is not None:
        cpu = s["ferryd_cpu_ms_per_file"]
        out.append(("2: ferryd CPU per file ≤ 0.8 ms", f"{cpu:.2f} ms", cpu <= 0.8))
    i = results.get("idle")
    if i:
        out.append(("6: idle, 10 spools: ≤ 1 wake-up/s", f"{i['10']['wakeups_per_s']:.1f} /s", i["10"]["wakeups_per_s"] <= 1))
    return out


def report(results, meta):
    lines = [f"Ferry benchmark, {meta['date']} — {meta['mode']}", "",
             f"Machine: {meta['cpus']} CPUs ({meta['cpu']}), Linux {meta['kernel']}, {meta['memory_gib']:.0f} GiB; "
             f"fsync of a 4 KiB write in the work directory: {meta['fsync_ms']:.2f} ms (median of 50). "
             f"Load average at start: {meta['loadavg']}.", ""]
    if meta.get("disturbed"):
        lines += [f"**Not valid for comparison:** {meta['disturbed']}", ""]
    lg = results.get("large")
    if lg:
        c = lg["clients"]
        lines += [f"### 1. One {lg['size_mib']} MiB file (median of {lg['runs']})", "",
                  "| client | wall s | peak RSS MiB | Ferry/peer (time) |", "| --- | ---: | ---: | ---: |"]
        for name, v in c.items():
            lines.append(f"| {name} | {v['wall_s']:.3f} | {v['peak_rss_mib']:.1f} | {c['ferryd']['wall_s'] / v['wall_s']:.2f} |")
        lines.append("")
    s = results.get("small")
    if s:
        c = s["clients"]
        lines += [f"### 2. {s['files']:,} files of {s['kib']} KiB (median of {s['runs']})", "",
                  "| client | files/s | Ferry/peer (rate) |", "| --- | ---: | ---: |"]
        for name, v in c.items():
            lines.append(f"| {name} | {v['files_per_s']:.0f} | {c['ferryd']['files_per_s'] / v['files_per_s']:.2f} |")
        cpu = ", ".join(f"{name} {v:.2f}" for name, v in s.get("peer_cpu_ms_per_file", {}).items())
        lines += ["", f"ferryd (default slots): peak RSS {s['ferryd_peak_rss_mib']:.1f} MiB; CPU {s['ferryd_cpu_ms_per_file']:.2f} ms per file "
                  f"(user + system, median). The peers' CPU per file: {cpu or 'not measured'}.", ""]
    la = results.get("latency")
    if la:
        fb, dl = la["first_byte_ms"], la["delivered_ms"]
        lines += [f"### 3. Latency, {la['files']} files one at a time", "",
                  "| from the rename into the spool to | p50 ms | p99 ms | max ms |", "| --- | ---: | ---: | ---: |",
                  f"| the first body byte at the server | {fb['p50']:.1f} | {fb['p99']:.1f} | {fb['max']:.1f} |",
                  f"| the file gone from the spool (2xx committed) | {dl['p50']:.1f} | {dl['p99']:.1f} | {dl['max']:.1f} |", ""]
    sc = results.get("scale")
    if sc:
        lines += [f"### 4. Scale: {sc['files']:,} queued files", "",
                  f"Medians of {sc.get('runs', 1)} run(s), each with a ferryd and a backlog of its own; memory: the largest.", "",
                  "| measurement | value |", "| --- | ---: |",
                  f"| intake (renamed in → all queued) | {sc['intake_s']:.1f} s ({sc['files'] / sc['intake_s']:.0f} files/s) |",
                  f"| ferryd RSS with all queued (peak during intake) | {sc['rss_queued_mib']:.1f} MiB ({sc['hwm_intake_mib']:.1f}) |",
                  f"| restart: exec → READY=1 | {sc['ready_s']:.2f} s |",
                  f"| ferryd RSS after the restart, after 40 ferryctl calls | {sc['rss_restarted_mib']:.1f} MiB |",
                  f"| `ferryctl status` (median / max of 20) | {sc['status_ms']['p50']:.1f} / {sc['status_ms']['max']:.1f} ms |",
                  f"| `ferryctl list --limit 50` (median / max of 20) | {sc['list_ms']['p50']:.1f} / {sc['list_ms']['max']:.1f} ms |",
                  f"| drain (server up, resume → spool empty) | {sc['drain_s']:.1f} s, {sc['drain_files_per_s']:.0f} files/s |",
                  f"| drain, each run (files/s) | {', '.join(f'{v:.0f}' for v in sc.get('drain_runs', []))} |",
                  f"| ferryd peak RSS over the drain | {sc['hwm_drain_mib']:.1f} MiB |", ""]
    m = results.get("memory")
    if m:
        lines += ["### 5. Memory bound", "", "| file | idle RSS MiB | peak RSS MiB | wall s |", "| --- | ---: | ---: | ---: |"]
        for label in ("small", "big"):
            v = m[label]
            kind = "sparse " if label == "big" else ""
            lines.append(f"| {v['size_mib']} MiB {kind}| {v['idle_rss_mib']:.1f} | {v['peak_rss_mib']:.1f} | {v['wall_s']:.2f} |")
        lines += [f"| difference | | {m['difference_mib']:.1f} | |", ""]
    i = results.get("idle")
    if i:
        lines += [f"### 6. Idle (over {i['seconds']} s)", "", "| spools | wake-ups per second | CPU ms per second |",
                  "| ---: | ---: | ---: |"]
        for spools in ("1", "10"):
            lines.append(f"| {spools} | {i[spools]['wakeups_per_s']:.1f} | {i[spools]['cpu_ms_per_s']:.2f} |")
        lines.append("")
    checks = targets(results)
    if meta["mode"].startswith("smoke"):
        lines += ["Targets are not evaluated in smoke mode (tiny sizes, one run).", ""]
    elif checks:
        lines += ["### Targets", "", "| target | measured | met |", "| --- | ---: | :---: |"]
        lines += [f"| {t} | {v} | {'yes' if ok else '**no**'} |" for t, v, ok in checks]
        lines.append("")
    return "\n".join(lines)


def machine(work, mode, disturbed):
    fd = os.open(os.path.join(work, "fsync-probe"), os.O_WRONLY | os.O_CREAT, 0o600)
    samples = []
    for _ in range(50):
        os.write(fd, b"x" * 4096)
        t = time.monotonic()
        os.fsync(fd)
        samples.append(time.monotonic() - t)
    os.close(fd)
    os.unlink(os.path.join(work, "fsync-probe"))
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mode": mode, "cpus": os.cpu_count(), "cpu": cpu,
            "kernel": platform.release(), "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            "fsync_ms": median(samples) * 1000, "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "disturbed": disturbed}


# A release build is measured as the Debian package ships it (scripts/build-deb.sh): the Swift
# runtime linked in and symbols bound at start. Against a plain `swift build -c release` that is
# 9-11 % more files/s in scenario 2, 10 % less CPU per file and 4 MiB less peak RSS (2026-11-26).
# It goes to its own scratch path, so it does not undo a plain release build in .build.
PACKAGED_FLAGS = ["--static-swift-stdlib", "-Xlinker", "-z", "-Xlinker", "now"]
PACKAGED_SCRATCH = os.path.join(ROOT, ".build", "packaged")


def build(scratch, configuration):
    command = ["swift", "build", "-c", configuration]
    if configuration == "release":
        command += PACKAGED_FLAGS
        scratch = scratch or PACKAGED_SCRATCH
    if scratch:
        command += ["--scratch-path", scratch]
    for product in ("ferryd", "ferryctl", "ferry-receiver"):
        log(f"building {product} ({configuration})…")
        subprocess.run(command + ["--product", product], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return subprocess.run(command + ["--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run: checks the harness works (seconds)")
    parser.add_argument("--only", default="1,2,3,4,5,6", help="comma-separated scenario numbers (default: all)")
    parser.add_argument("--runs", type=int, help="repetitions for scenarios 1, 2 and 4 (default 3; 1 with --smoke)")
    parser.add_argument("--bin", help="directory with release ferryd, ferryctl and ferry-receiver (skips the build)")
    parser.add_argument("--scratch-path", help="swift build --scratch-path for the build")
    parser.add_argument("--configuration", default="release", choices=["release", "debug"],
                        help="what to build and measure (default release; debug is for smoke runs, e.g. in CI after the tests)")
    parser.add_argument("--out", help="also write report.md and results.json into this directory")
    parser.add_argument("--work-dir", default=None, help="where temporary spools and state live (default: $TMPDIR)")
    parser.add_argument("--strace", metavar="DIR", help="count ferryd's system calls with `strace -f -c` in scenarios 1 and 2 "
                        "(one summary per run in DIR; slows ferryd: the rates of such a run mean nothing)")
    parser.add_argument("--profile", metavar="DIR", help="record ferryd with `perf record -g` in scenarios 1 and 2 and in the drain of scenario 4 (files in DIR)")
    parser.add_argument("--skip-peers", action="store_true", help="measure ferryd only (for profiling and quick checks)")
    parser.add_argument("--ferryd-config", default="", help="extra top-level ferry.toml lines for every ferryd (default: none)")
    for key in FULL:
        if key != "runs":
            parser.add_argument("--" + key.replace("_", "-"), type=int, help=f"override (default {FULL[key]})")
    args = parser.parse_args()
    # Stopped by SIGINT or SIGTERM (also when started in the background, where SIGINT is ignored):
    # unwind, so every ferryd and receiver is stopped and the work directory removed.
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)

    sizes = dict(SMOKE if args.smoke else FULL)
    for key in sizes:
        value = getattr(args, key, None)
        if value is not None:
            sizes[key] = value
    for tool in ("curl", "xargs"):
        if not shutil.which(tool):
            sys.exit(f"bench needs {tool} (scripts/install-deps.sh --bench)")
    try:
        import requests  # noqa: F401
    except ImportError:
        sys.exit("bench needs Python requests: scripts/install-deps.sh --bench (python3 -m pip install requests)")

    bins = os.path.abspath(args.bin) if args.bin else build(args.scratch_path, args.configuration)
    for name in ("ferryd", "ferryctl", "ferry-receiver"):
        if not os.access(os.path.join(bins, name), os.X_OK):
            sys.exit(f"no {name} in {bins}")
    # A torture run (scripts/torture.py) on the same machine makes the figures meaningless: look for
    # one every few seconds for the whole run, and say so in the report.
    seen = set()
    done = threading.Event()

    def watch_for_torture():
        while not done.is_set():
            seen.update(subprocess.run(["pgrep", "-f", "scripts/torture.py"], capture_output=True, text=True).stdout.split())
            done.wait(3)
    watcher = threading.Thread(target=watch_for_torture, daemon=True)
    watcher.start()
    time.sleep(0.2)
    disturbed = f"scripts/torture.py was running (pid {', '.join(sorted(seen))}) during this run." if seen else None

    bench = Bench(args, sizes, bins)
    meta = machine(bench.work, ("smoke (tiny sizes, no thresholds)" if args.smoke else "full") + f", binaries {bins}", disturbed)
    scenarios = {"1": bench.large, "2": bench.small, "3": bench.latency, "4": bench.scale, "5": bench.memory, "6": bench.idle}
    started = time.monotonic()
    try:
        for key in args.only.split(","):
            scenarios[key.strip()]()
    finally:
        bench.stop_all()
        shutil.rmtree(bench.work, ignore_errors=True)
    meta["duration_s"] = time.monotonic() - started
    done.set()
    watcher.join()
    if seen:
        meta["disturbed"] = f"scripts/torture.py was running (pid {', '.join(sorted(seen))}) during this run."
    text = report(bench.results, meta)
    print(text)
    log(f"bench: done in {meta['duration_s']:.0f}s")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "report.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"meta": meta, "sizes": sizes, "results": bench.results,
                       "targets": [{"target": t, "measured": v, "met": ok} for t, v, ok in targets(bench.results)]}, f, indent=2)


if __name__ == "__main__":
    main()
