package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend"
	"backstop/app/targets"
	"backstop/app/webhooks"
	"backstop/store"
)

// mountStorage builds the storage target Manager and the blob store over
// it. S3 secrets are sealed with the data directory's secrets key (the one
// that seals webhook secrets); the default local target is data_dir/blobs.
// The blob store's appliance key (data_dir/blobstore.key) is created here
// on a fresh install, so a provider administrator can download it before
// the first backup. serve opens the Manager after the listener (creating
// the default target on a fresh install) and closes it before the database.
func mountStorage(db *store.DB, box *webhooks.SecretBox, cfg app.Config, logger *slog.Logger) (*targets.Manager, *blobstore.Store, error) {
	spool := filepath.Join(cfg.DataDir, "tmp")
	storage := targets.New(targets.Config{
		Store: db, Box: box, DataDir: cfg.DataDir, MinFreeBytes: cfg.Storage.MinFreeBytes,
		OpenS3: func(ctx context.Context, s app.S3Settings) (blobstore.Backend, error) {
			return s3backend.New(ctx, s3backend.Config{Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket,
				Prefix: s.Prefix, AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, PathStyle: s.PathStyle,
				TLS: s.TLS, SpoolDir: spool})
		},
		Logger: logger.With("component", "storage"),
	})
	blobs, err := openBlobStore(db, storage, cfg, logger)
	return storage, blobs, err
}

// openBlobStore opens the appliance key (creating it if missing) and the
// blob store on the given targets.
func openBlobStore(db *store.DB, t blobstore.Targets, cfg app.Config, logger *slog.Logger) (*blobstore.Store, error) {
	key, err := blobstore.LoadApplianceKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	spool := filepath.Join(cfg.DataDir, "tmp")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	s, err := blobstore.New(blobstore.Config{Key: key, Catalog: db, Targets: t, TempDir: spool, Logger: logger.With("component", "blobstore"),
		ExtraRoots: db.ArchiveBlobRoots, // the archive's moved messages
		TenantName: func(ctx context.Context, id string) (string, error) {
			tn, err := db.Tenant(ctx, id)
			if err != nil {
				return "", err
			}
			return tn.Name, nil
		}})
	if err != nil {
		return nil, err
	}
	return s, s.RemoveStale()
}

// readApplianceKey reads the appliance key file for its one download.
func readApplianceKey(cfg app.Config) func() ([]byte, error) {
	return func() ([]byte, error) { return os.ReadFile(filepath.Join(cfg.DataDir, blobstore.KeyFileName)) }
}

// blobSnapshots is the blob store as retention sees it: collection reports
// the bytes it freed.
type blobSnapshots struct{ *blobstore.Store }

func (b blobSnapshots) CollectGarbage(ctx context.Context, tenantID string) (int64, error) {
	st, err := b.Store.CollectGarbage(ctx, tenantID)
	return st.BytesFreed, err
}
