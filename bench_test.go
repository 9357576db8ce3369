package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAPI measures the figures of issue 2 over real HTTP against the
// real serve, in-process so that -cpuprofile and -memprofile see the server:
//
//	go test -run '^$' -bench BenchmarkAPI -benchtime 50x .
//
// The data directory is seeded once per run with admin seed-bench (10,000
// endpoints, 1,000,000 audit rows, 50 keys; BACKSTOP_BENCH_ENDPOINTS and
// BACKSTOP_BENCH_AUDIT scale it down). The per-key rate limit is raised
// through SERVICE_API_RATE_LIMIT, as the wrk run of docs/benchmarks.md does.
// Every request is authenticated and audited exactly as in production.
func BenchmarkAPI(b *testing.B) {
	endpoints, audit := benchEnv("BACKSTOP_BENCH_ENDPOINTS", 10000), benchEnv("BACKSTOP_BENCH_AUDIT", 1000000)
	dir := b.TempDir()
	vars := map[string]string{
		"SERVICE_LISTEN": "127.0.0.1:0", "SERVICE_DATA_DIR": filepath.Join(dir, "data"), "SERVICE_LOG_LEVEL": "error",
		"SERVICE_API_RATE_LIMIT": "1000000000",
	}
	e := env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return vars[k] }}
	keysFile, idsFile := filepath.Join(dir, "keys.txt"), filepath.Join(dir, "ids.txt")
	seedStart := time.Now()
	err := run(context.Background(), []string{"admin", "seed-bench", "--endpoints", strconv.Itoa(endpoints),
		"--audit", strconv.Itoa(audit), "--keys", "50", "--keys-file", keysFile, "--ids-file", idsFile}, e)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d endpoints and %d audit rows in %s", endpoints, audit, time.Since(seedStart).Round(time.Millisecond))
	keys, ids := benchLines(b, keysFile), benchLines(b, idsFile)

	addrc := make(chan string, 1)
	e.listening = func(addr string) { addrc <- addr }
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, e) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()
	var base string
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-served:
		b.Fatalf("serve ended: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	b.Run("endpoints.list", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		var size int64
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			n, err := benchGet(client, base+"/api/v1/endpoints", keys[i%len(keys)])
			if err != nil {
				b.Fatal(err)
			}
			size = n
			lat = append(lat, time.Since(start))
		}
		benchReportLatency(b, lat)
		b.ReportMetric(float64(size)/1e6, "MB/answer")
	})

	// Start-up of a second serve on the same seeded data: exec to listening
	// (the "startup" the serve log prints), database already migrated.
	b.Run("startup", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			v2 := maps.Clone(vars)
			e2 := e
			e2.getenv = func(k string) string { return v2[k] }
			up := make(chan struct{}, 1)
			e2.listening = func(string) { up <- struct{}{} }
			ctx2, stop2 := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- run(ctx2, []string{"serve"}, e2) }()
			select {
			case <-up:
				lat = append(lat, time.Since(start))
			case err := <-done:
				b.Fatalf("second serve ended: %v", err)
			}
			stop2()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		benchReportLatency(b, lat)
	})

	// Small audited reads from 50 keys at once: the throughput figure.
	b.Run("endpoints.get-50keys", func(b *testing.B) {
		var n atomic.Int64
		b.SetParallelism(16) // 16 x GOMAXPROCS concurrent clients
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				if _, err := benchGet(client, base+"/api/v1/endpoints/"+ids[int(i)%len(ids)], keys[int(i)%len(keys)]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "req/s")
	})
}

// benchGet reads url with the key and returns the body size; any failure
// is an error (safe to call from RunParallel goroutines).
func benchGet(client *http.Client, url, key string) (int64, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return n, err
}

func benchReportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func benchLines(b *testing.B, file string) []string {
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	return strings.Fields(string(bytes.TrimSpace(raw)))
}

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}
