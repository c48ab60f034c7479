package trace

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-usdt/usdt/internal/ring"
)

// maxBacklog bounds the bytes of the ring's records that trace holds
// undecoded: past it, taking waits, and the program's buffers fill and
// count their losses, as when trace decodes as it takes.
const maxBacklog = 128 << 20

// deliverer hands the batches taken from the rings (ring.Session.Take)
// to their sessions' handlers on a goroutine of its own, in the order
// they were taken. The loop that takes them then frees the ring's room
// at the pace of a copy, not of decoding: a burst of large records
// (bbolt's Puts with their *Bucket, 56 MB in 0.15 s) outgrows a P's
// buffer while the reader decodes the first of it.
type deliverer struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []delivery
	bytes  int
	closed bool
	done   chan struct{}
	// dropping is set by an interrupt while draining: the records left
	// are counted in dropped, not handed on.
	dropping atomic.Bool
	dropped  atomic.Int64
	end      sync.Once
}

type delivery struct {
	s  *ring.Session
	b  *ring.Batch
	fn func(*ring.Record)
	// then, in a delivery of no batch, runs once the batches queued
	// before it have been handed on.
	then func()
}

func newDeliverer() *deliverer {
	d := &deliverer{done: make(chan struct{})}
	d.cond = sync.NewCond(&d.mu)
	go d.run()
	return d
}

// after has fn run once every batch queued so far has been handed on.
func (d *deliverer) after(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = append(d.queue, delivery{then: fn})
	d.cond.Broadcast()
}

// room waits until the backlog has room for n bytes more, or the
// deliverer is closed, and returns the room it has then (n at least).
func (d *deliverer) room(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for maxBacklog-d.bytes < n && !d.closed {
		d.cond.Wait()
	}
	return max(n, maxBacklog-d.bytes)
}

// put queues a batch, waiting while the backlog is full.
func (d *deliverer) put(s *ring.Session, b *ring.Batch, fn func(*ring.Record)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.bytes > maxBacklog && !d.closed {
		d.cond.Wait()
	}
	d.queue = append(d.queue, delivery{s: s, b: b, fn: fn})
	d.bytes += b.Bytes()
	d.cond.Broadcast()
}

func (d *deliverer) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if len(d.queue) == 0 {
			d.mu.Unlock()
			return
		}
		next := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
		if next.then != nil {
			next.then()
			continue
		}
		if d.dropping.Load() {
			d.dropped.Add(int64(next.b.Len()))
		} else {
			next.s.Deliver(next.b, func(r *ring.Record) {
				if d.dropping.Load() {
					d.dropped.Add(1)
					return
				}
				next.fn(r)
			})
		}
		d.mu.Lock()
		d.bytes -= next.b.Bytes()
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}

// ending says that the trace is ending (an interrupt, or the end of the
// process): the backlog can take seconds to print, so when it is large,
// ending calls notice with its bytes, and from now on an interrupt drops
// what is not yet handed on.
func (d *deliverer) ending(notice func(bytes int)) {
	d.end.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case <-sig:
				d.dropping.Store(true)
			case <-d.done:
			}
			signal.Stop(sig)
		}()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.bytes >= noticeBacklog && notice != nil {
			notice(d.bytes)
		}
	})
}

// drain waits until every batch queued has been handed on, and ends the
// goroutine; nothing may be put after. It returns how many records an
// interrupt dropped (ending).
func (d *deliverer) drain() (dropped int64) {
	d.mu.Lock()
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
	<-d.done
	return d.dropped.Load()
}

// noticeBacklog is the backlog that takes long enough to print, about a
// second, for drain to say so.
const noticeBacklog = 16 << 20
