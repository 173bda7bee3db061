#!/usr/bin/env bash
# Tests the Debian package on this machine, as root (CI runs it; make deb-test):
#   1. builds it (scripts/build-deb.sh, or takes DEB=path) and runs lintian: no error and no warning
#      that packaging/debian/lintian-overrides does not explain;
#   2. installs it as the README says (apt-get install ./ferry_….deb) and checks the binaries, the
#      shipped configuration (ferryd check-config, also as the ferry user), the user and groups,
#      modes and owners, units, enablement (recorded by deb-systemd-helper even without systemd),
#      manual pages and completions, and that nothing was started;
#   3. upgrades: the same version again, then a bumped one (dpkg -i): the postinst's upgrade branch,
#      the administrator's configuration and disabled service kept, the queue kept;
#   4. removes (dpkg -r: configuration and queue stay) and purges (dpkg -P) it, and checks that
#      nothing is left but what policy keeps: the ferry user and groups, and the files that were
#      not the package's (a file waiting in a spool, a token in /etc/ferry/credentials).
# It refuses to run where Ferry is installed already (its purge would delete /var/lib/ferry), and
# leaves the machine as it found it: it purges the package and removes the user and groups it
# created. Prints the package's and the binaries' sizes.
#
#   sudo scripts/deb-test.sh [DEB=path]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

DEB=${DEB:-}
for argument in "$@"; do
    case $argument in
        DEB=*) DEB=${argument#DEB=} ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "deb-test: unknown argument $argument (see --help)" >&2; exit 64 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "deb-test: it installs and purges the package: run it as root (sudo scripts/deb-test.sh)" >&2; exit 1; }

# Someone's Ferry (a package, or make install's files) would be harmed by the purge.
if dpkg-query -W -f='${Status}' ferry 2>/dev/null | grep -qv '^unknown\|not-installed'; then
    echo "deb-test: the ferry package is installed here already; purge it first (dpkg -P ferry)" >&2; exit 1
fi
for path in /etc/ferry /var/lib/ferry /var/spool/ferry /usr/local/bin/ferryd; do
    [[ ! -e $path ]] || { echo "deb-test: $path exists: Ferry is installed here already (make uninstall?); not touching it" >&2; exit 1; }
done

scripts/install-deps.sh --deb
if [[ -z $DEB ]]; then
    DEB=$(scripts/build-deb.sh | tail -n 1)
fi
[[ -f $DEB ]] || { echo "deb-test: $DEB is missing" >&2; exit 1; }
DEB=$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")
version=$(dpkg-deb -f "$DEB" Version)

passed=0
failed=0
check() {   # check DESCRIPTION COMMAND…: one check, counted
    local description=$1
    shift
    if "$@"; then
        passed=$((passed + 1)); echo "ok   $description"
    else
        failed=$((failed + 1)); echo "FAIL $description"
    fi
}
expect_mode() {   # expect_mode PATH MODE OWNER:GROUP
    local actual
    actual=$(stat -c '%a %U:%G' "$1" 2>&1) || true
    check "$1 is $2 $3" test "$actual" = "$2 $3"
}
logged() {   # logged LOG COMMAND…: COMMAND's output into LOG, no standard input (a question fails)
    local log=$1
    shift
    "$@" </dev/null >"$log" 2>&1
}
quiet() { "$@" >/dev/null; }
absent() { ! compgen -G "$1" >/dev/null && [[ ! -L $1 ]]; }
end_of_phase() {
    if ((failed)); then
        for log in "$work"/*.log; do
            [[ -e $log ]] && { echo "--- $(basename "$log") (last lines)"; tail -n 30 "$log"; }
        done
        echo "deb-test: $1 failed; stopping"
        exit 1
    fi
}
# Everything whose path names Ferry, outside the repository, to compare before and after.
ferry_paths() {
    find /etc /usr /var /run /opt -xdev \( -path /var/tmp -o -path /var/cache -o -path /var/log \) -prune \
        -o -ipath '*ferry*' -print 2>/dev/null | LC_ALL=C sort
}

work=$(mktemp -d)
had_user=false
getent passwd ferry >/dev/null && had_user=true
cleanup() {
    set +e
    if dpkg-query -W ferry >/dev/null 2>&1; then dpkg -P ferry >/dev/null 2>&1; fi
    rm -rf /var/spool/ferry /etc/ferry
    if ! $had_user; then
        userdel ferry 2>/dev/null
        groupdel ferry-admin 2>/dev/null
        groupdel ferry-producers 2>/dev/null
        groupdel ferry 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
ferry_paths >"$work/paths-before"
# Pages and documentation even where dpkg is told to leave them out (Docker's slim images).
include_docs=(--path-include='/usr/share/man/*' --path-include='/usr/share/doc/ferry/*')

echo "== lintian"
# As nobody: lintian unpacks what it checks, and warns against doing that as root. Info tags are
# shown, not fatal; spelling-error-in-binary is not shown: its hits are in the linked-in libraries'
# strings (ICU, BoringSSL), not Ferry's. Not --show-overrides: with it, lintian 2.116 fails on an
# overridden error.
cp "$DEB" "$work/" && chmod 0755 "$work" && chmod 0644 "$work/$(basename "$DEB")"
install -d -o nobody "$work/lintian"
# From a directory nobody may enter: CI's checkout (a mktemp -d) is root's alone, and lintian
# goes back to the directory it started in.
check "lintian: no error, no warning without an override" \
    env --chdir="$work/lintian" setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env HOME="$work/lintian" TMPDIR="$work/lintian" \
    lintian --display-info --fail-on error,warning --suppress-tags spelling-error-in-binary "$work/$(basename "$DEB")"
end_of_phase lintian

echo "== install (apt-get install ./$(basename "$DEB"))"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y \
    -o "DPkg::Options::=${include_docs[0]}" -o "DPkg::Options::=${include_docs[1]}" "$DEB" >"$work/install.log" 2>&1; then
    cat "$work/install.log"
    check "apt-get install ./$(basename "$DEB")" false
fi
end_of_phase install
check "dpkg says installed" test "$(dpkg-query -W -f='${Status} ${Version}' ferry)" = "install ok installed $version"
check "ferryd --version is ${version%-*}" test "$(ferryd --version)" = "${version%-*}"
check "ferryctl --help" quiet ferryctl --help
check "ferryd needs no Swift runtime (ldd)" bash -c '! ldd /usr/bin/ferryd /usr/bin/ferryctl | grep -E "not found|libswift|libFoundation"'
check "the postinst says how to start ferryd" grep -q 'systemctl start ferryd' "$work/install.log"

check "user ferry (home /var/lib/ferry, no login shell)" \
    bash -c '[[ $(getent passwd ferry | cut -d: -f6,7) == /var/lib/ferry:*nologin ]]'
check "groups ferry-admin and ferry-producers" quiet getent group ferry-admin ferry-producers
check "ferry is in ferry-producers" bash -c 'id -nG ferry | grep -qw ferry-producers'
expect_mode /usr/bin/ferryd 755 root:root
expect_mode /usr/bin/ferryctl 755 root:root
expect_mode /etc/ferry 755 root:root
expect_mode /etc/ferry/ferry.toml 640 root:ferry
expect_mode /etc/ferry/credentials 700 root:root
expect_mode /var/lib/ferry 700 ferry:ferry
expect_mode /var/spool/ferry 2750 ferry:ferry-producers
expect_mode /var/spool/ferry/media 3770 ferry:ferry-producers
check "ferry.toml is a conffile" grep -qx ' /etc/ferry/ferry.toml [0-9a-f]*' <(dpkg-query -W -f='${Conffiles}\n' ferry)
check "ferry.toml has control_group = \"ferry-admin\" turned on" grep -qx 'control_group = "ferry-admin"' /etc/ferry/ferry.toml
for unit in ferryd.service ferryd.socket; do
    expect_mode "/usr/lib/systemd/system/$unit" 644 root:root
done
check "ferryd.service runs /usr/bin/ferryd" grep -qx 'ExecStart=/usr/bin/ferryd --config /etc/ferry/ferry.toml' /usr/lib/systemd/system/ferryd.service
check "ferryd.service's Documentation= exists" test -f "$(sed -n 's#^Documentation=file:##p' /usr/lib/systemd/system/ferryd.service)"
expect_mode /usr/lib/sysusers.d/ferry.conf 644 root:root
expect_mode /usr/lib/tmpfiles.d/ferry.conf 644 root:root
if command -v systemd-analyze >/dev/null 2>&1; then
    check "systemd-analyze verify the installed units" systemd-analyze verify /usr/lib/systemd/system/ferryd.service /usr/lib/systemd/system/ferryd.socket
fi
# (deb-systemd-helper links to /lib/systemd/system, the same directory on a merged /usr.)
check "ferryd.service enabled (multi-user.target.wants)" test "$(readlink -f /etc/systemd/system/multi-user.target.wants/ferryd.service)" \
    = "$(readlink -f /usr/lib/systemd/system/ferryd.service)"
check "ferryd.socket enabled (sockets.target.wants)" test "$(readlink -f /etc/systemd/system/sockets.target.wants/ferryd.socket)" \
    = "$(readlink -f /usr/lib/systemd/system/ferryd.socket)"
check "deb-systemd-helper recorded the enablement (for the purge)" \
    grep -q multi-user.target.wants/ferryd.service /var/lib/systemd/deb-systemd-helper-enabled/ferryd.service.dsh-also
check "nothing started: no /run/ferry/control.sock" test ! -e /run/ferry/control.sock
check "nothing started: no /usr/bin/ferryd process" bash -c '! pgrep -f "^/usr/bin/ferryd" >/dev/null'
# man finds each page; it renders without a warning (man -l: formatted pages are not cached in
# /var/cache/man, where they would outlive the purge).
for page in ferryd.8 ferryctl.1 ferry.toml.5; do
    check "man ${page%.*}(${page##*.}) is installed and renders" bash -c "
        [[ \$(man -w ${page##*.} ${page%.*}) == /usr/share/man/man${page##*.}/$page.gz ]] &&
        MANWIDTH=80 man --warnings -l /usr/share/man/man${page##*.}/$page.gz 2>&1 >/dev/null | (! grep .)"
done
for completion in /usr/share/bash-completion/completions/ferryd /usr/share/bash-completion/completions/ferryctl \
    /usr/share/zsh/vendor-completions/_ferryd /usr/share/zsh/vendor-completions/_ferryctl \
    /usr/share/fish/vendor_completions.d/ferryd.fish /usr/share/fish/vendor_completions.d/ferryctl.fish; do
    check "completion $completion" test -s "$completion"
done
check "the bash completion loads" bash -c 'source /usr/share/bash-completion/completions/ferryctl && complete -p ferryctl >/dev/null'
end_of_phase "install checks"

echo "== the shipped configuration"
# The example reads its token through systemd's LoadCredential=: without it, that is the one problem.
check "check-config without the token: exit 78, only the credential missing" bash -c '
    output=$(ferryd check-config --config /etc/ferry/ferry.toml 2>&1); status=$?
    [[ $status -eq 78 ]] && [[ $(grep -c "^/etc/ferry/ferry.toml:" <<<"$output") -eq 1 ]] && grep -q "credential:media-token" <<<"$output"'
# The README's first step, then the check install.sh tells the administrator to run.
(umask 077 && echo "test-token" >/etc/ferry/credentials/media-token)
check "check-config with the token (CREDENTIALS_DIRECTORY as systemd sets it)" \
    quiet env CREDENTIALS_DIRECTORY=/etc/ferry/credentials ferryd check-config --config /etc/ferry/ferry.toml
# As the service runs it: the ferry user reads the 0640 root:ferry file and systemd's private copy
# of the credential (ferry-admin, the control_group, must exist for that).
install -d -m 0700 -o ferry -g ferry "$work/credentials"
install -m 0400 -o ferry -g ferry /etc/ferry/credentials/media-token "$work/credentials/media-token"
check "check-config as the ferry user" \
    quiet env --chdir=/ setpriv --reuid=ferry --regid=ferry --init-groups env CREDENTIALS_DIRECTORY="$work/credentials" \
    ferryd check-config --config /etc/ferry/ferry.toml
end_of_phase "configuration checks"

echo "== upgrade"
echo "# changed by deb-test" >>/etc/ferry/ferry.toml
touch /var/lib/ferry/queue-marker
check "reinstall the same version (dpkg -i: postinst configure $version)" logged "$work/reinstall.log" dpkg -i "${include_docs[@]}" "$DEB"
# A bumped version of the same package: an upgrade as dpkg sees it.
bumped=${version}+debtest1
dpkg-deb -R "$DEB" "$work/bumped"
sed -i "s/^Version: .*/Version: $bumped/" "$work/bumped/DEBIAN/control"
dpkg-deb --root-owner-group -Zgzip -z1 --build "$work/bumped" "$work/ferry_$bumped.deb" >/dev/null
# The administrator disables the service (what systemctl disable does to it), which an upgrade keeps.
rm /etc/systemd/system/multi-user.target.wants/ferryd.service
check "upgrade to $bumped (dpkg -i)" logged "$work/upgrade.log" dpkg -i "${include_docs[@]}" "$work/ferry_$bumped.deb"
check "dpkg says $bumped is installed" test "$(dpkg-query -W -f='${Version}' ferry)" = "$bumped"
check "the changed ferry.toml survived the upgrades" grep -qx '# changed by deb-test' /etc/ferry/ferry.toml
expect_mode /etc/ferry/ferry.toml 640 root:ferry
check "the queue directory survived the upgrades" test -e /var/lib/ferry/queue-marker
check "the disabled ferryd.service stayed disabled" test ! -e /etc/systemd/system/multi-user.target.wants/ferryd.service
check "ferryd.socket is still enabled" test -L /etc/systemd/system/sockets.target.wants/ferryd.socket
check "the upgrade did not print the fresh-install note" bash -c "! grep -q 'systemctl start ferryd' '$work/upgrade.log'"
end_of_phase upgrade
# So that the purge has both links to remove (deb-systemd-helper runs only for a package's scripts).
DPKG_MAINTSCRIPT_PACKAGE=ferry deb-systemd-helper enable ferryd.service >/dev/null

echo "== remove (dpkg -r)"
echo "waiting for its upload" >/var/spool/ferry/media/photo.jpg
check "dpkg -r ferry" logged "$work/remove.log" dpkg -r ferry
for path in /usr/bin/ferryd /usr/bin/ferryctl /usr/lib/systemd/system/ferryd.service /usr/lib/sysusers.d/ferry.conf \
    /usr/share/man/man8/ferryd.8.gz /usr/share/doc/ferry; do
    check "removed: $path" absent "$path"
done
check "kept until purge: /etc/ferry/ferry.toml (a conffile)" grep -qx '# changed by deb-test' /etc/ferry/ferry.toml
check "kept until purge: the queue, /var/lib/ferry" test -e /var/lib/ferry/queue-marker
check "dpkg says config-files" test "$(dpkg-query -W -f='${Status}' ferry)" = "deinstall ok config-files"
end_of_phase remove

echo "== purge (dpkg -P)"
check "dpkg -P ferry" logged "$work/purge.log" dpkg -P ferry
status=$(dpkg-query -W -f='${Status}' ferry 2>/dev/null) || true
check "dpkg no longer knows ferry" test "${status:-unknown ok not-installed}" = "unknown ok not-installed"
for path in /etc/ferry/ferry.toml /var/lib/ferry /run/ferry /var/spool/ferry/media/.sent /var/spool/ferry/media/.failed \
    '/etc/systemd/system/*/ferryd.*' '/var/lib/systemd/deb-systemd-helper-enabled/ferryd.*' \
    '/var/lib/systemd/deb-systemd-helper-enabled/*/ferryd.*' '/var/lib/systemd/deb-systemd-helper-masked/ferryd.*' \
    '/var/lib/dpkg/info/ferry.*'; do
    check "purged: $path" absent "$path"
done
# What stays, on purpose: the user and groups (Debian never removes a system user: its id may still
# own files and must not be reused), and what was not the package's: the producer's file waiting in
# the spool (postrm says it kept the spool) and the administrator's token.
check "kept: user ferry" quiet getent passwd ferry
check "kept: groups ferry-admin and ferry-producers" quiet getent group ferry-admin ferry-producers
check "kept: the file waiting in the spool" test -s /var/spool/ferry/media/photo.jpg
check "the postrm said it kept /var/spool/ferry" grep -q 'kept /var/spool/ferry' "$work/purge.log"
check "kept: the administrator's /etc/ferry/credentials/media-token" test -s /etc/ferry/credentials/media-token
cat >"$work/paths-expected" <<'EOF'
/etc/ferry
/etc/ferry/credentials
/etc/ferry/credentials/media-token
/var/spool/ferry
/var/spool/ferry/media
/var/spool/ferry/media/photo.jpg
EOF
LC_ALL=C sort -u "$work/paths-before" "$work/paths-expected" >"$work/paths-allowed"
ferry_paths >"$work/paths-after"
check "nothing else named ferry is left in /etc /usr /var /run /opt" cmp -s "$work/paths-allowed" "$work/paths-after" \
    || true
diff "$work/paths-allowed" "$work/paths-after" || true
# Once those are gone too, a purge leaves no directory behind.
rm -rf /var/spool/ferry /etc/ferry
end_of_phase purge

echo "== sizes"
stage=$work/sizes
dpkg-deb -x "$DEB" "$stage"
echo "package $(basename "$DEB"): $(stat -c %s "$DEB") bytes, installed size $(dpkg-deb -f "$DEB" Installed-Size) KiB"
echo "installed (stripped): ferryd $(stat -c %s "$stage/usr/bin/ferryd") bytes, ferryctl $(stat -c %s "$stage/usr/bin/ferryctl") bytes"
if [[ -x .build/release/ferryd ]]; then
    echo "unstripped release build: ferryd $(stat -c %s .build/release/ferryd) bytes, ferryctl $(stat -c %s .build/release/ferryctl) bytes"
fi
echo "deb-test: $passed passed, $failed failed"
((failed == 0))
