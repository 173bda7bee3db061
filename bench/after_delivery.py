#!/usr/bin/env python3
"""What the after-delivery features cost (issue: the server's answer, hooks, digests), ferryd
against itself in one run, on a ferry-receiver on 127.0.0.1:

  A hooks    2,000 files of 16 KiB (multipart): the spool drained, plain and with an on_delivered
             hook (/bin/true) and a result_directory; files/s, and how long after the drain the
             last hook ran and the last result file was written; ferryd CPU per file
  B digest   one 512 MiB file (put): drop -> gone, plain and with digest = "sha-256" (one extra read
             of the file before it is sent); wall time and ferryd CPU

  python3 bench/after_delivery.py --bin .build/release [--runs 3] [--smoke]

Medians of --runs; the exit status is 0 when every measurement ran, whatever the figures.
"""
import argparse, os, shutil, statistics, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench import Ferryd, Receiver, build, cpu_seconds, log, spool_files, wait_until  # noqa: E402


def configure(ferryd, lines):
    """Adds `lines` to the one [[spool]] (they may open sub-tables)."""
    with open(ferryd.config, "a") as f:
        f.write("\n".join(lines) + "\n")


def drop(spool, name, data):
    temporary = os.path.join(spool, "." + name)
    with open(temporary, "wb") as f:
        f.write(data)
    os.rename(temporary, os.path.join(spool, name))


def hooks_run(bins, work, receiver, count, with_hooks, run):
    ferryd = Ferryd(bins, work, f"hooks-{with_hooks}-{run}", receiver.url, extra="max_concurrent_hooks = 2")
    results = os.path.join(ferryd.home, "results")
    marks = os.path.join(ferryd.home, "marks")
    if with_hooks:
        os.makedirs(marks)
        hook = os.path.join(ferryd.home, "hook.sh")
        with open(hook, "w") as f:
            f.write(f'#!/bin/sh\n: > "{marks}/$FERRY_JOB_ID"\n')
        os.chmod(hook, 0o755)
        configure(ferryd, [f'result_directory = "{results}"', "[spool.hooks]", f'on_delivered = ["{hook}"]'])
    ferryd.start()
    payload = os.urandom(16384)
    cpu0 = cpu_seconds(ferryd.pid)
    t0 = time.monotonic()
    for index in range(count):
        drop(ferryd.spool, f"f{index:06d}.bin", payload)
    wait_until(lambda: spool_files(ferryd.spool) == 0, 600, interval=0.01, what="the spool to drain")
    drained = time.monotonic() - t0
    after = 0.0
    if with_hooks:
        wait_until(lambda: len(os.listdir(marks)) >= count and len(os.listdir(results)) >= count, 600, interval=0.01,
                   what="every hook and result file")
        after = time.monotonic() - t0 - drained
    cpu = cpu_seconds(ferryd.pid) - cpu0
    ferryd.stop()
    return count / drained, after, cpu / count * 1000


def digest_run(bins, work, receiver, size, with_digest, run):
    ferryd = Ferryd(bins, work, f"digest-{with_digest}-{run}", receiver.url)
    configure(ferryd, ['protocol = "put"'] + (['digest = "sha-256"'] if with_digest else []))
    ferryd.start()
    source = os.path.join(work, "large.bin")
    cpu0 = cpu_seconds(ferryd.pid)
    t0 = time.monotonic()
    os.link(source, os.path.join(ferryd.spool, "large.bin"))
    wait_until(lambda: spool_files(ferryd.spool) == 0, 600, interval=0.01, what="the file to be delivered")
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(ferryd.pid) - cpu0
    ferryd.stop()
    return elapsed, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", help="directory with release ferryd, ferryctl and ferry-receiver (skips the build)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="200 files, 16 MiB, one run")
    args = parser.parse_args()
    bins = args.bin or build(None, "release")
    runs = 1 if args.smoke else args.runs
    count, size = (200, 16 << 20) if args.smoke else (2000, 512 << 20)
    work = tempfile.mkdtemp(prefix="ferry-after-")
    receiver = Receiver(os.path.join(bins, "ferry-receiver"), work)
    try:
        with open(os.path.join(work, "large.bin"), "wb") as f:
            for _ in range(size >> 20):
                f.write(os.urandom(1 << 20))
        rows = []
        for with_hooks in (False, True):
            figures = [hooks_run(bins, work, receiver, count, with_hooks, run) for run in range(runs)]
            rate, after, cpu = (statistics.median(column) for column in zip(*figures))
            rows.append(("A", "hook + result file" if with_hooks else "plain", f"{rate:,.0f} files/s",
                         f"last hook {after:.2f} s after the drain" if with_hooks else "", f"{cpu:.2f} ms CPU/file"))
        for with_digest in (False, True):
            figures = [digest_run(bins, work, receiver, size, with_digest, run) for run in range(runs)]
            elapsed, cpu = (statistics.median(column) for column in zip(*figures))
            rows.append(("B", "digest = sha-256" if with_digest else "plain", f"{elapsed:.2f} s",
                         f"{size / elapsed / 1e6:,.0f} MB/s", f"{cpu:.2f} s CPU"))
        print(f"after-delivery costs: {count} × 16 KiB files, one {size >> 20} MiB file; medians of {runs}")
        for row in rows:
            print("  " + "  ".join(f"{cell:<22}" for cell in row))
    finally:
        receiver.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
