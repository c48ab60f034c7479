// Command treerss runs a command and reports, besides its wall time and
// CPU time, the peak memory of the whole process tree it starts: the
// largest sum, over one sample, of the resident set sizes of the command
// and all its descendants. It is the build-cost benchmark's companion to
// /usr/bin/time -v, whose "Maximum resident set size" is that of the
// largest single process only (getrusage's ru_maxrss of the children).
//
//	treerss [-interval 50ms] [-o FILE] -- command [args...]
//
// It prints one line to FILE (default stderr):
//
//	wall=1.234 cpu=2.345 maxrss1=123456 treerss=234567 samples=25
//
// wall and cpu are seconds (cpu is user plus system time of the command
// and every descendant it waited for); maxrss1 is the largest single
// process's peak RSS in KiB, as /usr/bin/time reports it; treerss is the
// largest sampled total RSS of the tree in KiB. Sampling walks
// /proc/PID/task/TID/children from the command, so it reads a few files
// per live process each interval. The exit status is the command's.
//
// Linux only; it lives in internal/testing/benchauto for scripts/build-cost.sh.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	interval := flag.Duration("interval", 50*time.Millisecond, "sampling interval")
	out := flag.String("o", "", "file for the result line (default stderr)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: treerss [-interval D] [-o FILE] -- command [args...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "treerss:", err)
		os.Exit(1)
	}
	done := make(chan struct{})
	peak := make(chan [2]int64)
	go func() {
		var max, samples int64
		t := time.NewTicker(*interval)
		defer t.Stop()
		for {
			if kb := treeRSS(cmd.Process.Pid); kb > max {
				max = kb
			}
			samples++
			select {
			case <-done:
				peak <- [2]int64{max, samples}
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	p := <-peak
	code := 0
	if err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			fmt.Fprintln(os.Stderr, "treerss:", err)
		}
	}
	st := cmd.ProcessState
	var maxrss int64
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		// ru_maxrss of the child: for a process that waited for its
		// own children, the largest of them or of itself.
		maxrss = ru.Maxrss
	}
	line := fmt.Sprintf("wall=%.3f cpu=%.3f maxrss1=%d treerss=%d samples=%d\n",
		wall.Seconds(), (st.UserTime() + st.SystemTime()).Seconds(), maxrss, p[0], p[1])
	if *out == "" {
		fmt.Fprint(os.Stderr, line)
	} else if err := appendFile(*out, line); err != nil {
		fmt.Fprintln(os.Stderr, "treerss:", err)
		code = 1
	}
	os.Exit(code)
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// treeRSS returns the total resident set size, in KiB, of pid and all its
// descendants that are alive now.
func treeRSS(pid int) int64 {
	var total int64
	seen := map[int]bool{}
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		total += rss(p)
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(f); err == nil {
					stack = append(stack, c)
				}
			}
		}
	}
	return total
}

// rss returns the resident set size of pid in KiB, from /proc/PID/statm.
func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()) / 1024
}
