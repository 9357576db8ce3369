package app

import (
	"strconv"
	"strings"
)

// Version is the running build's semantic version, set at link time with
// -ldflags "-X backstop/app.Version=1.2.3". A development build reports
// 0.0.0-dev so that comparisons still work.
var Version = "0.0.0-dev"

// semver is a parsed MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
type semver struct {
	major, minor, patch int
	pre                 []string
}

// parseSemver accepts an optional leading "v".
func parseSemver(s string) (semver, bool) {
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	var v semver
	if i := strings.IndexByte(s, '-'); i >= 0 {
		v.pre = strings.Split(s[i+1:], ".")
		s = s[:i]
		for _, p := range v.pre {
			if p == "" {
				return v, false
			}
		}
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	nums := [3]*int{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return v, false
		}
		*nums[i] = n
	}
	return v, true
}

// ValidSemver reports whether s is a semantic version (optionally v-prefixed).
func ValidSemver(s string) bool { _, ok := parseSemver(s); return ok }

// CompareSemver compares two versions by semver precedence: -1, 0 or +1.
// ok is false when either does not parse.
func CompareSemver(a, b string) (cmp int, ok bool) {
	va, ok1 := parseSemver(a)
	vb, ok2 := parseSemver(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	for _, d := range [][2]int{{va.major, vb.major}, {va.minor, vb.minor}, {va.patch, vb.patch}} {
		if d[0] != d[1] {
			return sign(d[0] - d[1]), true
		}
	}
	// A version without pre-release has higher precedence.
	switch {
	case len(va.pre) == 0 && len(vb.pre) == 0:
		return 0, true
	case len(va.pre) == 0:
		return 1, true
	case len(vb.pre) == 0:
		return -1, true
	}
	for i := 0; i < len(va.pre) && i < len(vb.pre); i++ {
		x, y := va.pre[i], vb.pre[i]
		nx, errx := strconv.Atoi(x)
		ny, erry := strconv.Atoi(y)
		switch {
		case errx == nil && erry == nil:
			if nx != ny {
				return sign(nx - ny), true
			}
		case errx == nil:
			return -1, true // numeric identifiers sort before alphanumeric
		case erry == nil:
			return 1, true
		case x != y:
			return sign(strings.Compare(x, y)), true
		}
	}
	return sign(len(va.pre) - len(vb.pre)), true
}

// SemverNewer reports whether candidate is newer than running.
func SemverNewer(candidate, running string) (newer, ok bool) {
	c, ok := CompareSemver(candidate, running)
	return c > 0, ok
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
