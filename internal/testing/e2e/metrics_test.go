package e2e

// Tests of trace -stats's metrics with their real consumer: a Prometheus
// v3 server (built by scripts/prometheus.sh) that scrapes trace -metrics
// and takes -otlp's metrics on its OTLP receiver, and answers for both on
// its query API.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// prometheusBinary is the Prometheus scripts/prometheus.sh builds; the
// test skips without it, and fails in CI (tracetest.SkipMissing).
func prometheusBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("USDT_PROMETHEUS_DIR")
	if dir == "" {
		dir = "/var/cache/go-usdt/prometheus"
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		tracetest.SkipMissing(t, "Prometheus is not built in %s (scripts/prometheus.sh, make prometheus, builds it, once, in about 4 minutes): %v", dir, err)
	}
	return filepath.Join(dir, "prometheus")
}

// startPrometheus starts Prometheus on a loopback port with its OTLP
// receiver on, scraping target (host:port) every second unless target is
// empty, and returns its base URL; it stops it when the test ends.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := prometheusBinary(t)
	port := freePorts(t, 1)[0]
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	scrape := ""
	if target != "" {
		scrape = fmt.Sprintf("scrape_configs:\n  - job_name: usdt\n    static_configs:\n      - targets: [%q]\n", target)
	}
	writeFile(t, config, "global:\n  scrape_interval: 1s\n"+scrape)
	proc := startServer(t, exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--web.enable-otlp-receiver", "--enable-feature=exemplar-storage"))
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 60*time.Second, "Prometheus ready", func() bool {
		if exited, err := proc.exited(); exited {
			t.Fatalf("Prometheus exited: %v\n%s", err, proc.output())
		}
		resp, err := http.Get(api + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return api
}

// promExemplars returns the trace ids of the exemplars of the series
// query selects in Prometheus at api, over the last ten minutes.
func promExemplars(t *testing.T, api, query string) []string {
	t.Helper()
	now := time.Now()
	resp, err := http.Get(fmt.Sprintf("%s/api/v1/query_exemplars?query=%s&start=%d&end=%d", api, url.QueryEscape(query), now.Add(-10*time.Minute).Unix(), now.Add(time.Minute).Unix()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   []struct {
			Exemplars []struct {
				Labels map[string]string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("Prometheus's query_exemplars of %s: status %q, %v", query, r.Status, err)
	}
	var ids []string
	for _, series := range r.Data {
		for _, e := range series.Exemplars {
			ids = append(ids, e.Labels["trace_id"])
		}
	}
	return ids
}

// promQuery returns the value of the single series query selects in
// Prometheus at api, now; ok is false when there is none.
func promQuery(t *testing.T, api, query string) (value float64, ok bool) {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// TestMetricsPrometheus has a real Prometheus take trace -stats's counts
// of a program that makes 200,000 calls of step, by each way there is:
// scraped from -metrics while the program idles after its calls, counted
// in the program (ring) or in the kernel (BPF); pushed by -otlp to its
// OTLP receiver when trace ends, the program's calls over, with the
// OpenTelemetry SDK's default interval of 60 s, which only the last push
// can beat; and pushed every half second while the program idles, to
// the endpoint of OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, -otlp's URL
// unused. Each time Prometheus's query API shows every call, as many
// durations in the histogram, whose sum is positive, and all of them in
// the buckets up to 2^36 ns.
func TestMetricsPrometheus(t *testing.T) {
	const calls = 200000
	for _, c := range []struct {
		name      string
		transport string
		// otlp pushes to Prometheus's receiver: through -otlp's base URL,
		// or through env, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT; else
		// Prometheus scrapes -metrics.
		otlp, env bool
		// idle keeps the program, and trace, running after the calls:
		// Prometheus must see them while trace runs.
		idle bool
	}{
		{name: "scraped/ring", transport: "ring", idle: true},
		{name: "scraped/bpf", transport: "bpf", idle: true},
		{name: "otlp/at the end", transport: "ring", otlp: true},
		{name: "otlp/OTEL_EXPORTER_OTLP_METRICS_ENDPOINT while it runs", transport: "ring", otlp: true, env: true, idle: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.transport == "bpf" {
				requireBPF(t)
			} else {
				requireRing(t)
			}
			bin := buildFixtureRules(t, "signals")
			args := []string{"trace", "-transport", c.transport, "-stats"}
			var api string
			env := os.Environ()
			switch {
			case !c.otlp:
				addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
				api = startPrometheus(t, addr)
				args = append(args, "-metrics", addr)
			case c.env:
				api = startPrometheus(t, "")
				// Nobody listens at -otlp's URL: the variable wins.
				args = append(args, "-otlp", fmt.Sprintf("http://127.0.0.1:%d", freePorts(t, 1)[0]), "-service", "signals")
				env = append(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+api+"/api/v1/otlp/v1/metrics", "OTEL_METRIC_EXPORT_INTERVAL=500")
			default:
				api = startPrometheus(t, "")
				args = append(args, "-otlp", api+"/api/v1/otlp", "-service", "signals")
				env = append(env, "OTEL_METRIC_EXPORT_INTERVAL=60000")
			}
			args = append(args, "--", bin, "-calls", strconv.Itoa(calls))
			if c.idle {
				args = append(args, "-idle", "60s")
			}
			tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), args...)
			tr.Env = env
			// In a process group of its own, with the program, which
			// outlives a trace killed: both end with the test.
			tr.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			proc := startServer(t, tr)
			t.Cleanup(func() { syscall.Kill(-tr.Process.Pid, syscall.SIGKILL) })
			output := func() string { return "trace's output:\n" + proc.output() }
			if !c.idle {
				select {
				case <-proc.done:
					if proc.err != nil {
						t.Fatalf("trace: %v\n%s", proc.err, output())
					}
				case <-time.After(120 * time.Second * time.Duration(tracetest.TimeSlack)):
					t.Fatalf("trace did not end in 120 s\n%s", output())
				}
			}
			const fn = `{code_function_name="main.step"}`
			var got float64
			waitFor(t, 30*time.Second, fmt.Sprintf("Prometheus to have %d calls of main.step", calls), func() bool {
				got, _ = promQuery(t, api, "usdt_function_calls_total"+fn)
				time.Sleep(100 * time.Millisecond)
				return got == calls
			}, func() string { return fmt.Sprintf("it has %v", got) }, output)
			for _, q := range []struct {
				query string
				want  func(float64) bool
				what  string
			}{
				{"usdt_function_duration_seconds_count" + fn, func(v float64) bool { return v == calls }, "every call"},
				{`usdt_function_duration_seconds_bucket{code_function_name="main.step",le="68.719476736"}`, func(v float64) bool { return v == calls }, "every call, none of 68.7 s"},
				{`count(usdt_function_duration_seconds_bucket{code_function_name="main.step"})`, func(v float64) bool { return v == 18 }, "18 buckets: 17 bounds and +Inf"},
				{"usdt_function_duration_seconds_sum" + fn, func(v float64) bool { return v > 0 }, "a positive sum of seconds"},
				{"usdt_events_lost_total", func(v float64) bool { return v == 0 }, "no events lost"},
			} {
				if v, ok := promQuery(t, api, q.query); !ok || !q.want(v) {
					t.Errorf("%s = %v (found %v), want %s", q.query, v, ok, q.what)
				}
			}
		})
	}
}

// TestMetricsSpans traces the W3C server of testdata/joined with -otlp and
// -metrics, without -stats, while a real Prometheus scrapes what trace
// counts from the spans' events and takes the same as OTLP metrics on its
// receiver (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT): every call of each
// function, those whose caller did not sample them too; the calls of
// check that returned its error, and no error series for the functions
// that return none; and, as -otlp's collector is Prometheus itself, which
// takes no traces, every span dropped with the reason export_failed; and
// the spans sent as the duration histograms' exemplars. The events do not
// tell the losses or the processes: neither is exported.
func TestMetricsSpans(t *testing.T) {
	requireAMD64(t)
	requireRing(t)
	dir := fixture(t, "joined")
	bin := filepath.Join(t.TempDir(), "joined")
	goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	api := startPrometheus(t, addr)
	// 200 requests, then five minutes for Prometheus to scrape: the test
	// ends it, and a trace that ended would leave the series stale.
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-transport", "ring", "-otlp", api+"/api/v1/otlp", "-service", "joined-e2e", "-metrics", addr, "--", bin, "200", "300s")
	// The spans go out every 200 ms, the metrics every 500 ms.
	tr.Env = append(os.Environ(), "OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+api+"/api/v1/otlp/v1/metrics", "OTEL_METRIC_EXPORT_INTERVAL=500")
	tr.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc := startServer(t, tr)
	t.Cleanup(func() { syscall.Kill(-tr.Process.Pid, syscall.SIGKILL) })
	output := func() string { return "trace's output:\n" + proc.output() }
	// testdata/joined: request i is on hold (check fails, and price is
	// not called) when i%10 is 9, and not sampled by its caller when
	// i%10 is 5: 20 of each.
	const requests, onHold, unsampled = 200, 20, 20
	// Scraped, the job is the scrape's; pushed, the service's.
	for _, job := range []string{"usdt", "joined-e2e"} {
		for _, q := range []struct {
			metric, labels string
			want           float64
		}{
			{"usdt_function_calls_total", `code_function_name="main.serve"`, requests},
			{"usdt_function_calls_total", `code_function_name="main.check"`, requests},
			{"usdt_function_calls_total", `code_function_name="main.price"`, requests - onHold},
			{"usdt_function_duration_seconds_count", `code_function_name="main.price"`, requests - onHold},
			{"usdt_function_errors_total", `code_function_name="main.check"`, onHold},
			{"usdt_spans_dropped_total", `reason="export_failed"`, 3*requests - onHold - 3*unsampled},
			{"usdt_spans_dropped_total", `reason="refused"`, 0},
			{"usdt_spans_dropped_total", `reason="queue_full"`, 0},
		} {
			query := fmt.Sprintf("%s{job=%q,%s}", q.metric, job, q.labels)
			var got float64
			var ok bool
			waitFor(t, 45*time.Second, fmt.Sprintf("Prometheus to have %s %v", query, q.want), func() bool {
				got, ok = promQuery(t, api, query)
				if !ok || got != q.want {
					time.Sleep(200 * time.Millisecond)
					return false
				}
				return true
			}, func() string { return fmt.Sprintf("it has %v (a series: %v)", got, ok) }, output)
		}
	}
	// The spans sent are the histograms' exemplars, through both paths:
	// each of a request that its caller sampled, and one that calls
	// price.
	request := regexp.MustCompile(`^4bf92f3577b34da6a3ce929d([0-9a-f]{6})00$`)
	for _, job := range []string{"usdt", "joined-e2e"} {
		query := fmt.Sprintf(`usdt_function_duration_seconds_bucket{job=%q,code_function_name="main.price"}`, job)
		var got []string
		waitFor(t, 45*time.Second, "Prometheus to have exemplars of "+query, func() bool {
			if got = promExemplars(t, api, query); len(got) == 0 {
				time.Sleep(200 * time.Millisecond)
				return false
			}
			return true
		}, output)
		for _, id := range got {
			m := request.FindStringSubmatch(id)
			var i int64
			if m != nil {
				i, _ = strconv.ParseInt(m[1], 16, 64)
			}
			if m == nil || i%10 == 5 || i%10 == 9 {
				t.Errorf("%s has an exemplar of trace %s, which is no sampled request that calls price", query, id)
			}
		}
	}
	for _, query := range []string{
		`usdt_function_errors_total{code_function_name="main.serve"}`,
		`usdt_function_errors_total{code_function_name="main.price"}`,
		"usdt_events_lost_total",
		"usdt_processes_traced",
	} {
		if v, ok := promQuery(t, api, query); ok {
			t.Errorf("Prometheus has %s = %v, which trace does not count from events", query, v)
		}
	}
}
