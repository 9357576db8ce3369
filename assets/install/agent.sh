#!/bin/sh
# Backstop agent installer (POSIX sh), served by the appliance at /install/agent.sh.
#
#   curl -fsSL https://APPLIANCE/install/agent.sh | sudo sh -s -- --token bse_... [--server URL] [--profile server|client] [--paths /etc,/home]
#
# It detects linux/darwin and amd64/arm64, downloads the agent and restic from
# the same appliance, verifies both against /install/SHA256SUMS before
# installing either, installs them, enrolls this machine with the one-time
# token, and installs a systemd unit (linux) or a launchd daemon (macOS) that
# runs `backstop agent run`.
#
# DESTDIR (the packaging convention): when set, every path written (the
# binary, the state directory with restic and agent.json, the unit or plist)
# is prefixed with "$DESTDIR", root is not required, and systemctl/launchctl
# are NOT run: the tree is for an image or package, whose own system starts
# the service. The unit and plist name the paths as the installed system will
# see them, without "$DESTDIR".
set -eu

SERVER="__BACKSTOP_SERVER__"
TOKEN=""
PROFILE=""
PATHS=""
DESTDIR="${DESTDIR:-}"
DESTDIR="${DESTDIR%/}"

die() { echo "backstop install: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--server) SERVER="${2:-}"; shift 2 ;;
	--token) TOKEN="${2:-}"; shift 2 ;;
	--profile) PROFILE="${2:-}"; shift 2 ;;
	--paths) PATHS="${2:-}"; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ -n "$TOKEN" ] || die "--token is required (create one in the web interface)"
[ -n "$SERVER" ] || die "--server is required"
[ -n "$DESTDIR" ] || [ "$(id -u)" = 0 ] || die "run as root (sudo sh)"

case "$(uname -s)" in
Linux) OS=linux ;;
Darwin) OS=darwin ;;
*) die "unsupported operating system $(uname -s) (linux and darwin only)" ;;
esac
case "$(uname -m)" in
x86_64 | amd64) ARCH=amd64 ;;
aarch64 | arm64) ARCH=arm64 ;;
*) die "unsupported architecture $(uname -m) (amd64 and arm64 only)" ;;
esac

if [ "$OS" = darwin ]; then
	STATE_DIR="/Library/Application Support/Backstop Agent"
	SERVICE_FILE=/Library/LaunchDaemons/dev.backstop.agent.plist
else
	STATE_DIR=/var/lib/backstop-agent
	SERVICE_FILE=/etc/systemd/system/backstop-agent.service
fi
BIN=/usr/local/bin/backstop

fetch() { # url file
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL -o "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1"
	else
		die "curl or wget is needed"
	fi
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

fetch "$SERVER/install/SHA256SUMS" "$TMP/SHA256SUMS" || die "cannot download $SERVER/install/SHA256SUMS"

# download_verified NAME: fetch /install/bin/NAME into $TMP and check it
# against SHA256SUMS. Returns 1 when the appliance does not offer NAME; exits
# on a failed download or a checksum mismatch.
download_verified() {
	want=$(awk -v n="$1" '$2 == n { print $1 }' "$TMP/SHA256SUMS")
	[ -n "$want" ] || return 1
	fetch "$SERVER/install/bin/$1" "$TMP/$1" || die "cannot download $1"
	got=$(sha256 "$TMP/$1")
	[ "$got" = "$want" ] || die "checksum mismatch for $1 (got $got, want $want)"
	chmod 0755 "$TMP/$1" || die "cannot chmod $TMP/$1"
}

# Both downloads are verified before anything is installed, so a tampered or
# corrupted file leaves the machine as it was.
download_verified "backstop-$OS-$ARCH" || die "the appliance offers no agent for $OS/$ARCH"
HAVE_RESTIC=""
if download_verified "restic-$OS-$ARCH"; then
	HAVE_RESTIC=1
fi

mkdir -p "$DESTDIR$(dirname "$BIN")" "$DESTDIR$STATE_DIR"
chmod 0700 "$DESTDIR$STATE_DIR"
mv "$TMP/backstop-$OS-$ARCH" "$DESTDIR$BIN"
if [ -n "$HAVE_RESTIC" ]; then
	mv "$TMP/restic-$OS-$ARCH" "$DESTDIR$STATE_DIR/restic"
elif ! command -v restic >/dev/null 2>&1; then
	echo "backstop install: warning: the appliance offers no restic for $OS/$ARCH and none is on PATH;" >&2
	echo "  install restic, or backups will fail with agent.tool_missing" >&2
fi

# Enrollment writes agent.json itself, so it is given the directory it can
# write now ("$DESTDIR$STATE_DIR"); the unit below names "$STATE_DIR", the
# path the installed system will see. agent.json records no state-dir path,
# so the move from one to the other changes nothing in it.
if [ -f "$DESTDIR$STATE_DIR/agent.json" ]; then
	echo "already enrolled ($DESTDIR$STATE_DIR/agent.json exists); keeping that enrollment"
else
	set -- --server "$SERVER" --token "$TOKEN" --state-dir "$DESTDIR$STATE_DIR"
	[ -z "$PROFILE" ] || set -- "$@" --profile "$PROFILE"
	[ -z "$PATHS" ] || set -- "$@" --paths "$PATHS"
	# The binary stays installed on failure: a re-run with a new token
	# enrolls; no service is installed until enrollment succeeded.
	"$DESTDIR$BIN" agent enroll "$@" ||
		die "enrollment with $SERVER failed (see above); tokens are one-time and expire: create a new one and run this again"
fi

mkdir -p "$DESTDIR$(dirname "$SERVICE_FILE")"
if [ "$OS" = linux ]; then
	cat >"$DESTDIR$SERVICE_FILE" <<UNIT
[Unit]
Description=Backstop backup agent
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=$BIN agent run --state-dir $STATE_DIR
Restart=always
RestartSec=10
# SIGTERM: a running backup is reported as interrupted, not failed.
KillSignal=SIGTERM
TimeoutStopSec=60

[Install]
WantedBy=multi-user.target
UNIT
else
	cat >"$DESTDIR$SERVICE_FILE" <<PLIST
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key><string>dev.backstop.agent</string>
	<key>ProgramArguments</key>
	<array><string>$BIN</string><string>agent</string><string>run</string><string>--state-dir</string><string>$STATE_DIR</string></array>
	<key>RunAtLoad</key><true/>
	<key>KeepAlive</key><true/>
	<key>StandardErrorPath</key><string>/var/log/backstop-agent.log</string>
</dict>
</plist>
PLIST
fi
chmod 0644 "$DESTDIR$SERVICE_FILE"

if [ -n "$DESTDIR" ]; then
	echo "backstop agent installed under $DESTDIR ($SERVICE_FILE written; service manager not run)"
	exit 0
fi
if [ "$OS" = linux ]; then
	systemctl daemon-reload
	systemctl enable backstop-agent.service
	# restart, not enable --now: a re-run that upgraded the binary must
	# replace the running agent.
	systemctl restart backstop-agent.service
else
	launchctl unload "$SERVICE_FILE" 2>/dev/null || true
	launchctl load -w "$SERVICE_FILE"
fi
echo "backstop agent installed and running"
