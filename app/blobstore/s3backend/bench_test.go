package s3backend_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"backstop/app/blobstore/s3backend"
	"backstop/app/blobstore/s3backend/s3test"
)

// stream hides Seek, as a pipe would.
type stream struct{ io.Reader }

func newBackendB(b *testing.B, srv *s3test.Server) *s3backend.Backend {
	backend, err := s3backend.New(b.Context(), srv.Config())
	if err != nil {
		b.Fatal(err)
	}
	return backend
}

// BenchmarkPut writes same-size objects one after another to a real
// versitygw, over http and https: "plain" is a bare PutObject with the same
// client (Backend.PlainPut, the baseline), "create" is Backend.Create from a
// bytes.Reader (If-None-Match, size check), "create-stream" is Create from
// a reader without Seek (over http spooled to a temporary file first, over
// https streamed with a trailing checksum). Compare the MB/s column.
func BenchmarkPut(b *testing.B) {
	for _, proto := range []string{"http", "https"} {
		var srv *s3test.Server
		if proto == "http" {
			srv = s3test.StartVersity(b)
		} else {
			srv = s3test.StartVersityTLS(b)
		}
		backend := newBackendB(b, srv)
		for _, size := range []int{4 << 20, 16 << 20} {
			data := bytes.Repeat([]byte("backstop"), size/8)
			for _, mode := range []string{"plain", "create", "create-stream"} {
				b.Run(fmt.Sprintf("%s/%s/%dMiB", proto, mode, size>>20), func(b *testing.B) {
					b.SetBytes(int64(size))
					run := time.Now().UnixNano() // -count reruns use new names
					i := 0
					for b.Loop() {
						i++
						key := fmt.Sprintf("bench/%s/%d/%d-%d", mode, size, run, i)
						var err error
						switch mode {
						case "plain":
							err = backend.PlainPut(b.Context(), key, data)
						case "create":
							err = backend.Create(b.Context(), key, bytes.NewReader(data), int64(size))
						case "create-stream":
							err = backend.Create(b.Context(), key, stream{bytes.NewReader(data)}, int64(size))
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		srv.Stop()
	}
}
