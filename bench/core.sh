#!/usr/bin/env bash
# Ferry core benchmark: the same loopback receiver (ferry-receiver, release build) takes
#   1. one large file (default 1 GiB) from ferryd, from `curl -F` and from `curl -T`:
#      wall time from hand-over to the file stored at the receiver, and each client's peak RSS;
#   2. N small files (default 1,000 × 4 KiB) from ferryd (renamed into the spool at once) and from a
#      sequential `curl -F` loop: files per second from first hand-over to last receipt.
# Each measurement runs RUNS times (default 3) and the median is reported with the ratio to curl.
#
# The receiver parses every multipart body; by default it then discards the bytes, so the figures
# measure the clients, not the receiver's disk and hashing (--store makes it store and hash them).
#
#   bench/core.sh                 # full run
#   bench/core.sh --store         # the receiver stores and hashes every file
#   bench/core.sh --quick         # 64 MiB and 200 files, 1 run (a smoke test, seconds)
# Environment: SIZE_MB, SMALL_FILES, SMALL_KB, RUNS override the sizes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SIZE_MB=${SIZE_MB:-1024}; SMALL_FILES=${SMALL_FILES:-1000}; SMALL_KB=${SMALL_KB:-4}; RUNS=${RUNS:-3}
receiver_mode=--discard
for arg in "$@"; do
    case "$arg" in
        --quick) SIZE_MB=64; SMALL_FILES=200; RUNS=1 ;;
        --store) receiver_mode="" ;;
        *) echo "usage: bench/core.sh [--quick] [--store]"; exit 2 ;;
    esac
done
command -v curl >/dev/null && [[ -x /usr/bin/time ]] || { echo "bench needs curl and GNU time (apt-get install curl time)"; exit 1; }

echo "building release binaries…" >&2
(cd "$root" && swift build -c release --product ferryd >/dev/null && swift build -c release --product ferry-receiver >/dev/null)
bin="$root/.build/release"
work=$(mktemp -d /tmp/ferry-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.3f}')"; }
median() { python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
wait_for() { # wait_for CMD… : poll every 10 ms, up to 10 minutes
    local deadline=$(( $(date +%s) + 600 ))
    until "$@"; do (( $(date +%s) < deadline )) || { echo "timed out: $*" >&2; exit 1; }; sleep 0.01; done
}
count_files() { find "$1" -maxdepth 1 -type f ! -name '.*' | wc -l; }
spool_empty() { (( $(count_files "$spool") == 0 )); }

# The receiver.
"$bin/ferry-receiver" --directory "$work/received" $receiver_mode > "$work/receiver.out" &
pids+=($!)
wait_for grep -q listening "$work/receiver.out"
url=$(sed -n 's/^listening on //p' "$work/receiver.out")

start_ferryd() { # start_ferryd NAME: a fresh state and spool; sets spool, ferryd_pid, rss_file
    local name=$1
    spool="$work/$name/spool"; mkdir -p "$spool"
    cat > "$work/$name/ferry.toml" <<TOML
state_directory = "$work/$name/state"
log_level = "info"
max_concurrent_uploads = 4
[[spool]]
name = "bench"
directory = "$spool"
url = "$url/upload"
settle = "0s"
TOML
    rss_file="$work/$name/rss"
    /usr/bin/time -f "%M" -o "$rss_file" "$bin/ferryd" --config "$work/$name/ferry.toml" 2>"$work/$name/ferryd.log" &
    local time_pid=$!
    pids+=($time_pid)
    wait_for pgrep -P "$time_pid" -x ferryd >/dev/null
    ferryd_pid=$(pgrep -P "$time_pid" -x ferryd)
    wait_for grep -q "msg=ready" "$work/$name/ferryd.log"
}
stop_ferryd() { kill -TERM "$ferryd_pid"; wait_for test -s "$rss_file"; }

big="$work/big.bin"
head -c $((SIZE_MB * 1024 * 1024)) /dev/zero > "$big"
echo "receiver: ferry-receiver ${receiver_mode:---store} on $url"
echo "== one ${SIZE_MB} MiB file (median of $RUNS)"
f_t=(); f_r=(); cf_t=(); cf_r=(); ct_t=(); ct_r=()
for run in $(seq 1 "$RUNS"); do
    rm -rf "$work/received"/*
    # curl -F
    t0=$(now); /usr/bin/time -f "%M" -o "$work/curlF.rss" curl -sS -o /dev/null -F "file=@$big" "$url/upload"; t1=$(now)
    cf_t+=("$(elapsed "$t0" "$t1")"); cf_r+=("$(cat "$work/curlF.rss")")
    # curl -T (raw PUT of the bytes)
    t0=$(now); /usr/bin/time -f "%M" -o "$work/curlT.rss" curl -sS -o /dev/null -T "$big" "$url/put/big-T.bin"; t1=$(now)
    ct_t+=("$(elapsed "$t0" "$t1")"); ct_r+=("$(cat "$work/curlT.rss")")
    # ferryd: from rename into the spool to the file stored at the receiver
    rm -rf "$work/received"/*
    start_ferryd "big$run"
    cp "$big" "$spool/.big.bin"   # the copy is the producer's work, not timed
    t0=$(now); mv "$spool/.big.bin" "$spool/big.bin"
    wait_for test ! -e "$spool/big.bin"
    t1=$(now)
    stop_ferryd
    f_t+=("$(elapsed "$t0" "$t1")"); f_r+=("$(cat "$rss_file")")
done
ft=$(median "${f_t[@]}"); cft=$(median "${cf_t[@]}"); ctt=$(median "${ct_t[@]}")
printf '%-10s %9s %11s %9s\n' client "wall s" "peak RSS MiB" "ferry/x"
printf '%-10s %9s %11s %9s\n' ferryd "$ft" "$(( $(median "${f_r[@]}" | cut -d. -f1) / 1024 ))" "1.00"
printf '%-10s %9s %11s %9s\n' "curl -F" "$cft" "$(( $(median "${cf_r[@]}" | cut -d. -f1) / 1024 ))" "$(ratio "$ft" "$cft")"
printf '%-10s %9s %11s %9s\n' "curl -T" "$ctt" "$(( $(median "${ct_r[@]}" | cut -d. -f1) / 1024 ))" "$(ratio "$ft" "$ctt")"
rm -f "$big"

echo "== ${SMALL_FILES} files of ${SMALL_KB} KiB (median of $RUNS)"
mkdir -p "$work/small"
for i in $(seq 1 "$SMALL_FILES"); do head -c $((SMALL_KB * 1024)) /dev/urandom > "$work/small/f$i.bin"; done
f_s=(); c_s=()
for run in $(seq 1 "$RUNS"); do
    rm -rf "$work/received"/*
    t0=$(now)
    for f in "$work/small"/*.bin; do curl -sS -o /dev/null -F "file=@$f" "$url/upload"; done
    t1=$(now)
    c_s+=("$(python3 -c "print(f'{$SMALL_FILES / ($t1 - $t0):.1f}')")")
    rm -rf "$work/received"/*
    start_ferryd "small$run"
    mkdir -p "$spool/.staging"
    cp "$work/small"/*.bin "$spool/.staging/"
    t0=$(now)
    for f in "$spool/.staging"/*.bin; do mv "$f" "$spool/"; done
    wait_for spool_empty   # each file leaves the spool once its 2xx is committed
    t1=$(now)
    stop_ferryd
    f_s+=("$(python3 -c "print(f'{$SMALL_FILES / ($t1 - $t0):.1f}')")")
done
fs=$(median "${f_s[@]}"); cs=$(median "${c_s[@]}")
printf '%-16s %10s %9s\n' client "files/s" "ferry/x"
printf '%-16s %10s %9s\n' ferryd "$fs" "1.00"
printf '%-16s %10s %9s\n' "curl -F loop" "$cs" "$(ratio "$fs" "$cs")"
