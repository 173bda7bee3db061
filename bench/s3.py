#!/usr/bin/env python3
"""Ferry's S3 benchmark: ferryd (`protocol = "s3"`) against `aws s3 cp` (awscli, botocore's
multipart transfer manager: 8 MiB parts, 10 threads) on the same local S3 server, in one run.

  A large   one 1 GiB file: drop -> object complete (ferryd: the file leaves the spool, which
            happens only after the completion's 2xx is committed); `aws s3 cp FILE`; wall time,
            and ferryd's peak RSS (VmHWM) over the run
  B small   1,000 files of 16 KiB: files/s, from the drop to the last one delivered;
            `aws s3 cp --recursive DIR`

  python3 bench/s3.py                       # builds release binaries (as packaged); rclone serve s3; 3 runs
  python3 bench/s3.py --server seaweedfs    # or moto
  python3 bench/s3.py --bin DIR --runs 5    # ferryd and ferryctl from DIR
  python3 bench/s3.py --smoke               # 32 MiB and 100 files, one run
  python3 bench/s3.py --part-concurrency 4  # ferryd writing four parts at once (default: its own, 1)
  python3 bench/s3.py --spool-option 'checksum = "none"'   # any other line for ferryd's spool

The server is started by Tests/Servers/s3_server.py (installed by scripts/install-deps.sh --test);
it runs on the same two cores, so both clients share the machine with it. Medians are reported;
the exit status is 0 when every measurement ran, whatever the figures.
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench import build, free_port, proc_kib, spool_files, wait_until, log  # noqa: E402

AK, SK, BUCKET = "AKIAFERRYBENCH000001", "ferry/bench+secret=key000000000000000000", "bench"


def start_server(kind, work):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "Tests/Servers/s3_server.py"), "serve", "--kind", kind, "--port", str(port),
         "--dir", os.path.join(work, "server"), "--access-key", AK, "--secret-key", SK, "--bucket", BUCKET],
        stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line.startswith("ready "):
        raise RuntimeError(f"the {kind} server did not start: {line}")
    return process, line.split()[1]


AWS_CPU = []  # CPU seconds of each `aws` run, in order
PART_CONCURRENCY = None  # --part-concurrency: ferryd's part_concurrency, when set
SPOOL_OPTIONS = []  # --spool-option: more lines for ferryd's [[spool]]


def start_ferryd(bin_dir, work, endpoint, tag):
    spool = os.path.join(work, f"spool-{tag}")
    os.makedirs(spool)
    config = os.path.join(work, f"ferry-{tag}.toml")
    with open(config, "w") as f:
        f.write(f'''state_directory = "{work}/state-{tag}"
control_socket = "{work}/state-{tag}/control.sock"
log_level = "warning"

[[spool]]
name = "bench"
directory = "{spool}"
url = "{endpoint}"
protocol = "s3"
bucket = "{BUCKET}"
key = "{tag}/{{relative_path}}"
access_key_id = "{AK}"
secret_access_key = "${{env:FERRY_BENCH_SECRET}}"
settle = "0s"
''' + (f"part_concurrency = {PART_CONCURRENCY}\n" if PART_CONCURRENCY else "")
            + "".join(line + "\n" for line in SPOOL_OPTIONS))
    env = dict(os.environ, FERRY_BENCH_SECRET=SK)
    process = subprocess.Popen([os.path.join(bin_dir, "ferryd"), "--config", config], env=env,
                               stderr=open(os.path.join(work, f"ferryd-{tag}.log"), "w"))
    socket_path = f"{work}/state-{tag}/control.sock"
    wait_until(lambda: os.path.exists(socket_path), 30, 0.01, "ferryd's control socket")
    return process, spool


class PeakRSS:
    """Samples a process's VmHWM (the kernel keeps the peak) when stopped."""
    def __init__(self, pid):
        self.pid = pid

    def peak_mib(self):
        return proc_kib(self.pid, "VmHWM") / 1024

    def parts(self):
        """What the resident set is made of now: anonymous memory and file-backed pages (the binary's
        code and data, which the kernel maps in as they are touched, more or fewer at a time)."""
        return f"now {proc_kib(self.pid, 'RssAnon') / 1024:.1f} MiB anonymous + {proc_kib(self.pid, 'RssFile') / 1024:.1f} file-backed"


def cpu_seconds(pid):
    """CPU time (user + system) of a process and its live descendants, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append((int(entry), int(fields[11]) + int(fields[12])))
    total, stack = 0, [pid]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = int(fields[11]) + int(fields[12])
    while stack:
        for child, used in children.get(stack.pop(), []):
            total += used
            stack.append(child)
    return total / ticks


def make_file(path, size):
    with open(path, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(os.urandom(size % len(chunk)))


def aws(args, endpoint, work, command="cp"):
    config = os.path.join(work, "aws-config")
    with open(config, "w") as f:
        f.write("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_CONFIG_FILE=config,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(["aws", "--endpoint-url", endpoint, "s3", command, "--only-show-errors"] + (["--no-progress"] if command == "cp" else []) + args,
                   env=env, check=True)
    elapsed = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    AWS_CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return elapsed


def ferryd_large(bin_dir, work, endpoint, size, run, server):
    source = os.path.join(work, "large.bin")
    process, spool = start_ferryd(bin_dir, work, endpoint, f"large{run}")
    try:
        cpu0, server0 = cpu_seconds(process.pid), cpu_seconds(server.pid)
        t0 = time.monotonic()
        os.rename(source, os.path.join(spool, "large.bin"))
        wait_until(lambda: spool_files(spool) == 0, 3600, 0.01, "the 1 GiB file delivered")
        elapsed = time.monotonic() - t0
        cpu, server_cpu = cpu_seconds(process.pid) - cpu0, cpu_seconds(server.pid) - server0
        rss = PeakRSS(process.pid)
        log(f"  ferryd: {elapsed:.2f} s, CPU {cpu:.2f} s (server {server_cpu:.2f} s), "
            f"peak RSS {rss.peak_mib():.1f} MiB ({rss.parts()})")
        return elapsed, rss.peak_mib(), cpu
    finally:
        process.terminate()
        process.wait()


def ferryd_small(bin_dir, work, endpoint, count, size, run):
    staging = os.path.join(work, f"small-ferryd-{run}")
    os.makedirs(staging)
    for index in range(count):
        with open(os.path.join(staging, f"f{index:05}.bin"), "wb") as f:
            f.write(os.urandom(size))
    process, spool = start_ferryd(bin_dir, work, endpoint, f"small{run}")
    try:
        t0 = time.monotonic()
        for name in sorted(os.listdir(staging)):
            os.rename(os.path.join(staging, name), os.path.join(spool, name))
        wait_until(lambda: spool_files(spool) == 0, 3600, 0.01, "the small files delivered")
        elapsed = time.monotonic() - t0
        rss = PeakRSS(process.pid)
        log(f"  ferryd: {count / elapsed:.0f} files/s, peak RSS {rss.peak_mib():.1f} MiB ({rss.parts()})")
        return count / elapsed, rss.peak_mib()
    finally:
        process.terminate()
        process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="rclone", choices=["rclone", "seaweedfs", "moto"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bin", help="directory with release ferryd and ferryctl (skips the build)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", help="also write results.json here")
    parser.add_argument("--part-concurrency", type=int, help="ferryd's part_concurrency (default: ferryd's own)")
    parser.add_argument("--spool-option", action="append", default=[], metavar="LINE",
                        help="a TOML line for ferryd's spool, such as 'checksum = \"none\"' (repeatable)")
    args = parser.parse_args()
    global PART_CONCURRENCY
    PART_CONCURRENCY = args.part_concurrency
    SPOOL_OPTIONS[:] = args.spool_option
    large = (32 if args.smoke else 1024) << 20
    small_count = 100 if args.smoke else 1000
    runs = 1 if args.smoke else args.runs
    bin_dir = args.bin or build(None, "release")
    work = tempfile.mkdtemp(prefix="ferry-s3-bench.")
    server, endpoint = start_server(args.server, work)
    results = {"server": args.server, "large_bytes": large, "small_files": small_count, "runs": runs,
               "ferryd_large_s": [], "aws_large_s": [], "ferryd_large_cpu_s": [], "aws_large_cpu_s": [], "ferryd_peak_rss_mib": [], "ferryd_small_fps": [], "aws_small_fps": []}
    try:
        for run in range(runs):
            log(f"run {run + 1}/{runs}: large file")
            make_file(os.path.join(work, "large.bin"), large)
            shutil.copyfile(os.path.join(work, "large.bin"), os.path.join(work, "large-aws.bin"))
            # Both clients start with no dirty pages to write back (the files just made, the other
            # client's object), and they take turns going first: neither pays for the other's writes.
            def run_ferryd():
                os.sync()
                elapsed, peak, cpu = ferryd_large(bin_dir, work, endpoint, large, run, server)
                results["ferryd_large_s"].append(elapsed)
                results["ferryd_large_cpu_s"].append(cpu)
                results["ferryd_peak_rss_mib"].append(peak)

            def run_aws():
                os.sync()
                server0 = cpu_seconds(server.pid)
                results["aws_large_s"].append(aws([os.path.join(work, "large-aws.bin"), f"s3://{BUCKET}/aws/large{run}.bin"], endpoint, work))
                results["aws_large_cpu_s"].append(AWS_CPU[-1])
                log(f"  aws s3 cp: {results['aws_large_s'][-1]:.2f} s, CPU {AWS_CPU[-1]:.2f} s "
                    f"(server {cpu_seconds(server.pid) - server0:.2f} s)")

            for measure in ((run_ferryd, run_aws) if run % 2 == 0 else (run_aws, run_ferryd)):
                measure()
            os.remove(os.path.join(work, "large-aws.bin"))
            # The next run's server starts as empty as this one's did.
            aws(["--recursive", f"s3://{BUCKET}/"], endpoint, work, command="rm")
            log(f"run {run + 1}/{runs}: small files")
            fps, peak = ferryd_small(bin_dir, work, endpoint, small_count, 16 * 1024, run)
            results["ferryd_small_fps"].append(fps)
            results["ferryd_peak_rss_mib"].append(peak)
            staging = os.path.join(work, f"small-aws-{run}")
            os.makedirs(staging)
            for index in range(small_count):
                with open(os.path.join(staging, f"f{index:05}.bin"), "wb") as f:
                    f.write(os.urandom(16 * 1024))
            results["aws_small_fps"].append(small_count / aws(["--recursive", staging, f"s3://{BUCKET}/aws/small{run}/"], endpoint, work))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    med = {key: statistics.median(value) for key, value in results.items() if isinstance(value, list)}
    setting = f", part_concurrency = {args.part_concurrency}" if args.part_concurrency else ""
    print(f"## S3: ferryd{setting} against `aws s3 cp` on {args.server} (medians of {runs})\n")
    print("| measure | ferryd | aws s3 cp | ratio | target |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {large >> 20} MiB file, wall time | {med['ferryd_large_s']:.2f} s | {med['aws_large_s']:.2f} s | "
          f"{med['ferryd_large_s'] / med['aws_large_s']:.2f}× | ≤ 1.0× {'met' if med['ferryd_large_s'] <= med['aws_large_s'] else 'NOT met'} |")
    print(f"| {large >> 20} MiB file, client CPU (user + system) | {med['ferryd_large_cpu_s']:.2f} s | {med['aws_large_cpu_s']:.2f} s | "
          f"{med['ferryd_large_cpu_s'] / med['aws_large_cpu_s']:.2f}× | |")
    print(f"| {small_count} × 16 KiB, files/s | {med['ferryd_small_fps']:.0f} | {med['aws_small_fps']:.0f} | "
          f"{med['ferryd_small_fps'] / med['aws_small_fps']:.2f}× | ≥ 2.0× {'met' if med['ferryd_small_fps'] >= 2 * med['aws_small_fps'] else 'NOT met'} |")
    peak = max(results["ferryd_peak_rss_mib"])
    print(f"| ferryd peak RSS (any run) | {peak:.1f} MiB | | | < 48 MiB {'met' if peak < 48 else 'NOT met'} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "s3-results.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
