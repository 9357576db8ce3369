package verify

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChoosePacks(t *testing.T) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var packs []pack
	for i := range 40 {
		packs = append(packs, pack{id: strings.Repeat(string(rune('a'+i%6)), 64), size: 100, mtime: base.Add(time.Duration(i) * time.Hour)})
	}
	since := base.Add(30 * time.Hour) // packs 30..39 are new
	rnd := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name      string
		since     *time.Time
		budget    int64
		sampleOld int
		wantNew   int // packs at or after since among the chosen
		wantTotal int
	}{
		{"new within budget plus old sample", &since, 1 << 30, 5, 10, 15},
		{"budget caps the new packs, the rest join the pool", &since, 300, 0, 3, 3},
		{"no previous verify: everything is new", nil, 1 << 30, 5, 40, 40},
		{"sample larger than the pool", &since, 1 << 30, 100, 10, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := choosePacks(append([]pack(nil), packs...), tc.since, tc.budget, tc.sampleOld, rnd)
			fresh := 0
			seen := map[time.Time]bool{}
			for _, p := range got {
				if seen[p.mtime] {
					t.Fatalf("pack chosen twice: %v", p.mtime)
				}
				seen[p.mtime] = true
				if tc.since == nil || !p.mtime.Before(*tc.since) {
					fresh++
				}
			}
			if len(got) != tc.wantTotal || (tc.since != nil && fresh < tc.wantNew) || (tc.since == nil && fresh != tc.wantNew) {
				t.Fatalf("chose %d packs, %d new; want %d, at least %d new", len(got), fresh, tc.wantTotal, tc.wantNew)
			}
		})
	}
}

func TestListPacksSkipsNonPacks(t *testing.T) {
	repo := t.TempDir()
	id := strings.Repeat("ab", 32)
	files := map[string]string{
		"data/ab/" + id:                       "x",
		"data/ab/.tmp-" + id + "-0011":        "partial upload",
		"data/cd/" + id:                       "wrong directory",
		"data/ab/" + strings.ToUpper(id):      "upper case",
		"index/" + strings.Repeat("0", 64):    "not data",
		"data/ab/" + strings.Repeat("ab", 31): "short",
	}
	for name, content := range files {
		p := filepath.Join(repo, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := listPacks(repo)
	if err != nil || len(got) != 1 || got[0].id != id || got[0].size != 1 {
		t.Fatalf("listPacks = %+v, %v", got, err)
	}
}

func TestEscapePattern(t *testing.T) {
	for in, want := range map[string]string{
		"/home/a/plain.txt": "/home/a/plain.txt",
		"/x/we[ir]d *n?.t":  `/x/we\[ir\]d \*n\?.t`,
		`/x/back\slash`:     `/x/back\\slash`,
	} {
		if got := escapePattern(in); got != want {
			t.Errorf("escapePattern(%q) = %q, want %q", in, got, want)
		}
		if ok, err := filepath.Match(escapePattern(in), in); err != nil || !ok {
			t.Errorf("escaped %q does not match itself: %v", in, err)
		}
	}
}
