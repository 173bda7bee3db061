#!/usr/bin/env bash
# Builds the Debian package .build/deb/ferry_<version>_<arch>.deb (make deb):
#   - ferryd and ferryctl from `swift build -c release --static-swift-stdlib` (the Swift runtime
#     linked in, so the package needs no toolchain; no $ORIGIN run path; -z now, the BIND_NOW
#     hardening Debian's dpkg-buildflags asks for), stripped copies (the originals stay in
#     .build/release);
#   - staged by scripts/install.sh (PREFIX=/usr: units in /usr/lib/systemd/system, sysusers.d and
#     tmpfiles.d files, /etc/ferry/ferry.toml as a conffile, manual pages, completions) with the
#     manual pages and completions of scripts/generate-docs.sh;
#   - packaging/debian/: the control template, maintainer scripts, copyright, changelog (whose top
#     entry gives the version and, as SOURCE_DATE_EPOCH, every date in the package) and the lintian
#     overrides;
#   - Depends from dpkg-shlibdeps (the shared libraries the binaries really load), md5sums,
#     Installed-Size; files owned by root (dpkg-deb --root-owner-group).
#
#   scripts/build-deb.sh [--no-build | --build-only]
#
# --no-build packages .build/release as it is (it must be a --static-swift-stdlib build);
# --build-only builds it and stops.
# FERRY_SCRATCH=DIR builds in DIR instead of .build (swift build --scratch-path), so that the
# package can be built while another build or test run holds .build (CI does, in the background).
# Needs dpkg-dev and binutils: scripts/install-deps.sh --deb installs them. Prints the path of the
# package on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

build=true
build_only=false
for argument in "$@"; do
    case $argument in
        --no-build) build=false ;;
        --build-only) build_only=true ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-deb: unknown argument $argument (see --help)" >&2; exit 64 ;;
    esac
done

fail() { echo "build-deb: $*" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog strip objdump gzip; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing; run scripts/install-deps.sh --deb"
done

packaging=$root/packaging/debian
changelog=$packaging/changelog
version=$(dpkg-parsechangelog -l "$changelog" -S Version)
upstream_version=${version%-*}
architecture=$(dpkg --print-architecture)
# Every date in the package (manual pages, file times, the archive's members) is the changelog's.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -l "$changelog" -S Timestamp)}
export SOURCE_DATE_EPOCH

# The copyright file must stop saying that no license is granted once the repository has one.
if compgen -G "$root/LICEN[CS]E*" >/dev/null && grep -q 'no-license-granted' "$packaging/copyright"; then
    fail "the repository has a license file now: put its license in packaging/debian/copyright's 'Files: *' paragraph"
fi

scratch=${FERRY_SCRATCH:-$root/.build}
release=$scratch/release
swift_flags=(-c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now)
[[ -z ${FERRY_SCRATCH:-} ]] || swift_flags+=(--scratch-path "$scratch")
if $build; then
    swift build "${swift_flags[@]}" --product ferryd
    swift build "${swift_flags[@]}" --product ferryctl
fi
$build_only && exit 0
for binary in ferryd ferryctl; do
    [[ -x $release/$binary ]] || fail "$release/$binary is missing; drop --no-build"
    # With the runtime linked in, no Swift library may be left among the shared ones, and no run
    # path (lintian: custom-library-search-path) is needed.
    if objdump -p "$release/$binary" | awk '$1 == "NEEDED" {print $2}' | grep -E '^lib(swift|Foundation|dispatch|BlocksRuntime|_)' >&2; then
        fail "$release/$binary needs the Swift runtime above: build it with swift build ${swift_flags[*]} (drop --no-build)"
    fi
    if objdump -p "$release/$binary" | grep -E '^ *(RPATH|RUNPATH) ' >&2; then
        fail "$release/$binary has the run path above: build it with swift build ${swift_flags[*]} (drop --no-build)"
    fi
done

# The SwiftPM packages whose code is in the binaries: the checkout that each linked module's sources
# (a Swift module's sources list, a C module's dependency file) come from.
linked_checkouts() {
    local module_dir source
    sed -E -e "s#^'##" -e 's#^(.*/[^/]+\.build)/.*#\1#' "$release/ferryd.product/Objects.LinkFileList" \
        "$release/ferryctl.product/Objects.LinkFileList" | sort -u | while read -r module_dir; do
        if [[ -f $module_dir/sources ]]; then
            source=$(head -n 1 "$module_dir/sources")
        else
            # "dependencies: SOURCE HEADER…", wrapped with backslashes.
            source=$(find "$module_dir" -name '*.d' -exec cat {} \; -quit | tr -s ' \\\n' '\n' | sed -n 2p)
        fi
        source=${source#\'}   # a path with a space is quoted
        case $source in
            "$scratch"/checkouts/*) source=${source#"$scratch"/checkouts/}; echo "${source%%/*}" ;;
            "$root"/Sources/*) ;;
            *) echo "build-deb: cannot tell which package the linked module ${module_dir##*/} comes from (${source:-no sources})" >&2; return 1 ;;
        esac
    done | sort -u
}
# The copyright file must cover every one of them.
linked=$(linked_checkouts) || exit 1
for name in $linked; do
    grep -Eq "^(Files:)? +\\.build/checkouts/$name/\\*\$" "$packaging/copyright" \
        || fail "packaging/debian/copyright has no paragraph for $name, whose code is in the binaries (.build/checkouts/$name): add one with its license"
done

built_version=$("$release/ferryd" --version)
[[ $built_version == "$upstream_version" ]] \
    || fail "ferryd --version says $built_version but packaging/debian/changelog's top entry is $version: add a changelog entry (ferry ($built_version-1) …)"

out=$root/.build/deb
work=$out/work
rm -rf "$work"
mkdir -p "$work/bin" "$work/docs" "$work/debian"
# The layout dpkg-shlibdeps expects: debian/control, and the package's tree in debian/ferry.
stage=$work/debian/ferry
package=$out/ferry_${version}_${architecture}.deb
umask 022

# Stripped copies, as dh_strip makes them: no symbols, no .comment or .note section.
for binary in ferryd ferryctl; do
    strip --remove-section=.comment --remove-section=.note -o "$work/bin/$binary" "$release/$binary"
done
"$work/bin/ferryd" --version >/dev/null || fail "the stripped ferryd does not run"

# The pages come from a debug build in .build (usually there already), whatever FERRY_SCRATCH says.
scripts/generate-docs.sh "$work/docs" "$work/bin" >/dev/null
scripts/install.sh DESTDIR="$stage" PREFIX=/usr BIN_DIR="$work/bin" DOCS_DIR="$work/docs" >"$work/install.log" \
    || { cat "$work/install.log" >&2; fail "scripts/install.sh failed"; }

doc=$stage/usr/share/doc/ferry
install -m 0644 "$packaging/copyright" "$doc/copyright"
gzip -9n <"$changelog" >"$doc/changelog.Debian.gz"
install -D -m 0644 "$packaging/lintian-overrides" "$stage/usr/share/lintian/overrides/ferry"

install -d -m 0755 "$stage/DEBIAN"
# Depends: the packages of the shared libraries the binaries load.
printf 'Source: ferry\n\nPackage: ferry\nArchitecture: any\n' >"$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O -e"$stage/usr/bin/ferryd" -e"$stage/usr/bin/ferryctl")
shlibs=${shlibs#shlibs:Depends=}
[[ -n $shlibs ]] || fail "dpkg-shlibdeps found no shared library"

for script in postinst prerm postrm; do
    install -m 0755 "$packaging/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find etc -type f -printf '/%p\n' | LC_ALL=C sort) >"$stage/DEBIAN/conffiles"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort \
    | grep -v '^etc/' | xargs -d '\n' md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"
# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up, and one per directory.
installed_size=$(cd "$stage" && find . -mindepth 1 -path ./DEBIAN -prune -o -printf '%y %s\n' \
    | awk '$1 == "f" { kib += int(($2 + 1023) / 1024) } $1 != "f" { kib += 1 } END { print kib }')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$architecture/" -e "s/@INSTALLED_SIZE@/$installed_size/" \
    -e "s/@SHLIBS_DEPENDS@/$shlibs/" "$packaging/control.in" >"$stage/DEBIAN/control"
chmod 0644 "$stage/DEBIAN/control"

# Reproducible: every file dated from the changelog (dpkg-deb dates the archive's members from
# SOURCE_DATE_EPOCH too), no write bit for group or others.
chmod -R go-w "$stage"
find "$stage" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
rm -f "$package"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$package" >/dev/null

echo "build-deb: Depends: $(sed -n 's/^Depends: //p' "$stage/DEBIAN/control")"
echo "build-deb: sizes: package $(stat -c %s "$package") bytes; installed ferryd $(stat -c %s "$stage/usr/bin/ferryd"), ferryctl $(stat -c %s "$stage/usr/bin/ferryctl") bytes (unstripped: ferryd $(stat -c %s "$release/ferryd"), ferryctl $(stat -c %s "$release/ferryctl"))"
rm -rf "$work"   # the staged tree and the stripped copies: 300 MB the package holds anyway
echo "$package"
