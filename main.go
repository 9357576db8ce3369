// Command backstop is the Backstop appliance and its agent in one binary.
//
//	backstop serve [--config FILE]           run the appliance
//	backstop admin <command> [flags]         administer the data directory
//	backstop agent <enroll|run|backup>       the agent (see package agent)
//	backstop version                         print the version
//
// main.go wires the components and owns signals and the shutdown order:
// HTTP servers first, then background workers, then the database.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"backstop/agent"
	"backstop/app/jobs"
)

// env is what a command may touch of the outside world, so that tests run
// commands in-process with their own streams, environment and hooks.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// listening, if set, is told the HTTP server's bound address.
	listening func(addr string)
	// jobKinds, if set, are registered with serve's job runner beside the
	// built-in kinds (tests run real jobs through the real binary's code).
	jobKinds []jobs.Kind
}

func main() {
	// Nothing in the appliance reads heap profiles, but a dependency links
	// runtime/pprof (Litestream's debug server), which keeps the runtime's
	// sampling on: 1.4 MB of profile buckets, filled over the appliance's
	// life, and a stack walk per sample. GODEBUG=memprofilerate=N still
	// turns it on for a diagnosis. Tests and benchmarks do not run main.
	if !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		runtime.MemProfileRate = 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	if err := run(ctx, os.Args[1:], e); err != nil {
		var u usageError
		if (!errors.As(err, &u) || u.msg != "") && !errors.Is(err, errRestart) {
			fmt.Fprintln(os.Stderr, "backstop:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	if errors.Is(err, agent.ErrRestart) {
		return agent.RestartExitCode
	}
	if errors.Is(err, errRestart) {
		return exitRestart
	}
	return 1
}

const usage = `usage: backstop <command> [flags]

commands:
  serve      run the appliance (--config FILE, --data-dir DIR)
  admin      create-tenant | create-user | create-key | revoke-key |
             create-enrollment-token | audit | restore-catalogue |
             rebuild-catalogue | archive-key
  archive    verify-evidence FILE.json [--messages DIR] [--key KEY]
             (offline check of an evidence report)
  agent      enroll | run | backup (the backup agent)
  version    print the version`

// run dispatches a command line; it is main without the process.
func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return usageError{}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], e)
	case "admin":
		return admin(ctx, args[1:], e)
	case "archive":
		return archiveCommand(ctx, args[1:], e)
	case "agent":
		return agentCommand(ctx, args[1:], e)
	case "version", "--version", "-v":
		fmt.Fprintln(e.stdout, version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(e.stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q (try backstop help)", args[0])}
}
