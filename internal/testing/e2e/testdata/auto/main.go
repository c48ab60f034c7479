// Command auto is a small order service for the end-to-end tests of the
// automatic probes that usdt-toolexec -rules rules.yml inserts. Modes:
//
//	auto demo   one call of each kind of function, printing what probes see
//	auto ship   50 goroutines ship orders concurrently
//	auto crash  divides by zero inside instrumented functions
//	auto latency  calls that take known times: sleeping, recursing, panicking
//	auto all    demo, ship, latency, then crash and recover
package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"example.com/auto/orders"
)

// Notifier tells customers about their orders.
type Notifier interface {
	Notify(string, int64) (int, error)
}

// nopNotifier drops every notification: unnamed receiver, parameters and
// results.
type nopNotifier struct{}

func (nopNotifier) Notify(string, int64) (int, error) { return -1, nil }

// tally counts events; no rule selects its methods.
type tally struct{ n int }

func (t *tally) add(k int) { t.n += k }

var events tally

func init() { events.add(1) }

// goid is the running goroutine's id, as stack traces show it.
func goid() int64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// logf prints a line (entry probe only).
func logf(format string, args ...any) {
	events.add(1)
	fmt.Printf(format+"\n", args...)
}

// audit folds fourteen counters into one checksum: more arguments than a
// probe can carry.
func audit(a, b, c, d, e, f, g, h, i, j, k, l, m, n int16) int {
	return int(a + b + c + d + e + f + g + h + i + j + k + l + m + n)
}

// tryReserve turns Reserve's panic into left -1, ok false.
func tryReserve(s *orders.Store, item string, n int) (left int, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			left, ok = -1, false
		}
	}()
	return s.Reserve(item, n), true
}

// settle splits each price among shares: zero shares panic in the
// closure.
func settle(prices []int64, shares int64) (total int64) {
	orders.ForEach(prices, func(p int64) {
		total += p / shares
	})
	return total
}

func demo() {
	store := orders.NewStore(map[string]int{"tea": 5, "cup": 1})
	logf("store=%p gid=%d", store, goid())
	_, err := store.Place("bob", -3, 450, false)
	logf("place bob err=%v", err)
	o, err := store.Place("alice", 2, 1250, true)
	logf("place alice order=%p err=%v", o, err)
	logf("total=%d", o.Total(200))
	logf("minus=%d", orders.Cents(100).Minus(250))
	for _, d := range []orders.Cents{11, 22, 33} {
		done := make(chan bool)
		go func() {
			logf("minus d=%d gid=%d result=%d", d, goid(), orders.Cents(5).Minus(d))
			close(done)
		}()
		<-done
	}
	logf("sum=%d", orders.Sum([]orders.Cents{1, 2, 3}, 10))
	var q orders.Queue[string]
	logf("queue=%p", &q)
	q.Push("first")
	logf("push=%d len=%d", q.Push("second"), q.Len())
	logf("tag=%d", orders.Tag("vip", 7, 0, 250))
	big, err := orders.Check("gift wrap", 12, true)
	logf("check=%v err=%v", big, err)
	var n Notifier = nopNotifier{}
	sent, err := n.Notify("carol", -42)
	logf("notify=%d err=%v", sent, err)
	row, col := orders.FindBin([][]int{{0, 1}, {3, 9}}, 4)
	logf("bin=%d,%d", row, col)
	share, err := orders.SplitBill(1000, 4)
	logf("split=%d err=%v", share, err)
	share, err = orders.SplitBill(1000, 0)
	logf("split=%d err=%v", share, err)
	left, ok := tryReserve(store, "tea", 2)
	logf("reserve=%d ok=%v", left, ok)
	left, ok = tryReserve(store, "cup", 3)
	logf("reserve=%d ok=%v", left, ok)
	logf("tax=%v", orders.Tax(1.5, 0.25))
	logf("audit=%d", audit(1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14))
	logf("settle=%d", settle([]int64{30, 60}, 3))
	logf("mix=%d", orders.Mix(7))
	e, v := orders.Echo(err, 42)
	logf("echo=%v,%v", e, v)
}

// ship ships 50 orders from 50 goroutines on at least two threads.
func ship() {
	runtime.GOMAXPROCS(4)
	store := orders.NewStore(nil)
	var ids []int64
	for i := range 50 {
		o, err := store.Place("bulk", int8(i%100+1), 100, false)
		if err != nil {
			panic(err)
		}
		ids = append(ids, o.ID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := store.Ship(id); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	logf("shipped=%d failed=%d", len(ids), failed)
}

// runCrash panics: settle divides by zero.
func runCrash() {
	logf("settle=%d", settle([]int64{30, 60}, 0))
}

// nap sleeps 2ms: tiny, but it calls a function, so it is not split.
func nap() { time.Sleep(2 * time.Millisecond) }

// descend recurses n deep, sleeping 1ms a level: the call at level n
// takes at least n ms, 1ms more than the call it makes.
func descend(n int) int {
	if n == 0 {
		return 0
	}
	time.Sleep(time.Millisecond)
	return descend(n-1) + 1
}

// panicky sleeps 2ms and panics.
func panicky() {
	time.Sleep(2 * time.Millisecond)
	panic("boom")
}

// rescue sleeps 1ms, lets panicky's panic unwind into it, and recovers
// after sleeping 2ms more: it takes at least 3ms longer than panicky.
func rescue() (err error) {
	defer func() {
		if r := recover(); r != nil {
			time.Sleep(2 * time.Millisecond)
			err = fmt.Errorf("recovered %v", r)
		}
	}()
	time.Sleep(time.Millisecond)
	panicky()
	return nil
}

// spread returns eleven results: one more than an exit probe can carry
// after the goroutine id and the elapsed time.
func spread(n int8) (a, b, c, d, e, f, g, h, i, j, k int8) {
	return n, n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8, n + 9, n + 10
}

func latency() {
	nap()
	logf("shield=%d,%d", shield(4), shield(-1))
	logf("descend=%d", descend(3))
	logf("rescue=%v", rescue())
	_, _, _, _, _, _, _, _, _, _, k := spread(1)
	logf("spread=%d", k)
}

func main() {
	mode := "demo"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "demo":
		demo()
	case "ship":
		ship()
	case "crash":
		runCrash()
	case "latency":
		latency()
	case "all":
		demo()
		ship()
		latency()
		func() {
			defer func() { logf("recovered: %v", recover()) }()
			runCrash()
		}()
	default:
		fmt.Fprintln(os.Stderr, "usage: auto demo|ship|crash|latency|all")
		os.Exit(2)
	}
	logf("done events=%d", events.n)
}

// brittle doubles n and panics when n is negative. Its rule has unwind:
// false: its exit probe fires when it returns, not when its panic unwinds
// through it.
func brittle(n int) int {
	if n < 0 {
		panic("brittle")
	}
	return n * 2
}

// shield returns brittle(n), or -1 when brittle panics.
func shield(n int) (r int) {
	defer func() {
		if recover() != nil {
			r = -1
		}
	}()
	return brittle(n)
}
