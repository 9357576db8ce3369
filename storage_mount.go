package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/targets"
	"backstop/app/webhooks"
	"backstop/store"
)

// openS3Target opens an S3-compatible storage target. Until the S3 backend
// (app/blobstore/s3backend) lands it refuses, so POST /storage-targets
// answers 422 storage_target_unusable for kind s3; then this becomes
// s3backend's constructor (one line).
var openS3Target = func(ctx context.Context, s app.S3Settings) (blobstore.Backend, error) {
	return nil, errors.New("S3 targets need the s3 backend, which this build does not have yet")
}

// applianceKeyFile is the blob store's appliance key (CONTRACT §11); the
// blob store creates it, the API offers it for download once.
const applianceKeyFile = "blobstore.key"

// mountStorage builds the storage target Manager: S3 secrets sealed with
// the data directory's secrets key (the one that seals webhook secrets),
// the default local target at data_dir/blobs. serve opens it after the
// listener (creating the default target on a fresh install) and closes it
// before the database.
func mountStorage(db *store.DB, box *webhooks.SecretBox, cfg app.Config, logger *slog.Logger) *targets.Manager {
	return targets.New(targets.Config{
		Store: db, Box: box, DataDir: cfg.DataDir, MinFreeBytes: cfg.Storage.MinFreeBytes,
		OpenS3: openS3Target, Logger: logger.With("component", "storage"),
	})
}

// readApplianceKey reads the appliance key file for its one download.
func readApplianceKey(cfg app.Config) func() ([]byte, error) {
	return func() ([]byte, error) { return os.ReadFile(filepath.Join(cfg.DataDir, applianceKeyFile)) }
}
