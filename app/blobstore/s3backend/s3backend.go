// Package s3backend is the S3-compatible storage target: a blobstore.Backend
// on one bucket (and optional key prefix) of any server that speaks the S3
// API with conditional PUT (If-None-Match: *), such as AWS S3, Ceph RGW,
// versitygw or Wasabi.
//
// It uses aws-sdk-go-v2's S3 client built from Config alone: nothing is
// read from the environment, the shared AWS config files or the instance
// metadata service, and no HTTP proxy is taken from HTTP_PROXY/HTTPS_PROXY,
// so storage traffic never goes anywhere the target's configuration does
// not say.
package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"backstop/app/blobstore"
)

// Config describes one S3 storage target. SecretAccessKey is never shown by
// String or in errors.
type Config struct {
	// Endpoint is host[:port] or a URL. A URL's scheme (http or https)
	// wins over TLS; a bare host uses TLS to choose.
	Endpoint string
	// Region signs the requests; "us-east-1" when empty.
	Region string
	Bucket string
	// Prefix, when set, is put before every object name (joined with "/"),
	// so several appliances or tenants can share a bucket.
	Prefix          string
	AccessKeyID     string
	SecretAccessKey string
	// PathStyle addresses the bucket as endpoint/bucket/key instead of
	// bucket.endpoint/key: most self-hosted servers want it.
	PathStyle bool
	// TLS chooses https for an Endpoint given without a scheme.
	TLS bool
	// HTTPClient replaces the default client (dial timeout 5 s, response
	// header timeout 30 s, no proxy). The caller then owns its timeouts and
	// proxy settings.
	HTTPClient *http.Client
	// SpoolDir is where Create spools a non-seekable body over plain http
	// (see Create); os.TempDir() when empty.
	SpoolDir string
}

// Tuning of the HTTP client and the retryer: a target that is down fails a
// request within a few seconds (three attempts, sub-second backoff) rather
// than stalling a job for minutes.
const (
	dialTimeout           = 5 * time.Second
	responseHeaderTimeout = 30 * time.Second
	maxAttempts           = 3
	defaultRegion         = "us-east-1"
)

// Backend is a blobstore.Backend on an S3 bucket. It is safe for
// concurrent use.
type Backend struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ending in "/"
	tls      bool
	spoolDir string
	display  string
}

var _ blobstore.Backend = (*Backend)(nil)

// New builds the client for cfg. It checks the configuration only; it does
// not contact the server (blobstore.Check does).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 target: no bucket given")
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("s3 target: access key id and secret access key are both required")
	}
	base, err := endpointURL(cfg.Endpoint, cfg.TLS)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = defaultRegion
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = defaultHTTPClient()
	}
	client := s3.New(s3.Options{
		Region:       region,
		BaseEndpoint: aws.String(base.String()),
		UsePathStyle: cfg.PathStyle,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		HTTPClient:   httpClient,
		Retryer:      newRetryer(),
		// CRC32 on every PUT (and verified on whole-object GETs where the
		// server stored one).
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	})
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Backend{
		client:   client,
		bucket:   cfg.Bucket,
		prefix:   prefix,
		tls:      base.Scheme == "https",
		spoolDir: cfg.SpoolDir,
		display:  "s3:" + base.Scheme + "://" + base.Host + "/" + cfg.Bucket + "/" + prefix,
	}, nil
}

// endpointURL turns host[:port] or a URL into the base URL of the service.
func endpointURL(endpoint string, useTLS bool) (*url.URL, error) {
	if endpoint == "" {
		return nil, errors.New("s3 target: no endpoint given")
	}
	if !strings.Contains(endpoint, "://") {
		scheme := "http"
		if useTLS {
			scheme = "https"
		}
		endpoint = scheme + "://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 target: endpoint %q is not a host[:port] or URL: %v", endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("s3 target: endpoint %q must be host[:port] or an http(s) URL without credentials or query", endpoint)
	}
	return u, nil
}

// defaultHTTPClient has bounded connect and header waits and, on purpose,
// no Proxy: storage traffic never follows HTTP_PROXY by surprise.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          32,
		MaxIdleConnsPerHost:   16,
		ForceAttemptHTTP2:     true,
	}}
}

// newRetryer retries transient failures (connection errors, 500/502/503/504,
// throttling) at most maxAttempts times in all, with a short jittered
// backoff, and without the SDK's client-side retry quota, which after an
// outage would fail requests with "retry quota exceeded" instead of the
// real cause.
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.RateLimiter = ratelimit.None
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			d := time.Duration(attempt) * 200 * time.Millisecond
			return d/2 + rand.N(d/2+1), nil
		})
	})
}

// String names the target (endpoint, bucket, prefix) without credentials.
func (b *Backend) String() string { return b.display }

// key maps an object name to its S3 key under the prefix.
func (b *Backend) key(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") ||
		strings.Contains(name, "\\") || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") {
		return "", fmt.Errorf("invalid object name %q", name)
	}
	return b.prefix + name, nil
}

// Space implements blobstore.Backend: S3 cannot tell its capacity.
func (b *Backend) Space(context.Context) (blobstore.Space, error) {
	return blobstore.Space{}, nil
}

// emptyBody is what Open returns for a zero-length read.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }
