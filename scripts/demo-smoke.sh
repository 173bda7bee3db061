#!/usr/bin/env bash
# Checks the README's first command: `ferryd demo` starts, takes a dropped file, and the receiver
# stores it byte-identical. Used by CI; runs the built binary from .build/debug.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ferryd="$root/.build/debug/ferryd"
work=$(mktemp -d)
trap 'kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
"$ferryd" demo >demo.out 2>demo.err &
pid=$!
for _ in $(seq 1 300); do grep -q "Drop a file in" demo.out 2>/dev/null && break; sleep 0.1; done
grep -q "Drop a file in" demo.out || { echo "demo did not start"; cat demo.err; exit 1; }
head -c 1048576 /dev/urandom > "$work/sample.bin"
cp "$work/sample.bin" ferry-demo/spool/.sample.tmp && mv ferry-demo/spool/.sample.tmp ferry-demo/spool/sample.bin
for _ in $(seq 1 300); do [[ -f ferry-demo/sent/sample.bin ]] && break; sleep 0.1; done
cmp "$work/sample.bin" ferry-demo/received/sample.bin
cmp "$work/sample.bin" ferry-demo/sent/sample.bin
echo "demo smoke: a 1 MiB file went spool -> receiver -> sent, byte-identical"
