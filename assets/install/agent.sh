#!/bin/sh
# Backstop agent installer (POSIX sh), served by the appliance at /install/agent.sh.
#
#   curl -fsSL https://APPLIANCE/install/agent.sh | sudo sh -s -- --token bse_... [--server URL] [--profile server|client] [--paths /etc,/home]
#
# It detects linux/darwin and amd64/arm64, downloads the agent and restic from
# the same appliance, verifies both against /install/SHA256SUMS, installs them,
# enrolls this machine with the one-time token, and installs a systemd unit
# (linux) or a launchd daemon (macOS) that runs `backstop agent run`.
set -eu

SERVER="__BACKSTOP_SERVER__"
TOKEN=""
PROFILE=""
PATHS=""

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
[ "$(id -u)" = 0 ] || die "run as root (sudo sh)"

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
else
	STATE_DIR=/var/lib/backstop-agent
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

# download_verified NAME: fetch /install/bin/NAME and check it against SHA256SUMS.
download_verified() {
	want=$(awk -v n="$1" '$2 == n { print $1 }' "$TMP/SHA256SUMS")
	[ -n "$want" ] || return 1
	fetch "$SERVER/install/bin/$1" "$TMP/$1" || die "cannot download $1"
	got=$(sha256 "$TMP/$1")
	[ "$got" = "$want" ] || die "checksum mismatch for $1 (got $got, want $want)"
	chmod 0755 "$TMP/$1"
}

download_verified "backstop-$OS-$ARCH" || die "the appliance offers no agent for $OS/$ARCH"
mkdir -p "$(dirname "$BIN")" "$STATE_DIR"
chmod 0700 "$STATE_DIR"
mv "$TMP/backstop-$OS-$ARCH" "$BIN"

if download_verified "restic-$OS-$ARCH"; then
	mv "$TMP/restic-$OS-$ARCH" "$STATE_DIR/restic"
elif ! command -v restic >/dev/null 2>&1; then
	echo "backstop install: warning: the appliance offers no restic for $OS/$ARCH and none is on PATH;" >&2
	echo "  install restic, or backups will fail with agent.tool_missing" >&2
fi

if [ -f "$STATE_DIR/agent.json" ]; then
	echo "already enrolled ($STATE_DIR/agent.json exists); keeping that enrollment"
else
	set -- --server "$SERVER" --token "$TOKEN" --state-dir "$STATE_DIR"
	[ -z "$PROFILE" ] || set -- "$@" --profile "$PROFILE"
	[ -z "$PATHS" ] || set -- "$@" --paths "$PATHS"
	"$BIN" agent enroll "$@"
fi

if [ "$OS" = linux ]; then
	cat >/etc/systemd/system/backstop-agent.service <<UNIT
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
	systemctl daemon-reload
	systemctl enable --now backstop-agent.service
else
	PLIST=/Library/LaunchDaemons/dev.backstop.agent.plist
	cat >"$PLIST" <<PLIST
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
	chmod 0644 "$PLIST"
	launchctl unload "$PLIST" 2>/dev/null || true
	launchctl load -w "$PLIST"
fi
echo "backstop agent installed and running"
