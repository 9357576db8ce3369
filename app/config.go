package app

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode"

	"backstop/app/graph"
)

// Config is the appliance's start-up configuration: the YAML file with
// SERVICE_* environment overrides, decoded by main.go. Every key and its
// default is documented in config.example.yaml.
type Config struct {
	Listen    string    `mapstructure:"listen"`
	PublicURL string    `mapstructure:"public_url"`
	DataDir   string    `mapstructure:"data_dir"`
	Edition   string    `mapstructure:"edition"`
	TLS       TLSConfig `mapstructure:"tls"`
	Log       struct {
		Level  string `mapstructure:"level"`
		Format string `mapstructure:"format"`
	} `mapstructure:"log"`
	API struct {
		// RateLimit is requests per key per RateWindow (SPEC: 600 per 10 min).
		RateLimit      int           `mapstructure:"rate_limit"`
		RateWindow     time.Duration `mapstructure:"rate_window"`
		TrustedProxies []string      `mapstructure:"trusted_proxies"`
	} `mapstructure:"api"`
	Webhook struct {
		AllowPrivate bool `mapstructure:"allow_private"`
	} `mapstructure:"webhook"`
	Update struct {
		Check      bool   `mapstructure:"check"`
		Channel    string `mapstructure:"channel"`
		Repository string `mapstructure:"repository"`
		APIURL     string `mapstructure:"api_url"`
		// RollbackAfter is how long a new version has to become ready
		// after an update before the previous binary is put back.
		RollbackAfter time.Duration `mapstructure:"rollback_after"`
	} `mapstructure:"update"`
	Archive struct {
		SMTPListen   string `mapstructure:"smtp_listen"`
		SMTPDomain   string `mapstructure:"smtp_domain"`
		SMTPMaxBytes int64  `mapstructure:"smtp_max_bytes"`
		TSAURL       string `mapstructure:"tsa_url"`
	} `mapstructure:"archive"`
	Tools struct {
		Restic string `mapstructure:"restic"`
	} `mapstructure:"tools"`
	Endpoints struct {
		SilentAfter struct {
			Server time.Duration `mapstructure:"server"`
			Client time.Duration `mapstructure:"client"`
		} `mapstructure:"silent_after"`
		// RepositoryQuotaBytes bounds each endpoint's restic repository;
		// an upload that would exceed it is refused with 507. 0: no quota.
		RepositoryQuotaBytes int64 `mapstructure:"repository_quota_bytes"`
	} `mapstructure:"endpoints"`
	Backup struct {
		// ReplicaURL is where the catalogue (backstop.db) is replicated
		// continuously with Litestream: s3://bucket/path?… or file:///dir.
		// Empty: no replica. It may carry S3 credentials, so it is shown
		// only through RedactURL.
		ReplicaURL string `mapstructure:"replica_url"`
	} `mapstructure:"backup"`
	Storage struct {
		// MinFreeBytes: a storage target with less free space is full.
		MinFreeBytes int64 `mapstructure:"min_free_bytes"`
	} `mapstructure:"storage"`
	// Metrics turns on GET /metrics (Prometheus text format): scrapers
	// present Token as a Bearer token, or connect from an Allow prefix.
	// Neither set: off (404).
	Metrics struct {
		Token string   `mapstructure:"token"`
		Allow []string `mapstructure:"allow"`
	} `mapstructure:"metrics"`
	// Graph tunes the Microsoft Graph client of every Microsoft 365 source.
	Graph struct {
		// MaxConcurrency is the appliance-wide total of Graph requests in
		// flight, over every tenant and mailbox (Outlook's per-mailbox
		// limit of 4 applies within it).
		MaxConcurrency int `mapstructure:"max_concurrency"`
	} `mapstructure:"graph"`
	// Memory tunes the Go runtime's memory use.
	Memory struct {
		// SoftLimitMiB is the Go runtime's soft memory limit
		// (debug.SetMemoryLimit): as the process nears it, the garbage
		// collector runs earlier than GOGC alone would, so a burst (50
		// mailboxes backing up at once) does not double the heap. It is
		// soft: nothing fails above it, and the collector never takes
		// more than about half the CPU for it. 0: no limit (GOGC only).
		// GOMEMLIMIT in the environment wins over it.
		SoftLimitMiB int `mapstructure:"soft_limit_mib"`
	} `mapstructure:"memory"`
}

// DefaultMemorySoftLimitMiB is the default of memory.soft_limit_mib.
const DefaultMemorySoftLimitMiB = 100

// ApplyMemoryLimit sets the Go runtime's soft memory limit to mib MiB
// (0: none) unless GOMEMLIMIT is set in the environment, which wins. It
// returns the limit in force afterwards, in bytes (math.MaxInt64: none).
func ApplyMemoryLimit(mib int) int64 {
	if os.Getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if mib > 0 {
			limit = int64(mib) << 20
		}
		debug.SetMemoryLimit(limit)
	}
	return debug.SetMemoryLimit(-1)
}

// TLSConfig selects how the listener serves TLS.
type TLSConfig struct {
	Mode     string   `mapstructure:"mode"` // off, files, auto
	CertFile string   `mapstructure:"cert_file"`
	KeyFile  string   `mapstructure:"key_file"`
	Hosts    []string `mapstructure:"hosts"` // auto: names to request certificates for
	Email    string   `mapstructure:"email"` // auto: ACME account contact
}

// Editions.
const (
	EditionStandard = "standard"
	EditionProvider = "provider"
)

// DefaultConfig returns the embedded defaults: what `backstop serve` runs on
// with no file and no environment.
func DefaultConfig() Config {
	var c Config
	c.Listen = ":8080"
	c.DataDir = "./backstop-data"
	c.Edition = EditionStandard
	c.TLS.Mode = "off"
	c.Log.Level = "info"
	c.Log.Format = "text"
	c.API.RateLimit = 600
	c.API.RateWindow = 10 * time.Minute
	c.Update.Check = false
	c.Update.Channel = "stable"
	c.Update.Repository = "backstop-dev/backstop"
	c.Update.APIURL = "https://api.github.com"
	c.Update.RollbackAfter = 60 * time.Second
	c.Archive.SMTPMaxBytes = 200 << 20
	c.Tools.Restic = "restic"
	c.Endpoints.SilentAfter.Server = 15 * time.Minute
	c.Endpoints.SilentAfter.Client = 72 * time.Hour
	c.Storage.MinFreeBytes = DefaultMinFreeBytes
	c.Graph.MaxConcurrency = graph.DefaultMaxConcurrency
	c.Memory.SoftLimitMiB = DefaultMemorySoftLimitMiB
	return c
}

// Validate checks every key and returns an error naming the first key at
// fault and why.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "must be host:port (for example :8080), got %q", c.Listen)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("public_url", "must be an absolute http or https URL, got %q", c.PublicURL)
		}
	}
	if strings.TrimSpace(c.DataDir) == "" {
		return bad("data_dir", "must not be empty")
	}
	if c.Edition != EditionStandard && c.Edition != EditionProvider {
		return bad("edition", "must be standard or provider, got %q", c.Edition)
	}
	switch c.TLS.Mode {
	case "off":
	case "files":
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			return bad("tls.cert_file", "tls.mode files needs tls.cert_file and tls.key_file")
		}
	case "auto":
		if len(c.TLS.Hosts) == 0 {
			return bad("tls.hosts", "tls.mode auto needs at least one host name")
		}
	default:
		return bad("tls.mode", "must be off, files or auto, got %q", c.TLS.Mode)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if c.API.RateLimit < 1 {
		return bad("api.rate_limit", "must be at least 1, got %d", c.API.RateLimit)
	}
	if c.API.RateWindow < time.Second {
		return bad("api.rate_window", "must be at least 1s, got %s", c.API.RateWindow)
	}
	for _, p := range c.API.TrustedProxies {
		if _, err := ParsePrefix(p); err != nil {
			return bad("api.trusted_proxies", "%q is not an IP address or CIDR prefix", p)
		}
	}
	if c.Update.Channel != "stable" && c.Update.Channel != "beta" {
		return bad("update.channel", "must be stable or beta, got %q", c.Update.Channel)
	}
	if c.Update.RollbackAfter < time.Second {
		return bad("update.rollback_after", "must be at least 1s, got %s", c.Update.RollbackAfter)
	}
	if parts := strings.Split(c.Update.Repository, "/"); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return bad("update.repository", "must be owner/name, got %q", c.Update.Repository)
	}
	if u, err := url.Parse(c.Update.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("update.api_url", "must be an absolute http or https URL, got %q", c.Update.APIURL)
	}
	if c.Archive.SMTPListen != "" {
		if _, _, err := net.SplitHostPort(c.Archive.SMTPListen); err != nil {
			return bad("archive.smtp_listen", "must be host:port or empty, got %q", c.Archive.SMTPListen)
		}
	}
	if c.Archive.SMTPDomain != "" && (strings.ContainsAny(c.Archive.SMTPDomain, "@ /\t") || !strings.Contains(c.Archive.SMTPDomain, ".")) {
		return bad("archive.smtp_domain", "must be a domain name, got %q", c.Archive.SMTPDomain)
	}
	if c.Archive.SMTPMaxBytes < 1<<20 {
		return bad("archive.smtp_max_bytes", "must be at least 1048576 (1 MiB), got %d", c.Archive.SMTPMaxBytes)
	}
	if c.Archive.TSAURL != "" {
		if u, err := url.Parse(c.Archive.TSAURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("archive.tsa_url", "must be an absolute http or https URL or empty, got %q", c.Archive.TSAURL)
		}
	}
	if c.Tools.Restic == "" {
		return bad("tools.restic", "must name the restic binary")
	}
	if c.Endpoints.SilentAfter.Server <= 0 {
		return bad("endpoints.silent_after.server", "must be a positive duration")
	}
	if c.Endpoints.SilentAfter.Client <= 0 {
		return bad("endpoints.silent_after.client", "must be a positive duration")
	}
	if c.Endpoints.RepositoryQuotaBytes < 0 {
		return bad("endpoints.repository_quota_bytes", "must be 0 (no quota) or a number of bytes, got %d", c.Endpoints.RepositoryQuotaBytes)
	}
	if c.Backup.ReplicaURL != "" {
		if err := ValidateReplicaURL(c.Backup.ReplicaURL); err != nil {
			return bad("backup.replica_url", "%v", err)
		}
	}
	if c.Graph.MaxConcurrency < 1 || c.Graph.MaxConcurrency > 10000 {
		return bad("graph.max_concurrency", "must be between 1 and 10000, got %d", c.Graph.MaxConcurrency)
	}
	if c.Memory.SoftLimitMiB != 0 && (c.Memory.SoftLimitMiB < 64 || c.Memory.SoftLimitMiB > 1<<20) {
		return bad("memory.soft_limit_mib", "must be 0 (no limit) or between 64 and 1048576, got %d", c.Memory.SoftLimitMiB)
	}
	if c.Storage.MinFreeBytes < 0 {
		return bad("storage.min_free_bytes", "must be 0 or a number of bytes, got %d", c.Storage.MinFreeBytes)
	}
	if c.Metrics.Token != "" && (len(c.Metrics.Token) < MinMetricsTokenLen || strings.ContainsFunc(c.Metrics.Token, unicode.IsSpace)) {
		return bad("metrics.token", "must be at least %d characters without spaces, or empty", MinMetricsTokenLen)
	}
	for _, p := range c.Metrics.Allow {
		if _, err := ParsePrefix(strings.TrimSpace(p)); err != nil {
			return bad("metrics.allow", "%q is not an IP address or CIDR prefix", p)
		}
	}
	return nil
}

// MinMetricsTokenLen is the shortest metrics.token accepted: a guessable
// token would make the allow-list pointless.
const MinMetricsTokenLen = 16

// MetricsAllow returns metrics.allow as prefixes (Validate has checked them).
func (c *Config) MetricsAllow() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.Metrics.Allow {
		if prefix, err := ParsePrefix(strings.TrimSpace(p)); err == nil {
			out = append(out, prefix)
		}
	}
	return out
}

// EndpointRules returns the thresholds configured for endpoint state.
func (c *Config) EndpointRules() EndpointRules {
	return EndpointRules{SilentAfterServer: c.Endpoints.SilentAfter.Server, SilentAfterClient: c.Endpoints.SilentAfter.Client}
}
