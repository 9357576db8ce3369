package targets

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"backstop/app"
)

// validName trims a target name and checks its length.
func validName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if n := len([]rune(name)); n == 0 || n > 200 {
		return "", app.FieldError("name", "name must be 1 to 200 characters")
	}
	return name, nil
}

// bucketName is an S3 bucket name as every provider accepts it.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// validate turns a spec into the target to store (with a fresh id), or a
// validation error naming the field. A second target on the same directory,
// or on the same bucket and prefix, is a conflict: both would count the
// same packs.
func (m *Manager) validate(ctx context.Context, spec app.StorageTargetSpec) (*app.StorageTarget, error) {
	name, err := validName(spec.Name)
	if err != nil {
		return nil, err
	}
	t := &app.StorageTarget{ID: app.NewID(app.PrefixStorage), Name: name, Kind: spec.Kind, Default: spec.Default,
		TenantIDs: append([]string{}, spec.TenantIDs...)}
	for _, tn := range t.TenantIDs {
		if !app.HasPrefix(tn, app.PrefixTenant) {
			return nil, app.FieldError("tenantIds", "no such tenant %s", tn)
		}
	}
	switch spec.Kind {
	case app.StorageKindLocal:
		if !filepath.IsAbs(spec.Path) {
			return nil, app.FieldError("path", "path must be an absolute directory, e.g. /mnt/backup")
		}
		t.Path = filepath.Clean(spec.Path)
		// The directory must exist: a mount point typed wrong must not
		// become a directory on the system disk.
		if fi, err := os.Stat(t.Path); err != nil || !fi.IsDir() {
			return nil, app.FieldError("path", "%s is not an existing directory; create or mount it first", t.Path)
		}
	case app.StorageKindS3:
		s := spec.S3
		host := strings.TrimSpace(s.Endpoint)
		if host == "" || strings.Contains(host, "/") || strings.ContainsAny(host, " @?#") {
			return nil, app.FieldError("endpoint", "endpoint is the host name (and :port) of the S3 API, without https:// or a path; tls chooses HTTPS")
		}
		if h, _, err := net.SplitHostPort(host); err == nil && h == "" {
			return nil, app.FieldError("endpoint", "endpoint lacks a host name")
		}
		if !bucketName.MatchString(s.Bucket) {
			return nil, app.FieldError("bucket", "bucket must be 3 to 63 lowercase letters, digits, dots or hyphens")
		}
		if strings.TrimSpace(s.AccessKeyID) == "" {
			return nil, app.FieldError("accessKeyId", "accessKeyId must not be blank")
		}
		if s.SecretAccessKey == "" {
			return nil, app.FieldError("secretAccessKey", "secretAccessKey must not be blank")
		}
		t.Endpoint, t.Region, t.Bucket = host, strings.TrimSpace(s.Region), s.Bucket
		t.Prefix = strings.Trim(strings.TrimSpace(s.Prefix), "/")
		t.AccessKeyID = strings.TrimSpace(s.AccessKeyID)
		t.PathStyle, t.TLS = app.Ptr(s.PathStyle), app.Ptr(s.TLS)
	default:
		return nil, app.FieldError("kind", "kind must be local or s3")
	}
	existing, err := m.cfg.Store.StorageTargets(ctx, app.StorageTargetFilter{})
	if err != nil {
		return nil, err
	}
	for _, e := range existing {
		switch {
		case t.Kind == app.StorageKindLocal && e.Kind == t.Kind && e.Path == t.Path:
			return nil, app.Errorf(app.ECONFLICT, "target %s (%s) already uses the directory %s", e.ID, e.Name, t.Path)
		case t.Kind == app.StorageKindS3 && e.Kind == t.Kind && strings.EqualFold(e.Endpoint, t.Endpoint) &&
			e.Bucket == t.Bucket && e.Prefix == t.Prefix:
			return nil, app.Errorf(app.ECONFLICT, "target %s (%s) already uses this bucket and prefix", e.ID, e.Name)
		}
	}
	return t, nil
}
