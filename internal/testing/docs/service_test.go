package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestServiceExamples checks the examples of docs/service.md as far as
// a machine without systemd running or a cluster allows: systemd's own
// verifier on the unit, and Kubernetes' own types on the DaemonSet.
func TestServiceExamples(t *testing.T) {
	dir := filepath.Join(root, "examples", "service")
	t.Run("systemd", func(t *testing.T) {
		tracetest.Require(t, "systemd-analyze")
		unit, err := os.ReadFile(filepath.Join(dir, "usdt-trace-shop.service"))
		if err != nil {
			t.Fatal(err)
		}
		exec0 := "ExecStart=/usr/local/bin/usdt-toolexec "
		if !bytes.Contains(unit, []byte(exec0+"trace -transport ring -exe /")) {
			t.Fatalf("the unit does not run %s'trace -transport ring -exe' with an absolute path", exec0)
		}
		// verify wants ExecStart's executable to be there: this
		// test's own stands in for usdt-toolexec.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		unit = bytes.ReplaceAll(unit, []byte("/usr/local/bin/usdt-toolexec"), []byte(self))
		path := filepath.Join(t.TempDir(), "usdt-trace-shop.service")
		if err := os.WriteFile(path, unit, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, "daemonset.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict(data, &ds); err != nil {
			t.Fatalf("daemonset.yaml is not a DaemonSet as Kubernetes' types have it: %v", err)
		}
		// encoding/json, under UnmarshalStrict, matches a field's
		// name in any case; the API server does not. Every key of
		// the file must be in what the types write back, as spelt.
		var raw, typed map[string]any
		back, err := json.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(back, &typed); err != nil {
			t.Fatal(err)
		}
		for _, k := range keysNotIn(raw, typed, "") {
			t.Errorf("daemonset.yaml: %s is no field of a DaemonSet as spelt", k)
		}
		if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" {
			t.Errorf("apiVersion %q, kind %q, want apps/v1 and DaemonSet", ds.APIVersion, ds.Kind)
		}
		spec := ds.Spec.Template.Spec
		if !spec.HostPID {
			t.Error("hostPID is not set: trace would see no other pod's process")
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%d containers, want trace's alone", len(spec.Containers))
		}
		c := spec.Containers[0]
		args := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
		if !strings.HasPrefix(args, "/usr/local/bin/usdt-toolexec trace -transport ring -exe /") {
			t.Errorf("the container runs %q, want usdt-toolexec trace -transport ring -exe with an absolute path", args)
		}
		sc := c.SecurityContext
		want := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SYS_PTRACE"}}
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, want.Add) || !slices.Equal(sc.Capabilities.Drop, want.Drop) {
			t.Errorf("the container's capabilities are %+v, want %+v: SYS_PTRACE alone", sc, want)
		}
		if sc != nil && (sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation) {
			t.Error("the container may be privileged or gain privileges")
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Error("the container has no memory limit")
		}
	})
}

// keysNotIn lists the keys of the JSON value a, by path from at, that
// b does not have where a has them.
func keysNotIn(a, b any, at string) []string {
	var missing []string
	switch a := a.(type) {
	case map[string]any:
		bm, _ := b.(map[string]any)
		for k, v := range a {
			bv, ok := bm[k]
			if !ok {
				missing = append(missing, at+"."+k)
				continue
			}
			missing = append(missing, keysNotIn(v, bv, at+"."+k)...)
		}
	case []any:
		bs, _ := b.([]any)
		for i, v := range a {
			if i < len(bs) {
				missing = append(missing, keysNotIn(v, bs[i], fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	slices.Sort(missing)
	return missing
}
