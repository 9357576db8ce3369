package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"backstop/app"
)

// config.example.yaml documents every key with its default: loading it must
// give exactly the embedded defaults, and it must name every key there is.
func TestConfigExampleMatchesDefaults(t *testing.T) {
	got, err := loadConfig("config.example.yaml", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := app.DefaultConfig()
	if want.DataDir, err = filepath.Abs(want.DataDir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Errorf("config.example.yaml differs from DefaultConfig():\n got %+v\nwant %+v", got, want)
	}
	body, err := os.ReadFile("config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for key := range flatten(reflect.ValueOf(app.DefaultConfig()), "") {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(string(body), leaf+":") {
			t.Errorf("config.example.yaml does not document %s", key)
		}
	}
}

// normalize treats nil and empty slices alike (YAML [] decodes to empty).
func normalize(c app.Config) app.Config {
	if len(c.TLS.Hosts) == 0 {
		c.TLS.Hosts = nil
	}
	if len(c.API.TrustedProxies) == 0 {
		c.API.TrustedProxies = nil
	}
	if len(c.Metrics.Allow) == 0 {
		c.Metrics.Allow = nil
	}
	return c
}

func TestConfigEnvironmentOverridesAndErrors(t *testing.T) {
	env := map[string]string{"SERVICE_WEBHOOK_ALLOW_PRIVATE": "true", "SERVICE_ENDPOINTS_SILENT_AFTER_CLIENT": "24h",
		"SERVICE_API_TRUSTED_PROXIES": "10.0.0.0/8,192.0.2.1", "SERVICE_BACKUP_REPLICA_URL": "s3://bucket/backstop?region=eu-central-1"}
	cfg, err := loadConfig("config.example.yaml", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Webhook.AllowPrivate || cfg.Endpoints.SilentAfter.Client.Hours() != 24 || len(cfg.API.TrustedProxies) != 2 ||
		cfg.Backup.ReplicaURL != env["SERVICE_BACKUP_REPLICA_URL"] {
		t.Errorf("environment not applied: %+v", cfg)
	}
	// A relative data_dir is made absolute: verify runs start restic in a
	// temporary directory and must still find the repository's password file.
	if !filepath.IsAbs(cfg.DataDir) {
		t.Errorf("data_dir %q is not absolute", cfg.DataDir)
	}
	for name, tc := range map[string]struct{ key, value, want string }{
		"edition":       {"SERVICE_EDITION", "gold", "config: edition:"},
		"listen":        {"SERVICE_LISTEN", "8080", "config: listen:"},
		"duration":      {"SERVICE_ENDPOINTS_SILENT_AFTER_SERVER", "soon", "silent_after.server"},
		"tls":           {"SERVICE_TLS_MODE", "files", "config: tls.cert_file:"},
		"channel":       {"SERVICE_UPDATE_CHANNEL", "nightly", "config: update.channel:"},
		"replica":       {"SERVICE_BACKUP_REPLICA_URL", "ftp://KEY:topsecret@host/dir", "config: backup.replica_url: unsupported scheme"},
		"metrics allow": {"SERVICE_METRICS_ALLOW", "127.0.0.1/32,10.0.0.0/99", "config: metrics.allow: \"10.0.0.0/99\""},
		"metrics token": {"SERVICE_METRICS_TOKEN", "secret", "config: metrics.token:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig("", "", func(k string) string {
				if k == tc.key {
					return tc.value
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("metrics from the environment", func(t *testing.T) {
		env := map[string]string{"SERVICE_METRICS_TOKEN": "0123456789abcdef0123", "SERVICE_METRICS_ALLOW": "127.0.0.1/32, 10.0.0.0/8,192.0.2.7"}
		cfg, err := loadConfig("", "", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		allow := cfg.MetricsAllow()
		if cfg.Metrics.Token != env["SERVICE_METRICS_TOKEN"] || len(allow) != 3 || allow[1].String() != "10.0.0.0/8" || allow[2].String() != "192.0.2.7/32" {
			t.Errorf("metrics = %+v (allow %v)", cfg.Metrics, allow)
		}
	})
	t.Run("unknown key in file", func(t *testing.T) {
		f := t.TempDir() + "/c.yaml"
		os.WriteFile(f, []byte("listen: \":9000\"\nwebhooks:\n  allow_private: true\n"), 0o600)
		_, err := loadConfig(f, "", func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "webhooks") {
			t.Errorf("err = %v, want it to name the unknown key", err)
		}
	})
}
