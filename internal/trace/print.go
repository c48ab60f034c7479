package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-usdt/usdt/internal/trace/bpfprog"
)

// printer writes Events as text or -json lines, hands them to
// Options.Events, and keeps -latency's histograms.
type printer struct {
	opt Options
	// w is buffered: a write per event would bound the rate the tracer
	// keeps up with. It is flushed whenever the ring buffer runs dry.
	w    *bufio.Writer
	hist map[string]*hist
	line []byte
}

func newPrinter(opt Options) *printer {
	p := &printer{opt: opt, w: bufio.NewWriterSize(opt.Stdout, 64<<10)}
	if opt.Latency {
		p.hist = map[string]*hist{}
	}
	return p
}

func (p *printer) print(ev *Event) {
	if p.hist != nil && ev.Exit && ev.Function != "" {
		h := p.hist[ev.Function]
		if h == nil {
			h = new(hist)
			p.hist[ev.Function] = h
		}
		h.add(ev.Elapsed)
	}
	if p.opt.Events != nil {
		p.opt.Events(ev)
		if !p.opt.JSON {
			return
		}
	}
	if p.opt.JSON {
		line, err := ev.AppendJSON(p.line[:0])
		if err != nil {
			fmt.Fprintf(p.opt.Stderr, "usdt-toolexec trace: %s: %v\n", ev.Label(), err)
			return
		}
		p.line = append(line, '\n')
		p.w.Write(p.line)
		return
	}
	p.line = append(ev.AppendText(p.line[:0]), '\n')
	p.w.Write(p.line)
}

// finish prints the latency histograms.
func (p *printer) finish() {
	defer p.w.Flush()
	fns := make([]string, 0, len(p.hist))
	for fn := range p.hist {
		fns = append(fns, fn)
	}
	sort.Strings(fns)
	for _, fn := range fns {
		h := p.hist[fn]
		var total uint64
		for _, n := range h {
			total += n
		}
		fmt.Fprintf(p.w, "\n%s: %d calls\n", fn, total)
		h.print(p.w)
	}
}

// hist is a latency histogram, -latency's and -stats's: bucket b counts
// the durations bits.Len64 puts there, powers of two of nanoseconds.
type hist [bpfprog.HistBuckets]uint64

// add counts d. The last bucket takes the times past it, as in -stats's
// program: 2^63 ns or more, which no call lasts, come of a damaged record.
func (h *hist) add(d time.Duration) {
	h[min(bits.Len64(uint64(d)), len(h)-1)]++
}

// print prints the histogram's rows, its columns aligned however wide
// its buckets' labels are.
func (h *hist) print(w io.Writer) {
	type row struct {
		bucket string
		n      uint64
	}
	var rows []row
	var most uint64
	// At least the widths most buckets and counts fit in, so that most
	// histograms line up with each other too.
	bucketWidth, countWidth := 22, 8
	for b, n := range h {
		if n == 0 {
			continue
		}
		lo, hi := bucketBounds(b)
		r := row{fmt.Sprintf("[%v, %v)", lo, hi), n}
		rows = append(rows, r)
		most = max(most, n)
		bucketWidth = max(bucketWidth, utf8.RuneCountInString(r.bucket))
		countWidth = max(countWidth, len(strconv.FormatUint(n, 10)))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s %*d |%-40s|\n", bucketWidth, r.bucket, countWidth, r.n, strings.Repeat("@", int(40*r.n/most)))
	}
}

// bucketBounds are the durations bucket b of a histogram holds, lo
// included, hi not.
func bucketBounds(b int) (lo, hi time.Duration) {
	if b > 0 {
		lo = time.Duration(uint64(1) << (b - 1))
	}
	hi = time.Duration(uint64(math.MaxInt64))
	if b < 63 {
		hi = time.Duration(uint64(1) << b)
	}
	return lo, hi
}
