package store

import (
	"encoding/json"
	"strings"
)

// decodeStringList decodes a JSON array of strings as stored in the TEXT
// list columns (endpoint paths and excludes). Listing endpoints decodes two
// per row, so the common forms are parsed directly: "[]", and arrays whose
// strings hold no escapes (no backslash means no quote inside a string).
// Anything else goes through encoding/json, which also reports malformed
// input.
func decodeStringList(s string) ([]string, error) {
	if s == "[]" {
		return []string{}, nil
	}
	if strings.IndexByte(s, '\\') < 0 && len(s) >= 4 && s[0] == '[' && s[1] == '"' && s[len(s)-2] == '"' && s[len(s)-1] == ']' {
		// ["a","b"]: between the brackets, strings joined by "," exactly.
		parts := strings.Split(s[2:len(s)-2], `","`)
		ok := true
		for _, p := range parts {
			if strings.IndexByte(p, '"') >= 0 || !validJSONStringBody(p) {
				ok = false
				break
			}
		}
		if ok {
			return parts, nil
		}
	}
	var out []string
	err := json.Unmarshal([]byte(s), &out)
	return out, err
}

// validJSONStringBody reports whether p may stand unescaped inside a JSON
// string: no control characters (valid UTF-8 is checked by the caller's
// storage, which only ever holds what encoding/json wrote).
func validJSONStringBody(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 {
			return false
		}
	}
	return true
}
