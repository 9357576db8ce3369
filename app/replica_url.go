package app

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// ReplicaSchemes are the replica URL schemes the appliance supports for
// backup.replica_url and restore-catalogue --from. package replica registers
// a Litestream client for each and its tests check the two lists agree.
var ReplicaSchemes = []string{"s3", "file"}

// ValidateReplicaURL checks the shape of a catalogue replica URL:
// s3://[ACCESS_KEY:SECRET@]bucket[/path][?endpoint=…&region=…] or
// file:///absolute/dir. Its errors never repeat the value, which may carry
// a secret key.
func ValidateReplicaURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL (want s3://bucket/path or file:///dir)")
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return fmt.Errorf("s3 URL needs a bucket: s3://bucket/path")
		}
		if u.User != nil {
			if _, ok := u.User.Password(); !ok || u.User.Username() == "" {
				return fmt.Errorf("credentials in the URL must be ACCESS_KEY:SECRET@ (or use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
			}
		}
	case "file":
		if u.Host != "" || !path.IsAbs(u.Path) || path.Clean(u.Path) == "/" {
			return fmt.Errorf("file URL needs an absolute directory: file:///var/backups/backstop")
		}
	case "":
		return fmt.Errorf("needs a scheme: s3://bucket/path or file:///dir")
	default:
		return fmt.Errorf("unsupported scheme %q (supported: %s)", u.Scheme, strings.Join(ReplicaSchemes, ", "))
	}
	return nil
}

// RedactURL returns raw with any password replaced by "xxxxx", for logs and
// messages; a value that does not parse is replaced as a whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
