// Package agent is the Backstop agent: it enrolls a machine with the
// appliance, heartbeats, and runs backups and restores with restic against
// the endpoint's append-only repository on the appliance.
//
// It runs on customers' machines and shares only the wire types of
// /agent/v1 (package agentapi/wire) with the appliance; it never imports the
// appliance's domain or storage.
//
// Everything the agent keeps lives in its state directory:
//
//	agent.json   who it is: { server, endpointId, secret, repository: { url, password }, restic? } (0600)
//	config.json  the last config fetched, so schedules run while the appliance is unreachable (0600)
//	spool/       finished-run reports not yet accepted by the appliance (0600 each)
//	restic       optional: a restic binary installed beside the agent
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"backstop/agentapi/wire"
)

// Version is the agent's version, set by the program at start-up (the
// appliance and agent are one binary and share a version).
var Version = "0.0.0-dev"

// State is agent.json: the endpoint's identity and repository access. The
// file is documented (CONTRACT §9) so an operator can find and rotate it.
type State struct {
	Server     string          `json:"server"`
	EndpointID string          `json:"endpointId"`
	Secret     string          `json:"secret"`
	Repository wire.Repository `json:"repository"`
	// Restic optionally names the restic binary; empty means the state
	// directory's restic, then PATH.
	Restic string `json:"restic,omitempty"`
	// RepositoryReady records that the repository exists, so init is tried
	// only until the first success.
	RepositoryReady bool `json:"repositoryReady,omitempty"`
}

// ErrNotEnrolled means the state directory holds no agent.json.
var ErrNotEnrolled = errors.New("this machine is not enrolled: run backstop agent enroll --server URL --token TOKEN")

// DefaultStateDir is where the agent keeps its state unless told otherwise.
func DefaultStateDir() string {
	if d := os.Getenv("BACKSTOP_AGENT_STATE_DIR"); d != "" {
		return d
	}
	if runtime.GOOS == "darwin" {
		return "/Library/Application Support/Backstop Agent"
	}
	return "/var/lib/backstop-agent"
}

const stateFile = "agent.json"
const configFile = "config.json"

// LoadState reads agent.json from dir.
func LoadState(dir string) (*State, error) {
	var s State
	if err := readJSON(filepath.Join(dir, stateFile), &s); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotEnrolled
		}
		return nil, err
	}
	if s.Server == "" || s.EndpointID == "" || s.Secret == "" {
		return nil, fmt.Errorf("%s is incomplete: it needs server, endpointId and secret", filepath.Join(dir, stateFile))
	}
	return &s, nil
}

// SaveState writes agent.json atomically with mode 0600.
func SaveState(dir string, s *State) error { return writeJSON(dir, stateFile, s) }

// loadConfig reads the cached config; a missing file is an empty config.
func loadConfig(dir string) (wire.Config, error) {
	var c wire.Config
	err := readJSON(filepath.Join(dir, configFile), &c)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return withConfigDefaults(c), err
}

func saveConfig(dir string, c wire.Config) error { return writeJSON(dir, configFile, c) }

// withConfigDefaults fills what an older appliance may not send.
func withConfigDefaults(c wire.Config) wire.Config {
	if c.HeartbeatSeconds <= 0 {
		c.HeartbeatSeconds = 60
	}
	if c.ProgressSeconds <= 0 {
		c.ProgressSeconds = 2
	}
	if c.SampleFiles <= 0 {
		c.SampleFiles = 20
	}
	return c
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes dir/name atomically: a 0600 temp file, fsync, rename,
// fsync of the directory, so a crash leaves either the old or the new file.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, name, append(b, '\n'))
}

func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
