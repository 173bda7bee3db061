# The two set-up commands in the README:
#   make demo   build, then run `ferryd demo` (spool ./ferry-demo/spool → a receiver on 127.0.0.1)
#   make test   install test dependencies, build, run every test
.PHONY: demo test build release install uninstall check-units deps test-deps clean

demo: deps
	swift build --product ferryd
	.build/debug/ferryd demo

test: test-deps
	swift build --build-tests
	swift test --skip-build

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

# systemd-analyze verify and security on systemd/ (needs the systemd package).
check-units:
	scripts/check-units.sh

deps:
	scripts/install-deps.sh

test-deps:
	scripts/install-deps.sh --test

clean:
	rm -rf .build ferry-demo
