package restapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

// stdJSON is what huma's default format writes for v.
func stdJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := huma.DefaultJSONFormat.Marshal(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fastJSON is what the server's format writes for v.
func fastJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jsonFormat.Marshal(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Strings that exercise every branch of the escaper.
var trickyStrings = []string{
	"", "plain-host.example", `quote " and backslash \`, "tab\tnewline\nreturn\rbs\bff\f",
	"\x00\x01\x1f\x7f", "<script>&amp;</script>", "ünïcödé ✓ 日本語 🚀", "line\u2028sep\u2029para",
	"bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate", "trailing \xe2\x80", "/slash/", "\u00a0nbsp",
}

// randomString mixes tricky fragments with random runes, including invalid
// bytes, so the escaper sees them in every position.
func randomString(r *rand.Rand) string {
	var sb strings.Builder
	for n := r.IntN(5); n >= 0; n-- {
		switch r.IntN(4) {
		case 0:
			sb.WriteString(trickyStrings[r.IntN(len(trickyStrings))])
		case 1:
			sb.WriteByte(byte(r.IntN(256)))
		case 2:
			sb.WriteRune(rune(r.IntN(0x110000)))
		default:
			sb.WriteString("abc-123.local")
		}
	}
	return sb.String()
}

func randomTime(r *rand.Rand) time.Time {
	switch r.IntN(8) {
	case 0:
		return time.Time{} // year 1
	case 1:
		return time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	case 2:
		return time.Date(10000+r.IntN(100), 1, 2, 3, 4, 5, 0, time.UTC) // beyond the fixed layout
	case 3:
		return time.Date(-r.IntN(50)-1, 6, 7, 8, 9, 10, 0, time.UTC)
	case 4: // not UTC, sub-millisecond digits
		return time.Date(2026, 3, 29, 1, 30, 0, 123_456_789, time.FixedZone("x", 5*3600+1800))
	}
	return time.Unix(r.Int64N(4e9), r.Int64N(1e9))
}

func randomTimePtr(r *rand.Rand) *app.Time {
	if r.IntN(3) == 0 {
		return nil
	}
	// Views hold app.At times, but the encoder must not rely on it.
	if r.IntN(2) == 0 {
		return &app.Time{Time: randomTime(r)}
	}
	return app.Ptr(app.At(randomTime(r)))
}

func pick(r *rand.Rand, values ...string) string { return values[r.IntN(len(values))] }

func randomView(r *rand.Rand) app.EndpointView {
	v := app.EndpointView{
		ID: randomString(r), TenantID: randomString(r), Hostname: randomString(r), DisplayName: randomString(r),
		Profile:      pick(r, app.ProfileServer, app.ProfileClient, ""),
		OS:           pick(r, "linux", "darwin", ""),
		Arch:         pick(r, "amd64", "arm64", ""),
		AgentVersion: pick(r, "1.2.3", "0.0.0-dev", randomString(r)),
		Status:       pick(r, app.EndpointActive, app.EndpointRevoked),
		Connection:   pick(r, app.ConnectionOnline, app.ConnectionOffline, app.ConnectionNever),
		LastSeenAt:   randomTimePtr(r), LastBackupAt: randomTimePtr(r), LastSuccessAt: randomTimePtr(r),
		Readiness: app.Readiness{
			State: pick(r, app.ReadinessGreen, app.ReadinessYellow, app.ReadinessRed, app.ReadinessUnverified,
				app.ReadinessNoBackup),
			CheckedAt: randomTimePtr(r), Overdue: r.IntN(2) == 0,
		},
		CreatedAt: app.Time{Time: randomTime(r)},
	}
	if a := pick(r, "", app.AttentionSilent, app.AttentionBackupOverdue, app.AttentionLastBackupFailed,
		app.AttentionRestoreTestFailed, app.AttentionRepositoryDamaged, app.AttentionNeverSeen); a != "" {
		v.Attention = &a
	}
	return v
}

func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	views := make([]app.EndpointView, 3000)
	for i := range views {
		views[i] = randomView(r)
	}
	t.Run("each view", func(t *testing.T) {
		for i := range views {
			want := stdJSON(t, views[i])
			got := append(appendEndpointView(nil, &views[i]), '\n')
			if !bytes.Equal(got, want) {
				t.Fatalf("view %d:\n got %s\nwant %s", i, got, want)
			}
		}
	})
	t.Run("strings", func(t *testing.T) {
		for i := 0; i < 20000; i++ {
			s := randomString(r)
			want := stdJSON(t, s) // the encoder without HTML escaping, as huma's default

			if got := append(appendJSONString(nil, s), '\n'); !bytes.Equal(got, want) {
				t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
			}
		}
	})
	t.Run("list body", func(t *testing.T) {
		for _, body := range []endpointsOutputBody{
			{Items: views, Total: len(views)},
			{Items: views[:1], Total: 1},
			{Items: []app.EndpointView{}, Total: 0},
			{Items: nil, Total: 0},
		} {
			want := stdJSON(t, body)
			got := fastJSON(t, body) // streamed in chunks
			if !bytes.Equal(got, want) {
				t.Fatalf("list of %d: streamed answer differs from encoding/json (%d vs %d bytes)", len(body.Items), len(got), len(want))
			}
			if app := append(body.AppendJSON(nil), '\n'); !bytes.Equal(app, want) {
				t.Fatalf("list of %d: AppendJSON differs from encoding/json", len(body.Items))
			}
			if !utf8.Valid(got) {
				t.Fatal("answer is not valid UTF-8")
			}
			var a, b any
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatal("parsed answers differ")
			}
		}
	})
	t.Run("other bodies use encoding/json", func(t *testing.T) {
		v := map[string]any{"html": "<&>", "n": 1}
		if got, want := fastJSON(t, v), stdJSON(t, v); !bytes.Equal(got, want) {
			t.Fatalf("got %s want %s", got, want)
		}
	})
}

// A new field in EndpointView must be added to appendEndpointView too: the
// random views above fill every field, so the byte comparison fails when
// one is missing; this makes the reason obvious.
func TestFastJSONCoversEveryEndpointViewField(t *testing.T) {
	typ := reflect.TypeFor[app.EndpointView]()
	v := randomView(rand.New(rand.NewPCG(3, 4)))
	out := string(appendEndpointView(nil, &v))
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(out, `"`+name+`":`) {
			t.Errorf("appendEndpointView does not write EndpointView.%s (%q)", typ.Field(i).Name, name)
		}
	}
}

// The list's schema keeps the name and shape it had as an anonymous body.
func TestEndpointListSchemaUnchanged(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	spec := h.srv.OpenAPI()
	resp := spec.Paths["/api/v1/endpoints"].Get.Responses["200"].Content["application/json"].Schema
	if resp.Ref != "#/components/schemas/EndpointsOutputBody" {
		t.Fatalf("list answer schema is %q", resp.Ref)
	}
	s := spec.Components.Schemas.Map()["EndpointsOutputBody"]
	if s == nil || s.Properties["items"] == nil || s.Properties["items"].Items.Ref != "#/components/schemas/EndpointView" ||
		s.Properties["total"] == nil || s.Properties["total"].Type != "integer" {
		t.Fatalf("EndpointsOutputBody schema changed: %+v", s)
	}
}

func BenchmarkEndpointListJSON(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	views := make([]app.EndpointView, 10000)
	for i := range views {
		views[i] = randomView(r)
	}
	body := endpointsOutputBody{Items: views, Total: len(views)}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			_ = body.WriteJSON(discard{})
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = huma.DefaultJSONFormat.Marshal(discard{}, body)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
