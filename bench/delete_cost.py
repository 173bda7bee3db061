#!/usr/bin/env python3
"""What deleting a delivered file costs the filesystem, as Ferry deletes it.

Ferry deletes a delivered file by claiming it first (SpoolFiles.remove): `stat` of the claim name,
`stat` of the file, `rename` to the claim name, `stat` of the claim, `unlink`. This runs that
sequence over 5,000 files of 16 KiB in a directory of 5,000 and of 100,000 files, with the files
freshly written (as in scenario 2, deleted before the kernel writes them back: ext4 has allocated
no blocks yet) and synced first (as in scenario 4's drain: a backlog on disk). Wall time per file,
the `unlink` alone, and CPU (user + system) per file.

  python3 bench/delete_cost.py [DIR]     # DIR: where to make the files (default: $TMPDIR); ~1 min
"""
import os, shutil, sys, tempfile, time


def run(base, count, written_back, measured=5000):
    directory = tempfile.mkdtemp(prefix="ferry-delete-", dir=base)
    try:
        data = os.urandom(16384)
        for i in range(count):
            with open(os.path.join(directory, f"s{i:07d}.bin"), "wb") as f:
                f.write(data)
        if written_back:
            os.sync()
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        unlink = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(measured):
            name, claim = f"s{i:07d}.bin", f".ferry-claim-{i}"
            try:
                os.stat(claim, dir_fd=fd)
            except FileNotFoundError:
                pass
            os.stat(name, dir_fd=fd)
            os.rename(name, claim, src_dir_fd=fd, dst_dir_fd=fd)
            os.stat(claim, dir_fd=fd)
            u = time.perf_counter()
            os.unlink(claim, dir_fd=fd)
            unlink += time.perf_counter() - u
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        os.close(fd)
        print(f"| {count:,} | {'yes' if written_back else 'no'} | {wall / measured * 1e6:.0f} µs | "
              f"{unlink / measured * 1e6:.0f} µs | {cpu / measured * 1e6:.0f} µs |", flush=True)
    finally:
        shutil.rmtree(directory)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    print("| files in the directory | written back | wall per file | unlink | CPU per file |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for count in (5000, 100000):
        for written_back in (False, True):
            run(base, count, written_back)


if __name__ == "__main__":
    main()
