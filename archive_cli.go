package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"backstop/app"
	"backstop/app/archive/chain"
)

// archiveKeyFile is the archive's checkpoint signer key in the data directory.
const archiveKeyFile = "archive.key"

// archiveSignerName is the name a new archive signer key gets: the host of
// public_url (what checkpoint origins start with), else this machine's
// host name.
func archiveSignerName(cfg app.Config) string {
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Host != "" {
		return u.Host
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "backstop"
}

// loadArchiveSigner opens (creating on first use) the data directory's
// archive signer key, as serve and admin archive-key do.
func loadArchiveSigner(cfg app.Config) (*chain.Signer, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return chain.LoadOrCreateSigner(filepath.Join(cfg.DataDir, archiveKeyFile), archiveSignerName(cfg))
}

// archiveCommand runs backstop archive …, the commands an auditor runs
// without a data directory.
func archiveCommand(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return usageError{"archive: missing command: verify-evidence"}
	}
	switch args[0] {
	case "verify-evidence":
		return archiveVerifyEvidence(flag.NewFlagSet("archive verify-evidence", flag.ContinueOnError), args[1:], e)
	}
	return usageError{fmt.Sprintf("archive: unknown command %q", args[0])}
}

// archiveVerifyEvidence checks an evidence report offline: backstop archive
// verify-evidence FILE.json [--messages DIR] [--key VERIFIERKEY]. It needs
// no server, network or data directory; exit 0 when every check passed, 1
// with the problems listed otherwise.
func archiveVerifyEvidence(fs *flag.FlagSet, args []string, e env) error {
	messages := fs.String("messages", "", "directory of exported .eml files to check against the report's records")
	key := fs.String("key", "", "the archive's verifier key, pinned (default: the one in the report)")
	fs.SetOutput(new(discard))
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return usageError{"usage: backstop archive verify-evidence FILE.json [--messages DIR] [--key VERIFIERKEY]\n" + flagUsage(fs)}
			}
			return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		return usageError{"usage: backstop archive verify-evidence FILE.json [--messages DIR] [--key VERIFIERKEY]"}
	}
	report, err := os.ReadFile(files[0])
	if err != nil {
		return err
	}
	vr, verr := chain.VerifyEvidence(report, *key, *messages)
	out := e.stdout
	if vr.Checkpoint.Size > 0 || vr.Checkpoint.Origin != "" {
		fmt.Fprintf(out, "checkpoint: %s, size %d, root %s\n", vr.Checkpoint.Origin, vr.Checkpoint.Size, vr.Checkpoint.Root)
	}
	if !vr.StampTime.IsZero() {
		fmt.Fprintf(out, "time-stamp: %s\n", vr.StampTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	fmt.Fprintf(out, "records proven: %d\n", vr.Records)
	if *messages != "" {
		fmt.Fprintf(out, "message files matched: %d\n", vr.MessagesFiles)
	}
	if verr == nil {
		if *key == "" {
			fmt.Fprintln(out, "note: checked against the verifier key in the report; pin the archive's key with --key")
		}
		fmt.Fprintln(out, "OK")
		return nil
	}
	fmt.Fprintf(out, "FAILED: %d problems\n", len(vr.Problems))
	for _, p := range vr.Problems {
		fmt.Fprintln(out, "  - "+p)
	}
	return errors.New("the evidence report did not verify")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// adminArchiveKey prints the verifier key of the data directory's archive
// signer key (data_dir/archive.key), creating the key the way serve would
// when it is missing: backstop admin archive-key.
func adminArchiveKey(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file, *dataDir, e.getenv)
	if err != nil {
		return err
	}
	s, err := loadArchiveSigner(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, s.VerifierKey())
	return nil
}
