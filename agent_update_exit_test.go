package main

import (
	"errors"
	"fmt"
	"testing"

	"backstop/agent"
)

// After a self-update the agent exits with its own status so that systemd
// and launchd restart it whatever their restart policy.
func TestExitCodeAfterAgentSelfUpdate(t *testing.T) {
	if got := exitCode(fmt.Errorf("agent run: %w", agent.ErrRestart)); got != agent.RestartExitCode {
		t.Fatalf("exit code %d, want %d", got, agent.RestartExitCode)
	}
	if got := exitCode(errors.New("boom")); got != 1 {
		t.Fatalf("other errors: %d", got)
	}
}
