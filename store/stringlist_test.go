package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The fast path must agree with encoding/json on everything json.Marshal
// writes, and hand unusual input to encoding/json.
func TestDecodeStringListMatchesEncodingJSON(t *testing.T) {
	lists := [][]string{
		{}, {"/etc"}, {"/etc", "/home", "/var/lib"}, {""}, {"", ""}, {"a,b", "c\",\"d"}, {`C:\Users`},
		{"tab\there"}, {"<html>&"}, {"ünïcödé", "日本"}, {`","`}, {"a", "", "b"},
	}
	for _, l := range lists {
		raw, _ := json.Marshal(l)
		got, err := decodeStringList(string(raw))
		if err != nil || !reflect.DeepEqual(got, l) {
			t.Errorf("decode(%s) = %q, %v; want %q", raw, got, err, l)
		}
	}
	for _, raw := range []string{`[ "a" ]`, `["a", "b"]`, `["a","b",]`, `"a"`, `[1]`, `[`} {
		var want []string
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := decodeStringList(raw)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("decode(%s) = %q, %v; encoding/json says %q, %v", raw, got, err, want, wantErr)
		}
	}
}
