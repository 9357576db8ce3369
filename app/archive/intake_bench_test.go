package archive_test

import (
	"context"
	"net/smtp"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSMTPIntake delivers 50 KiB messages from 8 concurrent senders
// over loopback (one SMTP connection each, many messages per connection),
// each 250 durable, and reports messages/s and the time from a 250 to the
// signed checkpoint covering it (default interval 60 s).
func BenchmarkSMTPIntake(b *testing.B) {
	f := newFixture(b, opts{blobs: true}) // default CheckpointEvery
	ch := f.channel()
	addr := f.listen(nil)
	const senders = 8
	msgs := make([][]byte, 64)
	for i := range msgs {
		msgs[i] = testMessage(i, 50<<10)
	}
	var seq atomic.Int64
	var mu sync.Mutex
	var acked []time.Time // when each 250 came
	b.SetBytes(50 << 10)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + senders - 1) / senders
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := smtp.Dial(addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			for i := 0; i < per; i++ {
				n := seq.Add(1)
				raw := append([]byte("X-Seq: "+itoa(n)+"\r\n"), msgs[n%int64(len(msgs))]...)
				if err := c.Mail("exchange@tenant.example"); err != nil {
					b.Error(err)
					return
				}
				if err := c.Rcpt(ch.Address); err != nil {
					b.Error(err)
					return
				}
				w, err := c.Data()
				if err != nil {
					b.Error(err)
					return
				}
				w.Write(raw)
				if err := w.Close(); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, time.Now())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(len(acked))/elapsed.Seconds(), "msgs/s")
	// Time from the last 250 to the checkpoint covering every record.
	ctx := context.Background()
	size, _ := f.db.ArchiveSize(ctx, f.tenant)
	last := acked[len(acked)-1]
	for {
		cp, err := f.db.LatestArchiveCheckpoint(ctx, f.tenant)
		if err == nil && cp.Size >= size {
			sort.Slice(acked, func(i, j int) bool { return acked[i].Before(acked[j]) })
			b.ReportMetric(time.Since(acked[0]).Seconds(), "s-first250-to-checkpoint")
			b.ReportMetric(time.Since(last).Seconds(), "s-last250-to-checkpoint")
			return
		}
		if time.Since(last) > 90*time.Second {
			b.Fatal("no covering checkpoint within 90 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
