package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"backstop/agent"
	"backstop/agentapi/wire"
	"backstop/app"

	"github.com/mattn/go-isatty"
)

// agentCommand dispatches `backstop agent enroll | run | backup`.
func agentCommand(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return usageError{"agent: missing command: enroll | run | backup"}
	}
	agent.Version = app.Version
	fs := flag.NewFlagSet("agent "+args[0], flag.ContinueOnError)
	stateDir := fs.String("state-dir", agent.DefaultStateDir(), "agent state directory (agent.json, spool)")
	logger := slog.New(slog.NewTextHandler(e.stderr, nil)).With("component", "agent")
	switch args[0] {
	case "enroll":
		server := fs.String("server", "", "appliance address, e.g. https://backup.example.com")
		token := fs.String("token", "", "one-time enrollment token")
		profile := fs.String("profile", "", "server or client (default: the token's)")
		paths := fs.String("paths", "", "comma-separated paths to back up")
		restic := fs.String("restic", "", "restic binary (default: state dir, then PATH)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *server == "" || *token == "" {
			return usageError{"agent enroll: --server and --token are required"}
		}
		if *profile != "" && *profile != app.ProfileServer && *profile != app.ProfileClient {
			return usageError{"agent enroll: --profile must be server or client"}
		}
		resp, err := agent.Enroll(ctx, agent.EnrollOptions{Server: *server, Token: *token, StateDir: *stateDir,
			Profile: *profile, Paths: splitList(*paths), Restic: *restic})
		if err != nil {
			return fmt.Errorf("enroll: %w", err)
		}
		fmt.Fprintf(e.stdout, "enrolled as %s; state in %s\n", resp.EndpointID, *stateDir)
		return nil
	case "run":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		a, err := agent.Open(*stateDir, logger)
		if err != nil {
			return err
		}
		logger.Info("agent running", slog.String("endpoint_id", a.State.EndpointID), slog.String("server", a.State.Server),
			slog.String("version", agent.Version))
		return a.Run(ctx)
	case "backup":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		a, err := agent.Open(*stateDir, logger)
		if err != nil {
			return err
		}
		if _, err := a.RefreshConfig(ctx); err != nil {
			logger.Warn("config fetch failed; using the cached config", slog.Any("error", err))
		}
		if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			a.Terminal = f
		}
		f, err := a.Backup(ctx, wire.TriggerManual, "")
		if err != nil {
			return err
		}
		switch f.State {
		case wire.StateSucceeded, wire.StatePartial:
			fmt.Fprintf(e.stdout, "backup %s: snapshot %s\n", f.State, f.SnapshotID)
			return nil
		case wire.StateInterrupted:
			return fmt.Errorf("backup interrupted")
		}
		return fmt.Errorf("backup failed: %s: %s", f.Failure.Code, f.Failure.Message)
	}
	return usageError{fmt.Sprintf("agent: unknown command %q (enroll | run | backup)", args[0])}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
