package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"backstop/agentapi/wire"
)

// EnrollOptions are the inputs of `backstop agent enroll`.
type EnrollOptions struct {
	Server   string
	Token    string
	StateDir string
	Profile  string   // "" keeps the token's profile
	Paths    []string // initial backup paths, optional
	Restic   string   // restic binary to record in agent.json, optional
}

// Enroll exchanges a one-time token for the endpoint's identity and writes
// agent.json and config.json (0600) in the state directory. It refuses to
// overwrite an existing enrollment: re-enrolling would orphan the endpoint
// and its repository, so the operator must remove agent.json on purpose.
func Enroll(ctx context.Context, o EnrollOptions) (*wire.EnrollResponse, error) {
	if o.Server == "" || o.Token == "" {
		return nil, errors.New("enroll needs --server and --token")
	}
	if _, err := LoadState(o.StateDir); err == nil {
		return nil, fmt.Errorf("%s/%s exists: this machine is already enrolled (remove the file to enroll again)", o.StateDir, stateFile)
	}
	host, _ := os.Hostname()
	c := &Client{Server: strings.TrimRight(o.Server, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
	resp, err := c.Enroll(ctx, wire.EnrollRequest{
		Token: o.Token, Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH,
		Profile: o.Profile, AgentVersion: Version, Paths: o.Paths,
	})
	if err != nil {
		return nil, err
	}
	st := &State{Server: c.Server, EndpointID: resp.EndpointID, Secret: resp.Secret, Repository: resp.Repository, Restic: o.Restic}
	if err := SaveState(o.StateDir, st); err != nil {
		return nil, fmt.Errorf("enrolled as %s but saving the state failed: %w", resp.EndpointID, err)
	}
	if err := saveConfig(o.StateDir, withConfigDefaults(resp.Config)); err != nil {
		return nil, err
	}
	return resp, nil
}
