#!/bin/sh
# The performance figures of issue 12, side by side in one run
# (docs/benchmarks.md, "Issue 12"):
#
#   1. audited reads: wrk against a hello-world net/http handler and against
#      GET /api/v1/endpoints/{id} of a seeded appliance (50 keys), same wrk
#      settings, alternating, twice each;
#   2. the appliance's RSS 40 s and 3 min after that load;
#   3. restic backups of 1 GiB through /agent/restic/<id>/ and to
#      rest-server, alternating (e2e BenchmarkResticVsRestServer).
#
# Needs wrk and restic (Debian), and a rest-server binary for 3:
#
#   REST_SERVER=/path/to/rest-server sh docs/bench/side-by-side.sh
#
# rest-server is neither on the Go module proxy nor in Debian; build it from
# its source (github.com/restic/rest-server). Without REST_SERVER, part 3 is
# left out. WORK (default /tmp/backstop-bench) holds the builds and data.
set -eu
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/backstop-bench}
WRK="wrk -t2 -c64 -d20s"
mkdir -p "$WORK"

echo "== builds (CGO_ENABLED=0, as released)"
CGO_ENABLED=0 go build -trimpath -o "$WORK/backstop" .
CGO_ENABLED=0 go build -trimpath -o "$WORK/hello" ./docs/bench/hello

echo "== seed: 10,000 endpoints, 1,000,000 audit rows, 50 keys"
rm -rf "$WORK/data"
"$WORK/backstop" admin seed-bench --data-dir "$WORK/data" --endpoints 10000 --audit 1000000 --keys 50 \
	--keys-file "$WORK/keys.txt" --ids-file "$WORK/ids.txt" >/dev/null

"$WORK/hello" -listen 127.0.0.1:18081 &
HELLO=$!
SERVICE_LISTEN=127.0.0.1:18080 SERVICE_DATA_DIR="$WORK/data" SERVICE_API_RATE_LIMIT=100000000 \
	SERVICE_LOG_LEVEL=warn "$WORK/backstop" serve 2>"$WORK/serve.log" &
APPLIANCE=$!
trap 'kill $HELLO $APPLIANCE 2>/dev/null || true' EXIT
sleep 3

rps() { awk '/Requests\/sec/ {print $2}'; }
for round in 1 2; do
	h=$($WRK http://127.0.0.1:18081/ | rps)
	a=$(KEYS_FILE="$WORK/keys.txt" IDS_FILE="$WORK/ids.txt" $WRK -s docs/bench/audited-reads.lua http://127.0.0.1:18080 | rps)
	echo "round $round: hello-world $h req/s, audited GET /api/v1/endpoints/{id} $a req/s, ratio $(echo "$a $h" | awk '{printf "%.3f", $1/$2}')"
done

rss() { awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %s kB  ", $1, $2}' /proc/$APPLIANCE/status; echo; }
sleep 40
echo "RSS 40 s after the load:  $(rss)"
sleep 140
echo "RSS 3 min after the load: $(rss)"
kill $HELLO $APPLIANCE
wait 2>/dev/null || true

if [ -n "${REST_SERVER:-}" ]; then
	echo "== restic: 1 GiB through the appliance vs rest-server"
	mkdir -p "$WORK/corpus"
	BACKSTOP_BENCH_REST_SERVER="$REST_SERVER" BACKSTOP_BENCH_CORPUS_DIR="$WORK/corpus" \
		go test -run '^$' -bench ResticVsRestServer -benchtime 1x -timeout 60m ./e2e/ | grep -E 'Benchmark|restic_bench'
fi
