package archive_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"backstop/app/archive"
)

// BenchmarkIngest is Ingest without SMTP: 8 concurrent callers, 50 KiB.
func BenchmarkIngest(b *testing.B) {
	f := newFixture(b, opts{})
	ch := f.channel()
	base := testMessage(0, 50<<10)
	b.SetBytes(50 << 10)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + 7) / 8
	for s := 0; s < 8; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				raw := append([]byte("X-Seq: "+itoa(int64(s*per+i))+"\r\n"), base...)
				if _, err := f.svc.Ingest(context.Background(), ch, archive.Envelope{}, bytes.NewReader(raw)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*8)/time.Since(start).Seconds(), "msgs/s")
}
