package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/webhooks"
)

// adminRebuildCatalogue rebuilds the blob store's catalogue (tenants'
// keys, packs, blobs, snapshots) from storage targets, for a machine whose
// database was lost without a replica: backstop admin rebuild-catalogue.
// The appliance key file (data_dir/blobstore.key) must be the old one.
//
// Without target flags it reads every target the database knows (on a
// fresh data directory: the default local target, data_dir/blobs). --target
// names one. --local PATH or --s3-… register a target first (checked like a
// target added in the web interface; S3 credentials come from the
// environment, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, never the
// command line) and read it. Rebuilding twice changes nothing.
func adminRebuildCatalogue(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	targetID := fs.String("target", "", "rebuild from this storage target (st_…) only")
	local := fs.String("local", "", "register the local directory PATH as a storage target and rebuild from it")
	endpoint := fs.String("s3-endpoint", "", "register an S3 target at this endpoint (host:port or URL) and rebuild from it")
	bucket := fs.String("s3-bucket", "", "the S3 target's bucket")
	prefix := fs.String("s3-prefix", "", "the S3 target's key prefix")
	region := fs.String("s3-region", "", "the S3 target's region (default us-east-1)")
	pathStyle := fs.Bool("s3-path-style", false, "address the bucket path-style (most self-hosted servers)")
	noTLS := fs.Bool("s3-no-tls", false, "plain http to the S3 endpoint (lab gear only)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *endpoint != "" && *bucket == "" || *endpoint == "" && *bucket != "" {
		return usageError{"admin rebuild-catalogue: --s3-endpoint and --s3-bucket go together"}
	}
	if *targetID != "" && (*local != "" || *endpoint != "") || *local != "" && *endpoint != "" {
		return usageError{"admin rebuild-catalogue: name one of --target, --local or --s3-endpoint"}
	}
	db, cfg, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := blobstore.LoadApplianceKey(cfg.DataDir); err != nil {
		return err
	}
	box, err := webhooks.OpenSecretBox(cfg.DataDir)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	storage, blobs, err := mountStorage(db, box, cfg, logger)
	if err != nil {
		return err
	}
	if err := storage.EnsureDefault(ctx); err != nil {
		return err
	}

	var ids []string
	switch {
	case *targetID != "":
		ids = []string{*targetID}
	case *local != "" || *endpoint != "":
		spec := app.StorageTargetSpec{Name: "Recovered local target", Kind: app.StorageKindLocal, Path: *local}
		if *endpoint != "" {
			spec = app.StorageTargetSpec{Name: "Recovered S3 target", Kind: app.StorageKindS3, S3: app.S3Settings{
				Endpoint: *endpoint, Region: *region, Bucket: *bucket, Prefix: *prefix, PathStyle: *pathStyle, TLS: !*noTLS,
				AccessKeyID: e.getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: e.getenv("AWS_SECRET_ACCESS_KEY")}}
		}
		if spec.Kind == app.StorageKindLocal {
			if spec.Path, err = filepath.Abs(spec.Path); err != nil {
				return err
			}
		}
		t, err := storage.Create(ctx, spec)
		if err != nil {
			return cliError(err)
		}
		ids = []string{t.ID}
	default:
		ts, err := storage.Targets(ctx, app.StorageTargetFilter{Limit: 1000})
		if err != nil {
			return err
		}
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
	}

	ensureTenant := func(ctx context.Context, id, name string) error {
		if _, err := db.Tenant(ctx, id); app.ErrorCode(err) != app.ENOTFOUND {
			return err
		}
		if name == "" {
			name = "Recovered " + id
		}
		return db.CreateTenant(ctx, &app.Tenant{ID: id, Name: name})
	}
	var failed error
	for _, id := range ids {
		b, err := storage.Backend(ctx, id)
		if err != nil {
			return cliError(err)
		}
		st, err := blobs.Rebuild(ctx, id, b, ensureTenant)
		if err != nil {
			fmt.Fprintf(e.stderr, "%s (%s): %v\n", id, b, err)
			failed = errors.New("rebuild-catalogue: a target could not be read (see above)")
			continue
		}
		fmt.Fprintf(e.stdout, "%s (%s): %d tenants, %d packs, %d blobs, %d snapshots\n", id, b, st.Tenants, st.Packs, st.Blobs, st.Snapshots)
		for _, s := range st.Skipped {
			fmt.Fprintf(e.stderr, "%s: skipped %s\n", id, s)
		}
	}
	return failed
}
