package otlp

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/go-usdt/usdt/internal/procstat"
	"github.com/go-usdt/usdt/internal/values"
)

// A traced process's resource is made, the first time an event of its
// arrives, of these, each above those before it (the OpenTelemetry
// SDK's order, a later detector's attributes over an earlier's):
//
//  1. host.name (trace's host) and telemetry.sdk.*;
//  2. service.name, the executable's name;
//  3. trace's own OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME: the
//     tracer's environment describes where it runs, below what the
//     process says of itself;
//  4. service.name, -service;
//  5. the process's OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, as
//     its environment held them when it started (/proc/PID/environ), and
//     as the SDK in the process would read them;
//  6. what trace measures, which no environment overrides:
//     process.pid, process.executable.name, and container.id where the
//     process's cgroup names a container (where it names none, the
//     process's own container.id, if it sets one, stands).

// identity is what a process's resource is made of, read from /proc.
type identity struct {
	pid int
	// exe is the base name of the process's executable, "" when
	// /proc/PID/exe could not be read.
	exe string
	// service and attrs are the process's OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, "" when it has none or its environment
	// could not be read.
	service, attrs string
	container      string // its container's id, "" for none
	// start is when the process started (field 22 of /proc/PID/stat),
	// "" when not known: a pid reused by another process starts at
	// another time.
	start string
}

// maxEnviron bounds what is read of a process's environment: the kernel
// bounds it by the stack's limit, which can be large, and the variables
// the resource reads are any bytes the process was started with.
const maxEnviron = 1 << 20

// inspect reads a process's identity under proc (/proc). A process that
// has exited, or that trace may not read, gives what could be read: the
// resource falls back on the executable's name, never on an error.
func inspect(proc string, pid int) identity {
	id := identity{pid: pid}
	dir := filepath.Join(proc, strconv.Itoa(pid))
	id.start = startTime(dir)
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		id.exe = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	if f, err := os.Open(filepath.Join(dir, "environ")); err == nil {
		env, _ := io.ReadAll(io.LimitReader(f, maxEnviron))
		f.Close()
		id.service, id.attrs = otelEnviron(env)
	}
	if cg, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
		id.container = containerID(cg)
	}
	return id
}

// startTime is field 22 of dir's stat, "" when it cannot be read.
func startTime(dir string) string {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ""
	}
	start, _ := procstat.StartTime(stat)
	return start
}

// same reports whether the process that id describes still runs: its pid
// is not free, nor another process's.
func (id identity) same(proc string) bool {
	return id.start != "" && startTime(filepath.Join(proc, strconv.Itoa(id.pid))) == id.start
}

// otelEnviron finds OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES in an
// environment as /proc/PID/environ holds it, variables ended by NULs;
// the last setting of a variable wins, as getenv finds it in Go.
func otelEnviron(env []byte) (service, attrs string) {
	for len(env) > 0 {
		v := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			v, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if s, ok := bytes.CutPrefix(v, []byte("OTEL_SERVICE_NAME=")); ok {
			service = string(s)
		} else if s, ok := bytes.CutPrefix(v, []byte("OTEL_RESOURCE_ATTRIBUTES=")); ok {
			attrs = string(s)
		}
	}
	return service, attrs
}

// maxResourceAttributes bounds the attributes a process's
// OTEL_RESOURCE_ATTRIBUTES gives, at the SDK's default limit of a span's.
const maxResourceAttributes = 128

// resourceAttributes parses OTEL_RESOURCE_ATTRIBUTES as the Go SDK's
// resource.WithFromEnv does (it offers no parser of a string): pairs
// key=value separated by commas, each key and value trimmed of spaces
// and the value percent-decoded, or kept as it is when it does not
// decode; a pair without "=", or with an empty key, is left out. The
// result's keys and values are not escaped.
func resourceAttributes(s string) []attribute.KeyValue {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var attrs []attribute.KeyValue
	for _, p := range strings.Split(s, ",") {
		k, v, found := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !found || k == "" {
			continue
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			val = v
		}
		if len(attrs) == maxResourceAttributes {
			break
		}
		attrs = append(attrs, attribute.String(k, val))
	}
	return attrs
}

// containerID is the id of the container whose cgroup /proc/PID/cgroup
// names, "" for none: the 64 hex digits that docker, containerd (and so
// Kubernetes), CRI-O and podman name a container's cgroup after, with
// their prefixes and suffixes, in cgroup v1 and v2:
//
//	12:memory:/docker/<id>
//	0::/system.slice/docker-<id>.scope
//	11:pids:/kubepods/besteffort/pod<uid>/<id>
//	0::/kubepods.slice/.../cri-containerd-<id>.scope
//	0::/kubepods.slice/.../crio-<id>.scope
//	0::/user.slice/.../libpod-<id>.scope/container
//
// The last such component of a line's path is the container's; the
// first line that has one names it. Unlike the SDK's detector, a number
// such as user-1000.slice's is no container id.
func containerID(cgroup []byte) string {
	for _, line := range strings.Split(string(cgroup), "\n") {
		_, path, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if _, path, ok = strings.Cut(path, ":"); !ok {
			continue
		}
		parts := strings.Split(strings.TrimSpace(path), "/")
		for i := len(parts) - 1; i >= 0; i-- {
			p := strings.TrimSuffix(parts[i], ".scope")
			if j := strings.LastIndexAny(p, "-:"); j >= 0 {
				p = p[j+1:]
			}
			if isContainerID(p) {
				return p
			}
		}
	}
	return ""
}

func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// baseResource is what every process's resource starts from (see the
// order above, 1 to 4): service is -service, fallback the executable's
// name.
func baseResource(ctx context.Context, service, fallback string) (*resource.Resource, error) {
	opts := []resource.Option{resource.WithHost(), resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(fallback)), resource.WithFromEnv()}
	if service != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(service)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return bounded(res), nil
}

// processResource is the resource of the process id describes, over base
// (see the order above, 5 and 6); fallback is the executable's name.
func processResource(base *resource.Resource, id identity, fallback string) *resource.Resource {
	var own []attribute.KeyValue
	if id.attrs != "" {
		own = resourceAttributes(id.attrs)
	}
	if s := strings.TrimSpace(id.service); s != "" {
		own = append(own, semconv.ServiceName(s))
	}
	exe := id.exe
	if exe == "" {
		exe = fallback
	}
	own = append(own, semconv.ProcessPID(id.pid), semconv.ProcessExecutableName(exe))
	if id.container != "" {
		own = append(own, semconv.ContainerID(id.container))
	}
	// Merged in the order given: a later key wins over an earlier one.
	res, err := resource.Merge(base, resource.NewSchemaless(own...))
	if err != nil {
		// Merge fails only on schema URLs that differ, and own has none.
		return base
	}
	return bounded(res)
}

// maxResourceValue bounds a resource's keys and string values, in bytes
// once escaped: the resource goes with every span, and the environment
// a process was started with can hold any bytes.
const maxResourceValue = 1024

// bounded is res with its string keys and values escaped, as
// values.Escape escapes them (protobuf sends only valid UTF-8), and cut
// at maxResourceValue bytes.
func bounded(res *resource.Resource) *resource.Resource {
	kvs := res.Attributes()
	for i, kv := range kvs {
		key := attribute.Key(cut(values.Escape(string(kv.Key))))
		if kv.Value.Type() == attribute.STRING {
			kvs[i] = key.String(cut(values.Escape(kv.Value.AsString())))
		} else {
			kvs[i] = attribute.KeyValue{Key: key, Value: kv.Value}
		}
	}
	return resource.NewWithAttributes(res.SchemaURL(), kvs...)
}

// cut is s cut at maxResourceValue bytes, at the start of a character.
func cut(s string) string {
	if len(s) <= maxResourceValue {
		return s
	}
	i := maxResourceValue
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
