# The two set-up commands in the README:
#   make demo   build, then run `ferryd demo` (spool ./ferry-demo/spool → a receiver on 127.0.0.1)
#   make test   install test dependencies, build, run every test
#   make torture            the quick torture run (crashes, faults, outages, SIGTERM; 2-3 minutes)
#   make torture TORTURE=--long   the long one (20+ minutes); see scripts/torture.py --help
#   make torture-s3         kill -9 while files go to a real S3 server (2 minutes; scripts/torture_s3.py)
#   make torture-resumable  kill -9 while files go to a tus server, then to an IETF draft server (3 minutes)
#   make deb                the Debian package, .build/deb/ferry_<version>_<arch>.deb (make deb-test checks it, as root)
#   make bench              ferryd against curl and Python requests (release build; see docs/PERFORMANCE.md)
#   make bench-smoke        the same at tiny sizes on the debug build, one run, no thresholds (seconds; CI runs it)
#   make bench-s3           ferryd's s3 protocol against `aws s3 cp` on a local S3 server (bench/s3.py)
#   make bench-after        what hooks, result files and digests cost (bench/after_delivery.py)
#   make check-rules        promtool check rules and promtool test rules on contrib/prometheus (make test runs them too)
.PHONY: demo test torture torture-s3 torture-resumable build release install uninstall check-units check-rules deps test-deps clean

demo: deps
	swift build --product ferryd
	.build/debug/ferryd demo

# The integration suites start real daemons and check timing that ferryd promises (watchdog pings,
# shutdown deadlines): run one test at a time so that two busy cores do not blur those figures.
test: test-deps
	swift build --build-tests
	swift test --skip-build --no-parallel

TORTURE ?= --quick
torture: deps
	swift build
	python3 scripts/torture.py $(TORTURE)

# kill -9 while files go to a real S3 server (rclone serve s3; scripts/install-deps.sh --test installs it)
torture-s3: test-deps
	swift build
	python3 scripts/torture_s3.py $(TORTURE)

# kill -9 while files go to tuspyserver (protocol = "tus"), then to Tests/Servers/resumable_server.py
# (protocol = "resumable"); scripts/torture_resumable.py
torture-resumable: test-deps
	swift build
	python3 scripts/torture_resumable.py --protocol tus $(TORTURE)
	python3 scripts/torture_resumable.py --protocol resumable $(TORTURE)

# BENCH passes options to bench/bench.py, e.g. BENCH="--only 2 --out bench/results".
.PHONY: bench bench-smoke bench-deps
bench: bench-deps
	python3 bench/bench.py $(BENCH)

bench-smoke: bench-deps
	python3 bench/bench.py --smoke --configuration debug $(BENCH)

bench-deps:
	scripts/install-deps.sh --bench

# S3BENCH passes options to bench/s3.py, e.g. S3BENCH="--server seaweedfs --runs 5".
.PHONY: bench-s3 bench-s3-smoke
bench-s3: bench-deps test-deps
	python3 bench/s3.py $(S3BENCH)

bench-s3-smoke: bench-deps test-deps
	swift build --product ferryd
	python3 bench/s3.py --smoke --bin .build/debug $(S3BENCH)

# AFTERBENCH passes options to bench/after_delivery.py, e.g. AFTERBENCH="--runs 5".
.PHONY: bench-after bench-after-smoke
bench-after: bench-deps
	python3 bench/after_delivery.py $(AFTERBENCH)

bench-after-smoke: bench-deps
	swift build
	python3 bench/after_delivery.py --smoke --bin .build/debug $(AFTERBENCH)

build: deps
	swift build

release: deps
	swift build -c release --product ferryd
	swift build -c release --product ferryctl

# Installs ferryd as a hardened systemd service (PREFIX=/usr/local, DESTDIR=; see scripts/install.sh).
# Run it as yourself: it builds as you and uses sudo to install.
install:
	scripts/install.sh

uninstall:
	scripts/install.sh --uninstall

# The Debian package .build/deb/ferry_<version>_<arch>.deb (scripts/build-deb.sh: static release
# build, stripped, lintian-clean). deb-test installs, upgrades, removes and purges it on this machine
# and checks each step (root; CI runs it).
.PHONY: deb deb-test
deb:
	scripts/install-deps.sh --deb
	scripts/build-deb.sh

deb-test:
	scripts/deb-test.sh

# systemd-analyze verify and security on systemd/ (needs the systemd package).
check-units:
	scripts/check-units.sh

# The Prometheus alerting rules: valid, and their unit tests pass (needs promtool: make test-deps).
check-rules: test-deps
	promtool check rules contrib/prometheus/ferry.rules.yml
	promtool test rules contrib/prometheus/ferry.rules.test.yml

deps:
	scripts/install-deps.sh

test-deps:
	scripts/install-deps.sh --test

clean:
	rm -rf .build ferry-demo
