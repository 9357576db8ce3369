//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// spawnWatchdog starts bin with args detached from this process: in its
// own session, so it outlives the exit that follows. Under systemd
// (INVOCATION_ID set) it runs through systemd-run as a transient unit,
// because the service's own cgroup is cleaned up when the service restarts.
func spawnWatchdog(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	if os.Getenv("INVOCATION_ID") != "" {
		if sr, err := exec.LookPath("systemd-run"); err == nil {
			cmd = exec.Command(sr, append([]string{"--collect", "--quiet", "--unit=backstop-update-watchdog", bin}, args...)...)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// stopProcess sends SIGTERM, then SIGKILL after grace.
func stopProcess(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !processAlive(pid) {
			return nil
		}
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}
