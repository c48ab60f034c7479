package ring

// lossSpan is a stretch of time in which a P dropped events: each dropped
// event read the clock after from and no later than to.
type lossSpan struct{ from, to int64 }

// losses decides which records may follow dropped events of their
// goroutine (Record.AfterLoss), from the spans in which Ps dropped
// events, of any goroutine. A drop is known only by a P's count, read at
// each Take, so a span is as long as the time between two Takes, and a
// goroutine that writes its records on one P while another drops events
// may have lost some of its own at any time in it: every record within a
// span follows a loss, and so does each goroutine's first record after
// it. Records come in the order of their times.
type losses struct {
	// pending are the spans that begin after the last record, in order
	// and apart.
	pending []lossSpan
	// cur is the last span that began, when begun; cleared holds the
	// goroutines that had a record since it ended.
	cur     lossSpan
	begun   bool
	cleared map[uint64]bool
}

// add takes a span, which begins no earlier than those added before.
func (l *losses) add(s lossSpan) {
	if n := len(l.pending); n > 0 && s.from <= l.pending[n-1].to {
		l.pending[n-1].to = max(l.pending[n-1].to, s.to)
		return
	}
	l.pending = append(l.pending, s)
}

// after reports whether goroutine g's record at time t may follow events
// of g that were dropped. marked says that the record's P dropped events
// since its last record (AfterLossBit): of any goroutine, so every
// goroutine's next record follows a loss.
func (l *losses) after(g uint64, t int64, marked bool) bool {
	for len(l.pending) > 0 && l.pending[0].from < t {
		l.begin(l.pending[0])
		l.pending = l.pending[1:]
	}
	if marked {
		l.begin(lossSpan{t - 1, t - 1})
	}
	switch {
	case !l.begun:
		return false
	case t <= l.cur.to:
		return true
	case l.cleared[g]:
		return false
	}
	l.cleared[g] = true
	return true
}

// begin makes s the current span, or part of it where they overlap: the
// goroutines cleared before are not, whose next records may follow a
// drop in s.
func (l *losses) begin(s lossSpan) {
	if l.begun && s.from <= l.cur.to {
		l.cur.to = max(l.cur.to, s.to)
	} else {
		l.cur, l.begun = s, true
	}
	l.cleared = map[uint64]bool{}
}
