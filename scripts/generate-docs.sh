#!/usr/bin/env bash
# Generates the manual pages and shell completions that come from the code, so they cannot drift:
#   OUT/man/ferryd.8, OUT/man/ferryctl.1   from the ArgumentParser definitions (swift-argument-parser's
#                                          generate-manual plugin, debug build)
#   OUT/man/ferry.toml.5                   from FerryConfig's ConfigurationReference (ferry-docs), the
#                                          source README.md's configuration tables come from too
#   OUT/completions/{bash,zsh,fish}/…      each program's --generate-completion-script
#
#   scripts/generate-docs.sh OUT [BIN_DIR]
#
# BIN_DIR: where ferryd and ferryctl are (default: the debug build, built if needed); their completion
# scripts call them back for job ids and spool names. SOURCE_DATE_EPOCH dates the pages (reproducible
# builds); otherwise the last commit's date is used.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/generate-docs.sh OUT [BIN_DIR]}
bin=${2:-}
cd "$root"
mkdir -p "$out/man" "$out/completions/bash" "$out/completions/zsh" "$out/completions/fish"
out=$(cd "$out" && pwd)

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)

scratch=$root/.build
swift build --product ferry-docs >/dev/null
"$scratch/debug/ferry-docs" manual --date "$date" >"$out/man/ferry.toml.5"

# The plugin builds every executable (debug) and writes one page per program; all get one section, so
# ferryd's is renamed to section 8. Blank lines (between paragraphs of a discussion) become .Pp, which
# man --warnings (and lintian) would otherwise report.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift package --disable-sandbox generate-manual --configuration debug --date "$date" --section 1 \
    --authors "The Ferry authors" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
pages=$scratch/plugins/GenerateManual/outputs
sed -e 's/^$/.Pp/' "$pages/ferryctl/ferryctl.1" >"$out/man/ferryctl.1"
sed -e 's/^$/.Pp/' -e 's/^\.Dt FERRYD 1$/.Dt FERRYD 8/' "$pages/ferryd/ferryd.1" >"$out/man/ferryd.8"

if [[ -z $bin ]]; then
    swift build --product ferryd >/dev/null
    swift build --product ferryctl >/dev/null
    bin=$scratch/debug
fi
for program in ferryd ferryctl; do
    "$bin/$program" --generate-completion-script bash >"$out/completions/bash/$program"
    "$bin/$program" --generate-completion-script zsh >"$out/completions/zsh/_$program"
    "$bin/$program" --generate-completion-script fish >"$out/completions/fish/$program.fish"
done
echo "generated in $out: man/{ferryd.8,ferryctl.1,ferry.toml.5}, completions/{bash,zsh,fish}"
