package app

import (
	"fmt"
	"time"
)

// Time is an instant as the API shows it: RFC 3339 in UTC with exactly
// millisecond precision and a Z ("2026-11-21T15:08:09.123Z"). The store keeps
// milliseconds, so nothing finer is ever promised.
type Time struct{ time.Time }

// TimeLayout is the wire form of Time.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// At converts t to a Time (UTC, truncated to milliseconds).
func At(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// AtPtr converts an optional time; nil stays nil (JSON null).
func AtPtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := At(*t)
	return &v
}

// MarshalJSON writes the wire form.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON accepts any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("time must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return err
	}
	*t = At(v)
	return nil
}

// String returns the wire form.
func (t Time) String() string { return t.UTC().Format(TimeLayout) }
