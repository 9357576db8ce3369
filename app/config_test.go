package app

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Listen != ":8080" || c.DataDir != "./backstop-data" || c.Edition != EditionStandard || c.Update.Check {
		t.Errorf("defaults differ from CONTRACT §1: %+v", c)
	}
	r := c.EndpointRules()
	if r != DefaultEndpointRules() {
		t.Errorf("EndpointRules = %+v, want %+v", r, DefaultEndpointRules())
	}
}

func TestConfigValidateNamesKey(t *testing.T) {
	tests := []struct {
		key    string
		change func(c *Config)
	}{
		{"listen", func(c *Config) { c.Listen = "8080" }},
		{"public_url", func(c *Config) { c.PublicURL = "backstop.example.com" }},
		{"public_url", func(c *Config) { c.PublicURL = "ftp://backstop.example.com" }},
		{"data_dir", func(c *Config) { c.DataDir = "  " }},
		{"edition", func(c *Config) { c.Edition = "bogus" }},
		{"tls.mode", func(c *Config) { c.TLS.Mode = "on" }},
		{"tls.cert_file", func(c *Config) { c.TLS.Mode = "files" }},
		{"tls.hosts", func(c *Config) { c.TLS.Mode = "auto" }},
		{"log.level", func(c *Config) { c.Log.Level = "verbose" }},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }},
		{"api.rate_limit", func(c *Config) { c.API.RateLimit = 0 }},
		{"api.rate_window", func(c *Config) { c.API.RateWindow = time.Millisecond }},
		{"api.trusted_proxies", func(c *Config) { c.API.TrustedProxies = []string{"10.0.0.0/8", "proxy.local"} }},
		{"update.channel", func(c *Config) { c.Update.Channel = "nightly" }},
		{"update.repository", func(c *Config) { c.Update.Repository = "backstop" }},
		{"update.api_url", func(c *Config) { c.Update.APIURL = "api.github.com" }},
		{"archive.smtp_listen", func(c *Config) { c.Archive.SMTPListen = "25" }},
		{"tools.restic", func(c *Config) { c.Tools.Restic = "" }},
		{"endpoints.silent_after.server", func(c *Config) { c.Endpoints.SilentAfter.Server = 0 }},
		{"endpoints.silent_after.client", func(c *Config) { c.Endpoints.SilentAfter.Client = -time.Hour }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "ftp://host/dir" }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "bucket/path" }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "s3:///path" }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "file://relative/dir" }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "s3://AKIA@bucket/path" }},
		{"backup.replica_url", func(c *Config) { c.Backup.ReplicaURL = "s3://bucket/p\x7f" }},
		{"storage.min_free_bytes", func(c *Config) { c.Storage.MinFreeBytes = -1 }},
		{"metrics.token", func(c *Config) { c.Metrics.Token = "short" }},
		{"metrics.token", func(c *Config) { c.Metrics.Token = "a token with spaces in it" }},
		{"metrics.allow", func(c *Config) { c.Metrics.Allow = []string{"127.0.0.1/32", "10.0.0.0/33"} }},
		{"metrics.allow", func(c *Config) { c.Metrics.Allow = []string{"prometheus.local"} }},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate accepted an invalid value")
			}
			if !strings.HasPrefix(err.Error(), "config: "+tt.key+": ") {
				t.Errorf("error %q does not start by naming %s", err, tt.key)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
		})
	}
}

func TestConfigValidateAccepts(t *testing.T) {
	c := DefaultConfig()
	c.Listen, c.PublicURL, c.Edition = "127.0.0.1:0", "https://backup.example.com/", EditionProvider
	c.TLS.Mode, c.TLS.CertFile, c.TLS.KeyFile = "files", "c.pem", "k.pem"
	c.API.TrustedProxies = []string{"10.0.0.1", "192.168.0.0/16", "::1"}
	c.Update.Channel, c.Archive.SMTPListen = "beta", ":2525"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3": "10.1.2.3/32", "10.1.2.3/8": "10.0.0.0/8", "::1": "::1/128"} {
		p, err := ParsePrefix(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%s) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "host", "10.0.0"} {
		if _, err := ParsePrefix(bad); err == nil {
			t.Errorf("ParsePrefix(%q) accepted", bad)
		}
	}
}

func TestValidateReplicaURL(t *testing.T) {
	for _, ok := range []string{
		"s3://bucket", "s3://bucket/backstop/catalogue",
		"s3://bucket/path?endpoint=http://127.0.0.1:9000&region=us-east-1",
		"s3://AKIA123:se%2Fcret@bucket/path", "file:///var/backups/backstop",
	} {
		if err := ValidateReplicaURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// A refused URL's message must not repeat a secret it carried.
	err := ValidateReplicaURL("gs://KEY:topsecret@bucket/path")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("err = %v", err)
	}
	if got := RedactURL("s3://KEY:topsecret@bucket/path?region=x"); strings.Contains(got, "topsecret") || !strings.Contains(got, "bucket/path") {
		t.Errorf("RedactURL = %q", got)
	}
}
