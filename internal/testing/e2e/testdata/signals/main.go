// Command signals calls its probed function, step, for the tests of how a
// traced program takes its signals:
//
//	signals [-pidfile F] [-wait] [-gc] [-nohup] [-cpu D | -for D | -calls N] [-idle D -burst N] [-exit N]
//
// -pidfile writes its pid to F before the calls. -wait prints "ready" and
// waits for a line on stdin before them. -gc runs runtime.GC in a loop
// on a goroutine of its own meanwhile. -nohup ignores SIGHUP. The calls go on until the process
// has used D of CPU time (-cpu), or for D (-for), or N times (-calls);
// they run on the main goroutine, locked to the process's first thread.
// -idle then sleeps D, and -burst makes N more calls. signals then prints
// "calls=N conts=C", C being the SIGCONTs it took, and exits with -exit's
// status.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func init() {
	// main runs on the process's first thread, its leader, which
	// every collection then preempts with a signal.
	runtime.LockOSThread()
}

var calls int

//go:noinline
func step(i int) int {
	calls++
	return i + 1
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	pidfile := flag.String("pidfile", "", "write the pid to this file")
	wait := flag.Bool("wait", false, "wait for a line on stdin")
	gc := flag.Bool("gc", false, "run runtime.GC in a loop")
	cpu := flag.Duration("cpu", 0, "call until the process used this much CPU")
	wall := flag.Duration("for", 0, "call for this long")
	n := flag.Int("calls", 0, "call this many times")
	idle := flag.Duration("idle", 0, "sleep this long after the calls")
	burst := flag.Int("burst", 0, "then call this many more times")
	exit := flag.Int("exit", 0, "exit status")
	nohup := flag.Bool("nohup", false, "ignore SIGHUP, as a daemon does")
	flag.Parse()
	if *nohup {
		signal.Ignore(syscall.SIGHUP)
	}

	var conts atomic.Int64
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGCONT)
	go func() {
		for range c {
			conts.Add(1)
		}
	}()
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *wait {
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
	if *gc {
		go func() {
			for {
				runtime.GC()
			}
		}()
	}
	s := 0
	switch {
	case *cpu > 0:
		for i := 0; cpuTime() < *cpu; i++ {
			for range 1000 {
				s = step(s)
			}
		}
	case *wall > 0:
		for end := time.Now().Add(*wall); time.Now().Before(end); {
			for range 1000 {
				s = step(s)
			}
		}
	default:
		for range *n {
			s = step(s)
		}
	}
	if *idle > 0 {
		time.Sleep(*idle)
	}
	for range *burst {
		s = step(s)
	}
	// The SIGCONTs sent before the end have reached the goroutine.
	time.Sleep(50 * time.Millisecond)
	fmt.Printf("calls=%d conts=%d\n", calls, conts.Load())
	os.Exit(*exit)
}
