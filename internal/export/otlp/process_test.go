package otlp

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

func TestResourceAttributes(t *testing.T) {
	tests := []struct {
		in   string
		want []string // key=value, as parsed
	}{
		{"", nil},
		{"  ", nil},
		{"deployment.environment.name=test", []string{"deployment.environment.name=test"}},
		{"a=1,b=2", []string{"a=1", "b=2"}},
		// Spaces around keys and values go, as the SDK trims them.
		{" a = 1 , b=2 ", []string{"a=1", "b=2"}},
		// Values are percent-encoded, as W3C baggage's are.
		{"service.name=my%20svc,k=a%2Cb%3Dc", []string{"service.name=my svc", "k=a,b=c"}},
		// "+" is no space: the SDK decodes as a path does.
		{"k=a+b", []string{"k=a+b"}},
		{"k=%E2%9C%93", []string{"k=✓"}},
		// A value that does not decode is kept as it is.
		{"k=100%,j=%zz", []string{"k=100%", "j=%zz"}},
		// A pair without "=", or without a key, is left out.
		{"novalue,k=v,=orphan", []string{"k=v"}},
		{"k=", []string{"k="}},
		{"k=a=b", []string{"k=a=b"}},
		// The last of a key wins once merged; both are parsed.
		{"k=1,k=2", []string{"k=1", "k=2"}},
		// Bytes that are not UTF-8 stay as they are here: bounded escapes.
		{"k=%FF", []string{"k=\xff"}},
	}
	for _, tt := range tests {
		var got []string
		for _, kv := range resourceAttributes(tt.in) {
			got = append(got, string(kv.Key)+"="+kv.Value.AsString())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("resourceAttributes(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	many := strings.Repeat("k=v,", 1000)
	if n := len(resourceAttributes(many)); n != maxResourceAttributes {
		t.Errorf("resourceAttributes of 1000 pairs: %d attributes, want %d", n, maxResourceAttributes)
	}
}

func TestOtelEnviron(t *testing.T) {
	tests := []struct {
		env, service, attrs string
	}{
		{"", "", ""},
		{"PATH=/bin\x00HOME=/root\x00", "", ""},
		{"OTEL_SERVICE_NAME=svc\x00OTEL_RESOURCE_ATTRIBUTES=a=1\x00", "svc", "a=1"},
		// The last setting wins; a variable whose name only starts alike
		// is another.
		{"OTEL_SERVICE_NAME=one\x00OTEL_SERVICE_NAME=two\x00OTEL_SERVICE_NAMES=x\x00", "two", ""},
		// No NUL after the last variable.
		{"OTEL_SERVICE_NAME=svc", "svc", ""},
		{"XOTEL_SERVICE_NAME=no\x00OTEL_SERVICE_NAME\x00", "", ""},
		{"OTEL_SERVICE_NAME=caf\xe9\n\x00", "caf\xe9\n", ""},
	}
	for _, tt := range tests {
		if s, a := otelEnviron([]byte(tt.env)); s != tt.service || a != tt.attrs {
			t.Errorf("otelEnviron(%q) = %q, %q; want %q, %q", tt.env, s, a, tt.service, tt.attrs)
		}
	}
}

// TestContainerID reads /proc/PID/cgroup files as docker, containerd
// (alone and under Kubernetes), CRI-O and podman leave them, in cgroup v1
// and v2, and a host's.
func TestContainerID(t *testing.T) {
	const (
		docker     = "7be92808767a667f35c8505cbf40d14e931ef6db5b0210329cf193b15ba9d605"
		kube       = "c40dff48f1d53c3f07a50aa12bb9ae0e58c0927dc6b1d77e3f166784722642ad"
		crio       = "413715dc061efe71c16ef989f2f2ff5cf999a7dc905bb7078eda82cbb38210ec"
		podman     = "3de7a364f9de8d8665d657d82d6503fb3f0bc7b275609d3cf8fd53f17f18296b"
		kubeSystem = "e857a4bf05a69080a759574949d7a0e69572e27647800fa7faff6a05a8332aa1"
	)
	want := map[string]string{
		"docker-v1":                 docker,
		"docker-v2-systemd":         docker,
		"docker-v2-cgroupfs":        docker,
		"docker-v2-cgroupns":        "", // a private cgroup namespace shows only /
		"k8s-containerd-v1":         kube,
		"k8s-containerd-v1-systemd": kubeSystem,
		"k8s-containerd-v2":         kube,
		"k8s-crio-v2":               crio,
		"containerd-nerdctl":        crio,
		"podman-rootless":           podman,
		"podman-rootful":            podman,
		"host-session":              "", // session-2: no container's
		"host-v1":                   "", // 32 hex digits: no container's
		"short-id":                  "",
	}
	files, err := filepath.Glob("testdata/cgroup/*.cgroup")
	if err != nil || len(files) != len(want) {
		t.Fatalf("testdata/cgroup: %d files (%v), want %d", len(files), err, len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".cgroup")
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no want", f)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := containerID(b); got != w {
			t.Errorf("%s: container %q, want %q", name, got, w)
		}
	}
}

// fakeProc writes what /proc holds of process pid under dir.
func fakeProc(t *testing.T, dir string, pid int, exe, environ, cgroup string) {
	t.Helper()
	d := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (a) b) S 1 %d 0 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, pid, 1000+pid)
	for name, s := range map[string]string{"stat": stat, "environ": environ, "cgroup": cgroup} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if exe != "" {
		if err := os.Symlink(exe, filepath.Join(d, "exe")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProcessResource: each process's spans carry its resource, whose
// service.name is the process's own environment's, else -service, else
// trace's environment's, else the executable's name.
func TestProcessResource(t *testing.T) {
	const cid = "7be92808767a667f35c8505cbf40d14e931ef6db5b0210329cf193b15ba9d605"
	tests := []struct {
		name            string
		service, env    string // -service and trace's OTEL_SERVICE_NAME
		traceAttrs      string // trace's OTEL_RESOURCE_ATTRIBUTES
		environ, cgroup string // the process's
		exe             string
		want            map[string]any
	}{
		{
			name: "executable", exe: "/srv/bin/shop-v2 (deleted)",
			want: map[string]any{"service.name": "shop", "process.executable.name": "shop-v2"},
		},
		{
			name: "process gone", exe: "",
			want: map[string]any{"service.name": "shop", "process.executable.name": "shop"},
		},
		{
			name: "trace's environment", env: "from-trace", traceAttrs: "deployment.environment.name=prod,team=a", exe: "/shop",
			want: map[string]any{"service.name": "from-trace", "deployment.environment.name": "prod", "team": "a"},
		},
		{
			name: "-service over trace's environment", service: "checkout", env: "from-trace", exe: "/shop",
			want: map[string]any{"service.name": "checkout"},
		},
		{
			name: "process's environment over -service", service: "checkout", env: "from-trace", traceAttrs: "deployment.environment.name=prod,team=a",
			environ: "PATH=/bin\x00OTEL_SERVICE_NAME=svc-from-env\x00OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test\x00",
			cgroup:  "0::/system.slice/docker-" + cid + ".scope\n", exe: "/shop",
			want: map[string]any{"service.name": "svc-from-env", "deployment.environment.name": "test", "team": "a", "container.id": cid},
		},
		{
			name: "process's OTEL_RESOURCE_ATTRIBUTES", service: "checkout",
			environ: "OTEL_RESOURCE_ATTRIBUTES=service.name=from%20attrs,service.namespace=shop\x00", exe: "/shop",
			want: map[string]any{"service.name": "from attrs", "service.namespace": "shop"},
		},
		{
			name:    "OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES",
			environ: "OTEL_SERVICE_NAME=named\x00OTEL_RESOURCE_ATTRIBUTES=service.name=attr\x00", exe: "/shop",
			want: map[string]any{"service.name": "named"},
		},
		{
			// What trace measures is not the process's to say; a
			// container trace finds none of, the process may know.
			name:    "measured over the environment",
			environ: "OTEL_RESOURCE_ATTRIBUTES=process.pid=1,process.executable.name=x,container.id=y,host.name=other\x00", exe: "/shop",
			want: map[string]any{"service.name": "shop", "host.name": "other", "container.id": "y"},
		},
		{
			name:    "measured container over the environment's",
			environ: "OTEL_RESOURCE_ATTRIBUTES=container.id=y\x00", cgroup: "0::/docker/" + cid + "\n", exe: "/shop",
			want: map[string]any{"container.id": cid},
		},
		{
			name:    "untrusted bytes",
			environ: "OTEL_SERVICE_NAME=caf\xe9\x1b[2J\x00OTEL_RESOURCE_ATTRIBUTES=k%FF=%FF,long=" + strings.Repeat("x", 5000) + "\x00", exe: "/shop",
			want: map[string]any{"service.name": `caf\xe9\x1b[2J`, `k%FF`: `\xff`, "long": strings.Repeat("x", maxResourceValue)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, http.StatusOK, nil)
			t.Setenv("OTEL_SERVICE_NAME", tt.env)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tt.traceAttrs)
			dir := t.TempDir()
			setProcfs(t, dir)
			if tt.exe != "" {
				fakeProc(t, dir, 4242, tt.exe, tt.environ, tt.cgroup)
			}
			e, err := New(context.Background(), r.url, tt.service, "shop", false)
			if err != nil {
				t.Fatal(err)
			}
			e.Event(thread(1).fire("tick", 0))
			if err := e.Close(context.Background()); err != nil {
				t.Fatal("Close:", err)
			}
			res := r.resourcesOf()
			if len(res) != 1 {
				t.Fatalf("%d spans, want 1", len(res))
			}
			host, _ := os.Hostname()
			want := map[string]any{"process.pid": int64(4242), "process.executable.name": "shop", "host.name": host}
			for k, v := range tt.want {
				want[k] = v
			}
			for k, v := range want {
				if res[0][k] != v {
					t.Errorf("resource's %s: %v, want %v", k, res[0][k], v)
				}
			}
			for k, v := range res[0] {
				if s, ok := v.(string); ok && (!utf8.ValidString(s) || len(s) > maxResourceValue) || !utf8.ValidString(k) {
					t.Errorf("resource's %q: %q is not valid UTF-8 of at most %d bytes", k, v, maxResourceValue)
				}
			}
			if _, ok := res[0]["container.id"]; ok && tt.want["container.id"] == nil {
				t.Errorf("container.id %v, for a process in no container", res[0]["container.id"])
			}
		})
	}
}

// TestInspect reads a process of this machine's /proc: a child started
// with an environment of its own, while it runs, and after it exited.
func TestInspect(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(sleep, "60")
	cmd.Env = []string{"OTEL_SERVICE_NAME=svc-from-env", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Start returns once the exec closed the child's copy of its pipe,
	// which the kernel does before it records where the new image's
	// environment lies: /proc/PID/environ may read empty a moment
	// longer (1 run in 3 here). trace hands the exporter the
	// environment of the command it starts (Started's env).
	id := inspect("/proc", cmd.Process.Pid)
	for end := time.Now().Add(2 * time.Second); id.service == "" && time.Now().Before(end); time.Sleep(time.Millisecond) {
		id = inspect("/proc", cmd.Process.Pid)
	}
	real, _ := filepath.EvalSymlinks(sleep)
	if id.service != "svc-from-env" || id.attrs != "deployment.environment.name=test" || id.exe != filepath.Base(real) || id.start == "" || !id.same("/proc") {
		t.Errorf("inspect of a running sleep: %+v", id)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if id.same("/proc") {
		t.Errorf("a process that exited and was waited for still runs")
	}
	if gone := inspect("/proc", cmd.Process.Pid); gone.service != "" || gone.exe != "" {
		t.Errorf("inspect of a process that exited: %+v", gone)
	}
}

// fakeProcExporter is an exporter of the shop's spans to a receiver,
// that reads processes in dir, a /proc of the test's making.
func fakeProcExporter(t *testing.T) (*receiver, string, *Exporter) {
	t.Helper()
	r := newReceiver(t, http.StatusOK, nil)
	dir := t.TempDir()
	setProcfs(t, dir)
	e, err := New(context.Background(), r.url, "", "shop", false)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, e
}

// TestSweep: spans of many processes that come and go each carry their
// own process's resource, and the exporter keeps no more processes than
// run, and those that ended since its last sweep.
func TestSweep(t *testing.T) {
	r, dir, e := fakeProcExporter(t)
	const n = 1000
	most := 0
	for i := range n {
		pid := 5000 + i
		fakeProc(t, dir, pid, "/shop", fmt.Sprintf("OTEL_SERVICE_NAME=svc-%d\x00", pid), "")
		ev := thread(1).fire("tick", i)
		ev.PID = pid
		e.Event(ev)
		// The process ends after its event.
		os.RemoveAll(filepath.Join(dir, strconv.Itoa(pid)))
		most = max(most, len(e.procs))
	}
	if most > 2*sweepFrom+1 {
		t.Errorf("%d processes kept at most, of %d that ended one after the other", most, n)
	}
	// One that runs is kept, and one with a call open.
	fakeProc(t, dir, 4242, "/shop", "OTEL_SERVICE_NAME=alive\x00", "")
	e.Event(thread(1).fire("tick", 0))
	open := thread(2).enter("main.serve", 0)
	open.PID = 4243
	e.Event(open)
	for i := range 4 * sweepFrom {
		ev := thread(1).fire("tick", i)
		ev.PID = 10000 + i
		e.Event(ev)
	}
	if e.procs[4242] == nil || e.procs[4243] == nil {
		t.Errorf("a running process, or one with a call open, was dropped")
	}
	if err := e.Close(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "1 calls had not returned") {
		t.Fatal("Close:", err)
	}
	spans, services := r.received()
	res := r.resourcesOf()
	if len(spans) != n+2+4*sweepFrom {
		t.Fatalf("%d spans, want %d", len(spans), n+2+4*sweepFrom)
	}
	for i, s := range services {
		pid := res[i]["process.pid"].(int64)
		want := fmt.Sprintf("svc-%d", pid)
		switch {
		case pid == 4242:
			want = "alive"
		case pid == 4243 || pid >= 10000:
			want = "shop"
		}
		if s != want {
			t.Errorf("span %s of process %d: service.name %q, want %q", spans[i].Name, pid, s, want)
		}
	}
}

func FuzzContainerID(f *testing.F) {
	files, _ := filepath.Glob("testdata/cgroup/*.cgroup")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id := containerID(b)
		if id != "" && (!isContainerID(id) || !strings.Contains(string(b), id)) {
			t.Errorf("containerID(%q) = %q", b, id)
		}
	})
}

// FuzzEnviron: a process's environment, any bytes, gives a resource of
// valid UTF-8 strings, bounded, with the process's pid.
func FuzzEnviron(f *testing.F) {
	f.Add([]byte("OTEL_SERVICE_NAME=svc\x00OTEL_RESOURCE_ATTRIBUTES=a=1,b=%20x\x00"))
	f.Add([]byte("OTEL_RESOURCE_ATTRIBUTES=\xff=\xfe,=,,k=%zz\x00OTEL_SERVICE_NAME=\x1b"))
	base, err := baseResource(context.Background(), "", "shop")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, env []byte) {
		id := identity{pid: 4242, exe: "shop"}
		id.service, id.attrs = otelEnviron(env)
		res := processResource(base, id, "shop")
		pid := false
		for _, kv := range res.Attributes() {
			if !utf8.ValidString(string(kv.Key)) || len(kv.Key) > maxResourceValue {
				t.Errorf("key %q", kv.Key)
			}
			if kv.Value.Type() == attribute.STRING {
				if s := kv.Value.AsString(); !utf8.ValidString(s) || len(s) > maxResourceValue {
					t.Errorf("%s: %q", kv.Key, s)
				}
			}
			pid = pid || kv.Key == "process.pid" && kv.Value.AsInt64() == 4242
		}
		if !pid {
			t.Errorf("no process.pid 4242 in %v", res.Attributes())
		}
	})
}

// TestStarted: a process trace met while it ran (the command it started)
// has its resource made of what was read then, when its first event
// arrives after it exited, as the BPF transport's do; a pid another
// process has since is that one's; the environment trace gave a command
// names its service even where /proc no longer has it.
func TestStarted(t *testing.T) {
	r, dir, e := fakeProcExporter(t)
	fakeProc(t, dir, 4242, "/shop", "OTEL_SERVICE_NAME=svc-from-env\x00", "")
	e.Started(4242, nil)
	os.RemoveAll(filepath.Join(dir, "4242"))
	e.Event(thread(1).fire("tick", 0))
	fakeProc(t, dir, 4343, "/shop", "OTEL_SERVICE_NAME=first\x00", "")
	e.Started(4343, nil)
	os.RemoveAll(filepath.Join(dir, "4343"))
	// Another process with the pid, started later.
	fakeProc(t, dir, 4343, "/shop", "OTEL_SERVICE_NAME=second\x00", "")
	os.WriteFile(filepath.Join(dir, "4343", "stat"), []byte("4343 (shop) S 1 1 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999 0 0\n"), 0o644)
	ev := thread(1).fire("tick", 1)
	ev.PID = 4343
	e.Event(ev)
	// A command trace started, given its environment: gone from /proc
	// before Started read it, as a short one under load is.
	e.Started(4545, []string{"PATH=/bin", "OTEL_SERVICE_NAME=given"})
	ev = thread(1).fire("tick", 2)
	ev.PID = 4545
	e.Event(ev)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal("Close:", err)
	}
	_, services := r.received()
	if slices.Sort(services); !slices.Equal(services, []string{"given", "second", "svc-from-env"}) {
		t.Errorf("services %q, want [given second svc-from-env]", services)
	}
}
