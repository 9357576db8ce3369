package imapbackup

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

func TestCaptureBaselineAndNew(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	old := testMessage(1, 200)
	f.appendMsg(c, "INBOX", old, nil, time.Now())
	ctx := context.Background()
	cur := map[string]FolderCursor{}
	var got [][]byte
	deliver := func(m CapturedMessage) error {
		b, err := io.ReadAll(m.Body)
		got = append(got, b)
		return err
	}
	if _, err := Capture(ctx, f.acct, CaptureRequest{Cursor: cur, Baseline: true, Deliver: deliver}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("baseline delivered %d", len(got))
	}
	n1, n2 := testMessage(2, 300), testMessage(3, 400)
	f.appendMsg(c, "INBOX", n1, nil, time.Now())
	f.appendMsg(c, "INBOX", n2, nil, time.Now())
	res, err := Capture(ctx, f.acct, CaptureRequest{Cursor: cur, Deliver: deliver})
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != 2 || len(got) != 2 || !bytes.Equal(got[0], n1) || !bytes.Equal(got[1], n2) {
		t.Fatalf("delivered %d: %q", res.Delivered, got)
	}
	res, err = Capture(ctx, f.acct, CaptureRequest{Cursor: cur, Deliver: deliver})
	if err != nil || res.Delivered != 0 {
		t.Fatalf("second capture: %v, %+v", err, res)
	}
}
