package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamidx/streamidx/compactor"
)

// progressLine draws one updating status line on a terminal. It draws
// nothing when the output is not a terminal unless forced, so logs and
// scripts stay clean.
type progressLine struct {
	w       io.Writer
	start   time.Time
	enabled bool
	drawn   bool
}

func newProgressLine(w io.Writer, mode string) *progressLine {
	enabled := mode == "always"
	if mode == "auto" {
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				enabled = true
			}
		}
	}
	return &progressLine{w: w, start: time.Now(), enabled: enabled}
}

func (p *progressLine) build(b compactor.BuildProgress) {
	if !p.enabled {
		return
	}
	el := time.Since(p.start).Seconds()
	var line string
	switch b.Phase {
	case "scan":
		pct := ""
		if b.RowsExpected > 0 {
			pct = fmt.Sprintf(" %5.1f%%", 100*float64(b.RowsScanned)/float64(b.RowsExpected))
		}
		line = fmt.Sprintf("scan %d rows%s (%.0f rows/s)", b.RowsScanned, pct, float64(b.RowsScanned)/max(el, 1e-3))
	case "write", "done":
		pct := ""
		if b.RowsScanned > 0 {
			pct = fmt.Sprintf(" %5.1f%%", 100*float64(b.RowsWritten)/float64(b.RowsScanned))
		}
		line = fmt.Sprintf("write %d/%d entries%s, %d range files, %s", b.RowsWritten, b.RowsScanned, pct, b.FilesWritten, humanBytes(b.BytesWritten))
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.drawn = true
	if b.Phase == "done" {
		p.finish()
	}
}

func (p *progressLine) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
