package agent

import (
	"fmt"
	"io"
	"strings"
	"time"

	"backstop/agentapi/wire"

	"github.com/dustin/go-humanize"
)

// progressBar draws one self-overwriting line for a human at a terminal:
//
//	uploading [##########----------]  50.0%  1.2 GB / 2.4 GB  120 / 240 files
type progressBar struct {
	w    io.Writer
	last time.Time
}

func (b *progressBar) draw(p wire.Progress) {
	if time.Since(b.last) < 200*time.Millisecond && p.Percent < 100 {
		return
	}
	b.last = time.Now()
	fmt.Fprint(b.w, "\r"+renderBar(p)+"\033[K")
}

func renderBar(p wire.Progress) string {
	const cells = 30
	pct := min(max(p.Percent, 0), 100)
	filled := int(pct / 100 * cells)
	line := fmt.Sprintf("%-10s [%s%s] %5.1f%%", p.Phase, strings.Repeat("#", filled), strings.Repeat("-", cells-filled), pct)
	if p.BytesTotal > 0 {
		line += fmt.Sprintf("  %s / %s", humanize.Bytes(uint64(p.BytesDone)), humanize.Bytes(uint64(p.BytesTotal)))
	}
	if p.FilesTotal > 0 {
		line += fmt.Sprintf("  %d / %d files", p.FilesDone, p.FilesTotal)
	}
	return line
}
