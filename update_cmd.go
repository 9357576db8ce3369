package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/update"
	"backstop/restapi"
	"backstop/store"
)

// exitRestart is the exit status of serve after an update put a new binary
// in place: the supervisor (systemd, Restart=always) starts the new one.
const exitRestart = 75

// errRestart ends serve after an update; main exits with exitRestart.
var errRestart = errors.New("restarting into the updated binary")

// testNotReady, set with -ldflags "-X main.testNotReady=1", builds a binary
// whose /readyz never answers ready. Only the updater's rollback test uses
// it; a release build leaves it empty.
var testNotReady string

// pidFileName, in the data directory, names the serving process; the update
// watchdog ends that process after a rollback so the supervisor restarts it.
const pidFileName = "backstop.pid"

// startUpdater opens the updater. restart is closed when serve must end so
// that the supervisor starts the replaced binary.
func startUpdater(cfg app.Config, db *store.DB, api *restapi.Server, addr string, logger *slog.Logger, restart chan<- struct{}) (*update.Updater, error) {
	pidFile := filepath.Join(cfg.DataDir, pidFileName)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	readyz := readyzURL(addr, cfg.TLS.Mode != "off")
	u := update.NewUpdater(db, update.UpdaterOptions{
		APIURL: cfg.Update.APIURL, Repository: cfg.Update.Repository, Logger: logger, Ready: api.Ready,
		Restart: func(exe string) error {
			err := spawnWatchdog(update.PreviousPath(exe), []string{"admin", "update-watchdog",
				"--exe", exe, "--readyz", readyz, "--timeout", cfg.Update.RollbackAfter.String(),
				"--wait-pid", strconv.Itoa(os.Getpid()), "--pid-file", pidFile})
			if err != nil {
				return fmt.Errorf("starting the watchdog: %w", err)
			}
			close(restart)
			return nil
		},
	})
	return u, u.Open()
}

// readyzURL is /readyz on the loopback address of the listener.
func readyzURL(addr string, tls bool) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/readyz"
}

// adminUpdateWatchdog is run by serve, from the previous binary, just before
// it exits after an update. It waits for that process to end, then gives the
// new binary --timeout to answer /readyz with 200; if it does not, it puts
// the previous binary back and ends the new process (named by --pid-file)
// so that the supervisor starts the previous version again.
func adminUpdateWatchdog(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	exe := fs.String("exe", "", "the updated binary")
	readyz := fs.String("readyz", "", "URL of /readyz")
	timeout := fs.Duration("timeout", 60*time.Second, "how long the new version has to become ready")
	waitPID := fs.Int("wait-pid", 0, "the process that applied the update")
	pidFile := fs.String("pid-file", "", "pid file of the serving process")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *exe == "" || *readyz == "" || *pidFile == "" {
		return usageError{"admin update-watchdog: --exe, --readyz and --pid-file are required"}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil)).With("component", "update-watchdog")
	for *waitPID > 0 && processAlive(*waitPID) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // our own loopback listener
	}}
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(*readyz); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && newProcessServing(*pidFile, *waitPID) {
				log.Info("the updated version is ready")
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	log.Error("the updated version was not ready in time; rolling back", slog.Duration("timeout", *timeout))
	if err := update.Rollback(*exe); err != nil {
		return err
	}
	if pid := readPID(*pidFile); pid > 0 && pid != *waitPID && pid != os.Getpid() {
		if err := stopProcess(pid, 10*time.Second); err != nil {
			log.Error("ending the updated process failed", slog.Int("pid", pid), slog.Any("error", err))
			return err
		}
	}
	log.Info("the previous binary is back; the supervisor restarts it")
	return nil
}

// newProcessServing reports whether the pid file names a process other
// than the one that applied the update (the answer to /readyz is then the
// new binary's).
func newProcessServing(pidFile string, oldPID int) bool {
	pid := readPID(pidFile)
	return pid > 0 && pid != oldPID
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
