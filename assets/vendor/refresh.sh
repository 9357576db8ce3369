#!/bin/sh
# Refreshes the vendored front-end libraries from the npm registry.
# Usage (from the repository root): sh assets/vendor/refresh.sh [PREACT_VERSION] [HTM_VERSION]
# Review the diff, update the versions in README.md, then run the assets tests.
set -eu
PREACT=${1:-11.2.0}
HTM=${2:-3.1.1}
DEST=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
npm pack --silent "preact@$PREACT" "htm@$HTM" >/dev/null
mkdir preact htm
tar xzf "preact-$PREACT.tgz" -C preact
tar xzf "htm-$HTM.tgz" -C htm
# The browser has no import map (CSP forbids inline scripts), so the bare
# "preact" specifier in hooks becomes a relative one; source-map comments
# are dropped because the maps are not shipped.
sed '/sourceMappingURL/d' preact/package/dist/preact.mjs >"$DEST/preact.mjs"
sed -e 's/from"preact"/from".\/preact.mjs"/' -e '/sourceMappingURL/d' preact/package/hooks/dist/hooks.mjs >"$DEST/hooks.mjs"
sed '/sourceMappingURL/d' htm/package/dist/htm.mjs >"$DEST/htm.mjs"
cp preact/package/LICENSE "$DEST/LICENSE-preact"
cp htm/package/LICENSE "$DEST/LICENSE-htm"
echo "vendored preact $PREACT and htm $HTM into $DEST"
