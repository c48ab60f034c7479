package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// steadySrc serves a request every 20 ms for the duration its argument
// gives: serve, a root call, and work, its child. It prints each
// request's number and the time it began.
const steadySrc = `package main

import (
	"fmt"
	"os"
	"time"
)

func work(i int) int { return i * 2 }

func serve(i int) int { return work(i) + 1 }

func main() {
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		panic(err)
	}
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		fmt.Println("req", i, time.Now().UnixNano())
		serve(i)
		time.Sleep(20 * time.Millisecond)
	}
}
`

// TestTraceOTLPCollectorRestarts kills Jaeger 5 s into a 20 s trace of
// a program that serves 50 requests a second, and starts it again 10 s
// later on the same ports: trace goes on, and every request that began
// once Jaeger was back has its trace in it, the serve span with the
// work span below. (What the first Jaeger had received went with its
// memory.) trace says that it tried again, and of no span that it was
// dropped: the spans of the outage waited in the exporter's queue.
func TestTraceOTLPCollectorRestarts(t *testing.T) {
	requireRing(t)
	ports := freePorts(t, 3)
	_, first := startJaegerOn(t, ports)
	bin := buildMain(t, "steady", steadySrc)
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-transport", "ring", "-otlp", fmt.Sprintf("http://127.0.0.1:%d", ports[2]), "-service", "restart-e2e", "--", bin, "20s")
	var stderr bytes.Buffer
	tr.Stderr = &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	t.Cleanup(func() { tr.Process.Kill() })
	time.Sleep(5 * time.Second)
	first.cmd.Process.Kill()
	<-first.done
	time.Sleep(10 * time.Second)
	j, _ := startJaegerOn(t, ports)
	back := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("trace did not end 2 minutes after Jaeger came back:\n%s", stderr.String())
	}
	var after []int
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "req" {
			continue
		}
		i, _ := strconv.Atoi(f[1])
		at, _ := strconv.ParseInt(f[2], 10, 64)
		if at >= back.UnixNano() {
			after = append(after, i)
		}
	}
	if len(after) < 100 {
		t.Fatalf("%d requests after Jaeger came back, want some 250:\n%s", len(after), stderr.String())
	}
	// Jaeger stores what it receives a moment later: read until every
	// request is there, or 30 s.
	var missing []int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got := wholeServes(j.traces(t, "restart-e2e", 0))
		missing = missing[:0]
		for _, i := range after {
			if !got[strconv.Itoa(i)] {
				missing = append(missing, i)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of the %d requests made after Jaeger came back have no whole trace in it: %v", len(missing), len(after), missing[:min(len(missing), 20)])
	}
	if !strings.Contains(stderr.String(), "could not be reached for a while") || regexp.MustCompile(`spans not sent|lost \d+ spans`).MatchString(stderr.String()) {
		t.Errorf("trace does not say that it tried again, or says that spans were dropped or not sent, where it could send them all once Jaeger was back:\n%s", stderr.String())
	}
	t.Logf("%d requests after Jaeger came back:\n%s", len(after), regexp.MustCompile(`(?m)^req .*\n`).ReplaceAllString(stderr.String(), ""))
}

// wholeServes are the requests (their args.i) whose traces hold the
// serve span and the work span.
func wholeServes(traces map[string][]jaegerSpan) map[string]bool {
	got := map[string]bool{}
	for _, spans := range traces {
		var serve, work bool
		var i any
		for _, s := range spans {
			switch s.OperationName {
			case "main.serve":
				serve = true
				i, _ = s.tag("args.i")
			case "main.work":
				work = true
			}
		}
		if serve && work {
			got[fmt.Sprint(i)] = true
		}
	}
	return got
}
