package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/values"
)

// value is one decoded argument.
type value struct {
	raw    uint64
	signed bool
	size   int
	kind   probe.Kind // Invalid when the binary does not say
	str    *string
	// val is the value read through the argument, for those with a
	// layout.
	val values.Value
}

func (v value) int() int64 {
	shift := 64 - 8*v.size
	return int64(v.raw<<shift) >> shift
}

func (v value) uint() uint64 {
	shift := 64 - 8*v.size
	return v.raw << shift >> shift
}

func (v value) String() string {
	switch {
	case v.val != nil:
		return v.val.String()
	case v.str != nil:
		return strconv.Quote(*v.str)
	case v.kind == probe.Bool:
		return strconv.FormatBool(v.uint() != 0)
	case v.kind == probe.Pointer || v.kind == probe.Uintptr:
		return fmt.Sprintf("%#x", v.uint())
	case v.signed:
		return strconv.FormatInt(v.int(), 10)
	}
	return strconv.FormatUint(v.uint(), 10)
}

func (v value) json() any {
	switch {
	case v.val != nil:
		return v.val.JSON()
	case v.str != nil:
		return *v.str
	case v.kind == probe.Bool:
		return v.uint() != 0
	case v.signed:
		return v.int()
	}
	return v.uint()
}

type printer struct {
	opt   Options
	sites []site
	mono  time.Duration
	// w is buffered: a write per event would bound the rate the tracer
	// keeps up with. It is flushed whenever the ring buffer runs dry.
	w      *bufio.Writer
	hist   map[string]*[64]uint64
	filter int // tgid, 0 for all
	// paired are the functions whose exit probe is traced, for emit.
	paired map[string]bool
	names  *typeNames
}

func newPrinter(opt Options, sites []site) *printer {
	p := &printer{opt: opt, sites: sites, mono: monoOffset(), w: bufio.NewWriterSize(opt.Stdout, 64<<10), filter: opt.PID}
	if opt.Latency {
		p.hist = map[string]*[64]uint64{}
	}
	return p
}

// event prints one ring buffer record.
func (p *printer) event(b []byte) {
	if len(b) < evSmall {
		return
	}
	tgid := int(le.Uint64(b[evPidTgid:]) >> 32)
	tid := int(uint32(le.Uint64(b[evPidTgid:])))
	if p.filter != 0 && tgid != p.filter {
		return
	}
	idx := int(le.Uint32(b[evCookie:]))
	if idx >= len(p.sites) {
		return
	}
	s := &p.sites[idx]
	vals := make([]value, len(s.args))
	for i, a := range s.args {
		vals[i] = value{raw: le.Uint64(b[evArgs+8*i:]), signed: a.signed, size: a.size}
		if s.kinds != nil {
			vals[i].kind = s.kinds[i]
		}
		if s.strs[i] && vals[i].raw != 0 && len(b) >= evStrings+strMax*(i+1) {
			str := b[evStrings+strMax*i : evStrings+strMax*(i+1)]
			if n := bytes.IndexByte(str, 0); n >= 0 {
				str = str[:n]
			}
			v := string(str)
			vals[i].str = &v
		}
		vals[i].val = s.decodeValue(i, vals[i].raw, b, p.names.of(tgid))
	}
	t := time.Unix(0, int64(le.Uint64(b[evTime:]))+int64(p.mono))
	var gid uint64
	var elapsed time.Duration
	auto := s.fn != "" && len(vals) > 0
	if auto {
		gid, vals = vals[0].uint(), vals[1:]
		if s.exit && len(vals) > 0 {
			elapsed, vals = time.Duration(vals[0].uint()), vals[1:]
			if p.hist != nil {
				h := p.hist[s.fn]
				if h == nil {
					h = new([64]uint64)
					p.hist[s.fn] = h
				}
				// The last bucket takes the times past it, as in
				// -stats's program: 2^63 ns or more, which no call
				// lasts, come of a damaged record.
				h[min(bits.Len64(uint64(elapsed)), len(h)-1)]++
			}
		}
	}
	if p.opt.Events != nil {
		p.emit(t, tgid, tid, s, gid, elapsed, vals)
		if !p.opt.JSON {
			return
		}
	}
	if p.opt.JSON {
		p.json(t, tgid, tid, s, auto, gid, elapsed, vals)
		return
	}
	var line strings.Builder
	line.WriteString(t.Format("15:04:05.000000"))
	if auto {
		fmt.Fprintf(&line, " g=%d %s", gid, s.label())
	} else {
		fmt.Fprintf(&line, " pid=%d tid=%d %s", tgid, tid, s.label())
	}
	if s.exit {
		line.WriteString(" = (")
	} else {
		line.WriteString("(")
	}
	for i, v := range vals {
		if i > 0 {
			line.WriteString(", ")
		}
		line.WriteString(s.names[i] + "=" + v.String())
	}
	if len(s.dropped) > 0 {
		line.WriteString("; dropped: " + strings.Join(s.dropped, ", "))
	}
	line.WriteString(")")
	if s.exit {
		fmt.Fprintf(&line, " %v", elapsed)
	}
	line.WriteByte('\n')
	p.w.WriteString(line.String())
}

func (p *printer) json(t time.Time, tgid, tid int, s *site, auto bool, gid uint64, elapsed time.Duration, vals []value) {
	ev := map[string]any{
		"time":     t.Format(time.RFC3339Nano),
		"pid":      tgid,
		"tid":      tid,
		"provider": s.Provider,
		"probe":    s.Name,
	}
	args := make(object, len(vals))
	for i, v := range vals {
		args[i] = field{s.names[i], v.json()}
	}
	if len(s.dropped) > 0 {
		ev["dropped"] = s.dropped
	}
	if auto {
		ev["goroutine"] = gid
		ev["function"] = s.fn
	}
	if s.exit {
		ev["results"] = args
		ev["elapsed_ns"] = int64(elapsed)
	} else {
		ev["args"] = args
	}
	b, _ := json.Marshal(ev)
	p.w.Write(append(b, '\n'))
}

// object is a JSON object that keeps its keys in order, so that arguments
// come as they are declared.
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
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
		printHist(p.w, h)
	}
}

// printHist prints the rows of a latency histogram, powers of two of
// nanoseconds (bucket b holds the durations bits.Len64 puts there), its
// columns aligned however wide its buckets' labels are.
func printHist(w io.Writer, h *[64]uint64) {
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
