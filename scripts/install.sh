#!/usr/bin/env bash
# Installs Ferry as a systemd service: ferryd and ferryctl, ferryd.service and ferryd.socket, the
# ferry user and groups (sysusers.d), its directories (tmpfiles.d), /etc/ferry/ferry.toml, the manual
# pages (ferryd(8), ferryctl(1), ferry.toml(5)) and the bash, zsh and fish completions.
#
#   scripts/install.sh [--no-build] [--uninstall] [NAME=VALUE…]      (or: make install)
#
# Settings, as NAME=VALUE arguments or environment variables:
#   PREFIX=/usr/local  binaries in $PREFIX/bin, documentation in $PREFIX/share/doc/ferry. With
#                      /usr/local or /usr the units, sysusers.d and tmpfiles.d files go below
#                      $PREFIX/lib, where systemd looks, and /etc stays the administrator's (overrides:
#                      systemctl edit ferryd); with any other prefix they go to /etc. The units'
#                      paths are rewritten to match.
#   DESTDIR=           stage everything below this directory (for a package); nothing is run then.
#   BIN_DIR=           take ferryd and ferryctl from this directory instead of building them.
#   DOCS_DIR=          take the manual pages and completions from this directory (what
#                      scripts/generate-docs.sh wrote: man/, completions/) instead of generating
#                      them, which builds the debug ferry-docs and runs the generate-manual plugin.
#   UNIT_DIR= SYSUSERS_DIR= TMPFILES_DIR=   override the three systemd directories.
#   SWIFT_BUILD_FLAGS=--static-swift-stdlib  added to `swift build -c release`: with the Swift
#                      runtime linked in, ferryd does not need a toolchain the sandbox might hide
#                      (ProtectHome=yes hides one installed below /home or /root).
# --no-build uses .build/release as it is.
#
# The configuration is never overwritten: an existing /etc/ferry/ferry.toml is kept and the example
# is installed beside it as ferry.toml.example. --uninstall stops and removes what this installs but
# keeps the configuration, the queue (/var/lib/ferry), the spools and the ferry user and groups.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

build=true
uninstall=false
for argument in "$@"; do
    case $argument in
        --no-build) build=false ;;
        --uninstall) uninstall=true ;;
        PREFIX=* | DESTDIR=* | BIN_DIR=* | DOCS_DIR=* | UNIT_DIR=* | SYSUSERS_DIR=* | TMPFILES_DIR=* | SWIFT_BUILD_FLAGS=*)
            declare "${argument%%=*}=${argument#*=}" ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "install: unknown argument $argument (see --help)" >&2; exit 64 ;;
    esac
done

PREFIX=${PREFIX:-/usr/local}
PREFIX=${PREFIX%/}
DESTDIR=${DESTDIR:-}
DESTDIR=${DESTDIR%/}
BIN_DIR=${BIN_DIR:-}
DOCS_DIR=${DOCS_DIR:-}
SWIFT_BUILD_FLAGS=${SWIFT_BUILD_FLAGS---static-swift-stdlib}
[[ $PREFIX == /* ]] || { echo "install: PREFIX must be an absolute path" >&2; exit 64; }
[[ $PREFIX != *[\#\&\\]* ]] || { echo "install: PREFIX may not contain #, & or \\" >&2; exit 64; }
case $PREFIX in
    /usr | /usr/local) system_lib=$PREFIX/lib ;;
    *) system_lib=/etc ;;   # systemd reads unit, sysusers.d and tmpfiles.d files nowhere else
esac
bindir=$PREFIX/bin
docdir=$PREFIX/share/doc/ferry
mandir=$PREFIX/share/man
# Where each shell looks: bash-completion and fish also search $XDG_DATA_DIRS (/usr/local/share
# included); Debian's zsh searches /usr/share/zsh/vendor-completions and /usr/local/share/zsh/site-functions.
bash_completion_dir=$PREFIX/share/bash-completion/completions
fish_completion_dir=$PREFIX/share/fish/vendor_completions.d
case $PREFIX in
    /usr) zsh_completion_dir=$PREFIX/share/zsh/vendor-completions ;;
    *) zsh_completion_dir=$PREFIX/share/zsh/site-functions ;;
esac
# The manual pages and completions: SOURCE (below DOCS_DIR) and TARGET, one pair a line.
docs_files=(
    "man/ferryd.8 $mandir/man8/ferryd.8.gz"
    "man/ferryctl.1 $mandir/man1/ferryctl.1.gz"
    "man/ferry.toml.5 $mandir/man5/ferry.toml.5.gz"
    "completions/bash/ferryd $bash_completion_dir/ferryd"
    "completions/bash/ferryctl $bash_completion_dir/ferryctl"
    "completions/zsh/_ferryd $zsh_completion_dir/_ferryd"
    "completions/zsh/_ferryctl $zsh_completion_dir/_ferryctl"
    "completions/fish/ferryd.fish $fish_completion_dir/ferryd.fish"
    "completions/fish/ferryctl.fish $fish_completion_dir/ferryctl.fish"
)
UNIT_DIR=${UNIT_DIR:-$system_lib/systemd/system}
SYSUSERS_DIR=${SYSUSERS_DIR:-$system_lib/sysusers.d}
TMPFILES_DIR=${TMPFILES_DIR:-$system_lib/tmpfiles.d}
confdir=/etc/ferry

sudo=""
if [[ -z $DESTDIR && $(id -u) -ne 0 ]]; then sudo="sudo"; fi
systemd_running=false
if [[ -z $DESTDIR && -d /run/systemd/system ]]; then systemd_running=true; fi

installed=()
put() {   # put MODE SOURCE TARGET: install one file (TARGET without DESTDIR)
    $sudo install -D -m "$1" "$2" "$DESTDIR$3"
    installed+=("$3")
}

if $uninstall; then
    if $systemd_running; then
        $sudo systemctl disable --now ferryd.service ferryd.socket || true
    fi
    for file in "$bindir/ferryd" "$bindir/ferryctl" "$UNIT_DIR/ferryd.service" "$UNIT_DIR/ferryd.socket" \
        "$SYSUSERS_DIR/ferry.conf" "$TMPFILES_DIR/ferry.conf" "$docdir/README.md" "$docdir/ferry.toml.example" \
        "$docdir/examples/prometheus/ferry.rules.yml" "$docdir/examples/grafana/ferry.json" "${docs_files[@]#* }"; do
        if [[ -e "$DESTDIR$file" ]]; then $sudo rm -f "$DESTDIR$file" && echo "removed $file"; fi
    done
    for directory in "$docdir/examples/prometheus" "$docdir/examples/grafana" "$docdir/examples" "$docdir"; do
        $sudo rmdir "$DESTDIR$directory" 2>/dev/null || true
    done
    if $systemd_running; then $sudo systemctl daemon-reload; fi
    echo "Kept: $confdir, /var/lib/ferry (the queue), /var/spool/ferry, the ferry user and groups."
    exit 0
fi

# The binaries.
if [[ -n $BIN_DIR ]]; then
    build=false
else
    BIN_DIR=$root/.build/release
fi
if $build; then
    "$root/scripts/install-deps.sh"
    read -r -a flags <<<"$SWIFT_BUILD_FLAGS"
    # Under `sudo make install`, build as the invoking user, so .build does not become root's.
    as_user=()
    if [[ $(id -u) -eq 0 && -n ${SUDO_USER:-} && $SUDO_USER != root ]]; then as_user=(sudo -u "$SUDO_USER" --preserve-env=PATH); fi
    (cd "$root" && "${as_user[@]}" swift build -c release "${flags[@]}" --product ferryd \
        && "${as_user[@]}" swift build -c release "${flags[@]}" --product ferryctl)
fi
for binary in ferryd ferryctl; do
    [[ -x "$BIN_DIR/$binary" ]] || { echo "install: $BIN_DIR/$binary is missing; build it, or drop --no-build" >&2; exit 1; }
done
BIN_DIR=$(cd "$BIN_DIR" && pwd)   # generate-docs.sh runs the binaries from the repository's root
put 0755 "$BIN_DIR/ferryd" "$bindir/ferryd"
put 0755 "$BIN_DIR/ferryctl" "$bindir/ferryctl"

# The systemd files, their paths rewritten for PREFIX.
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
for unit in ferryd.service ferryd.socket; do
    sed -e "s#/usr/local/bin/#$bindir/#g" -e "s#/usr/local/share/doc/ferry/#$docdir/#g" \
        "$root/systemd/$unit" >"$staging/$unit"
    put 0644 "$staging/$unit" "$UNIT_DIR/$unit"
done
put 0644 "$root/systemd/ferry.sysusers" "$SYSUSERS_DIR/ferry.conf"
put 0644 "$root/systemd/ferry.tmpfiles" "$TMPFILES_DIR/ferry.conf"
put 0644 "$root/README.md" "$docdir/README.md"
# The Prometheus alerts and the Grafana dashboard (contrib/), as examples to copy.
put 0644 "$root/contrib/prometheus/ferry.rules.yml" "$docdir/examples/prometheus/ferry.rules.yml"
put 0644 "$root/contrib/grafana/ferry.json" "$docdir/examples/grafana/ferry.json"

# The manual pages (gzip -9n: no name or time stamp, so the same pages give the same bytes) and the
# completions, generated from the code unless DOCS_DIR has them already.
if [[ -z $DOCS_DIR ]] && ! command -v swift >/dev/null 2>&1; then
    echo "install: no Swift toolchain to generate the manual pages and completions; installing without them" \
        "(give DOCS_DIR= the output of scripts/generate-docs.sh to include them)" >&2
    docs_files=()
elif [[ -z $DOCS_DIR ]]; then
    DOCS_DIR=$staging/docs
    as_user=()
    if [[ $(id -u) -eq 0 && -n ${SUDO_USER:-} && $SUDO_USER != root ]]; then
        as_user=(sudo -u "$SUDO_USER" --preserve-env=PATH)
        chmod 0755 "$staging"
        install -d -o "$SUDO_USER" "$DOCS_DIR"
    fi
    "${as_user[@]}" "$root/scripts/generate-docs.sh" "$DOCS_DIR" "$BIN_DIR" >/dev/null
fi
for pair in "${docs_files[@]}"; do
    source=$DOCS_DIR/${pair%% *} target=${pair#* }
    [[ -s $source ]] || { echo "install: $source is missing; run scripts/generate-docs.sh $DOCS_DIR" >&2; exit 1; }
    if [[ $target == *.gz ]]; then
        gzip -9n <"$source" >"$staging/page.gz"
        source=$staging/page.gz
    elif [[ $target == "$bash_completion_dir"/* ]]; then
        # bash-completion sources the file: ArgumentParser's #!/bin/bash line would only mislead.
        sed '1{/^#!/d}' "$source" >"$staging/completion"
        source=$staging/completion
    fi
    put 0644 "$source" "$target"
done

# The configuration: the example with control_group (the socket's group) turned on. Its mode and
# group (0640 root:ferry, so ferryd can read it) are set by ferry.tmpfiles.
sed 's/^# control_group = "ferry-admin"$/control_group = "ferry-admin"/' "$root/etc/ferry/ferry.toml" >"$staging/ferry.toml"
grep -q '^control_group = "ferry-admin"$' "$staging/ferry.toml" \
    || { echo "install: etc/ferry/ferry.toml has no '# control_group = \"ferry-admin\"' line to turn on" >&2; exit 1; }
put 0644 "$staging/ferry.toml" "$docdir/ferry.toml.example"   # for a package's postinst
config_note=""
if [[ -e "$DESTDIR$confdir/ferry.toml" ]]; then
    put 0644 "$staging/ferry.toml" "$confdir/ferry.toml.example"
    config_note="kept your $confdir/ferry.toml; the new example is $confdir/ferry.toml.example"
else
    put 0640 "$staging/ferry.toml" "$confdir/ferry.toml"
    config_note="installed the example $confdir/ferry.toml: edit the spool's url"
fi
$sudo install -d -m 0755 "$DESTDIR$confdir"
$sudo install -d -m 0700 "$DESTDIR$confdir/credentials"

echo "Installed:"
printf '  %s\n' "${installed[@]}"
echo "  ($config_note)"

# A Swift runtime below /home, /root or /tmp is hidden from the sandboxed service.
if command -v ldd >/dev/null 2>&1; then
    hidden=$(ldd "$DESTDIR$bindir/ferryd" 2>/dev/null | grep -E '=> (/home|/root|/tmp|/run/user)/|not found' || true)
    if [[ -n $hidden ]]; then
        echo "install: warning: ferryd needs libraries the service cannot see (ProtectHome=yes, PrivateTmp=yes):" >&2
        echo "$hidden" >&2
        echo "install: rebuild with --static-swift-stdlib, or install the Swift toolchain under /usr or /opt" >&2
    fi
fi

if [[ -n $DESTDIR ]]; then
    echo "Staged below $DESTDIR; on the target run: systemd-sysusers; systemd-tmpfiles --create; systemctl daemon-reload"
    exit 0
fi

# Users, groups and directories now, rather than at the next boot.
$sudo systemd-sysusers "$SYSUSERS_DIR/ferry.conf"
$sudo systemd-tmpfiles --create "$TMPFILES_DIR/ferry.conf"
if $systemd_running; then
    $sudo systemctl daemon-reload
    # An upgrade: a running ferryd is restarted on the new binary (its queue carries over).
    if systemctl is-active --quiet ferryd.service; then
        $sudo systemctl try-restart ferryd.service && echo "restarted the running ferryd on the new binary"
    fi
else
    echo "(systemd is not running here: skipped systemctl daemon-reload)"
fi

cat <<EOF

Next steps:
  1. Put the upload token where LoadCredential= in ferryd.service reads it (paste it, then Ctrl-D):
       sudo sh -c 'umask 077; cat > $confdir/credentials/media-token'
  2. Edit $confdir/ferry.toml (each spool's url; a spool outside /var/spool/ferry also needs a
     ReadWritePaths= line: sudo systemctl edit ferryd) and check it:
       sudo env CREDENTIALS_DIRECTORY=$confdir/credentials $bindir/ferryd check-config
  3. Let people in:  sudo usermod -aG ferry-admin alice       (may steer ferryd with ferryctl)
                     sudo usermod -aG ferry-producers camera  (may drop files into the spools)
  4. Start it:       sudo systemctl enable --now ferryd.socket ferryd.service
  5. Watch it:       ferryctl status;  journalctl -u ferryd -f
EOF
