package values_test

import (
	"encoding/json"
	"fmt"
	"go/token"
	"go/types"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/testing/valuestest"
	"github.com/go-usdt/usdt/internal/values"
)

type addr struct {
	City string
	Zip  int32
}

type point struct{ X, Y int8 }

// sink keeps the maps on the heap, where the runtime lays them out as it
// does for any map a probe sees.
var sink []any

// TestDecodeMaps reads maps the runtime made, in this process's own
// memory, as a plan says (the copies the BPF program makes, here from
// /proc/self/mem), and decodes them: a map of one group prints as %+v
// prints it and writes the JSON encoding/json writes; a larger one, its
// length.
func TestDecodeMaps(t *testing.T) {
	str, i64 := types.Typ[types.String], types.Typ[types.Int]
	addrT := types.NewStruct([]*types.Var{newField("City", str), newField("Zip", types.Typ[types.Int32])}, nil)
	pointT := types.NewStruct([]*types.Var{newField("X", types.Typ[types.Int8]), newField("Y", types.Typ[types.Int8])}, nil)
	big := map[int]int{}
	for i := range 100 {
		big[i] = i * i
	}
	wide := map[int][8]int64{}
	for i := range 8 {
		wide[i] = [8]int64{int64(i), -1}
	}
	deleted := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4}
	delete(deleted, "b")
	for _, tt := range []struct {
		name string
		typ  types.Type
		m    any
		// text is what trace shows where it cannot be Go's.
		text string
	}{
		{"strings", types.NewMap(str, i64), map[string]int{"c": 3, "a": 1, "b": 2}, ""},
		{"deleted", types.NewMap(str, i64), deleted, ""},
		{"empty", types.NewMap(str, i64), map[string]int{}, ""},
		{"nil", types.NewMap(str, i64), map[string]int(nil), ""},
		{"ints", types.NewMap(i64, str), map[int]string{10: "ten", -2: "minus two", 3: "three"}, ""},
		{"structs", types.NewMap(str, addrT), map[string]addr{"lyon": {"Lyon", 69001}, "paris": {"Paris", 75001}}, ""},
		{"struct keys", types.NewMap(pointT, types.Typ[types.Bool]), map[point]bool{{1, 2}: true, {-1, 5}: false, {1, -3}: true}, ""},
		{"floats", types.NewMap(types.Typ[types.Float64], i64), map[float64]int{2.5: 1, math.NaN(): 2, -1: 3}, ""},
		{"full", types.NewMap(i64, i64), map[int]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8}, ""},
		{"big", types.NewMap(i64, i64), big, "map[...(len 100)]"},
		// A group of 8 slots of 72 bytes, one past what a copy reads.
		{"wide", types.NewMap(i64, types.NewArray(types.Typ[types.Int64], 8)), wide, "...(len 8)]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, ok := layout.Of(tt.typ, types.SizesFor("gc", runtime.GOARCH), nil)
			if !ok {
				t.Fatal("no layout")
			}
			sink = append(sink, tt.m)
			// A map is a pointer, which an interface holds as its data word.
			raw := uint64(uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&tt.m))[1]))
			info, _ := debug.ReadBuildInfo()
			p := values.NewPlan([]*layout.Type{l}, values.MapGroupsOf(info))
			area, err := valuestest.Read(p, []uint64{raw})
			if err != nil {
				t.Skipf("cannot read this process's memory: %v", err)
			}
			v, ok := p.Decode(0, l, raw, area, nil)
			if !ok {
				t.Fatal("the plan reads nothing of the map")
			}
			want := fmt.Sprintf("%+v", tt.m)
			if tt.text != "" {
				want = tt.text
			}
			if got := v.String(); got != want && !cutMap(got, fmt.Sprintf("%+v", tt.m), tt.text) {
				t.Errorf("%%+v: %s, Go %s", got, want)
			}
			got, err := json.Marshal(v.JSON())
			if err != nil {
				t.Fatal(err)
			}
			if fast, err := values.AppendJSON(nil, v); err != nil || string(fast) != string(got) {
				t.Errorf("AppendJSON: %s (%v), encoding/json %s", fast, err, got)
			}
			wantJSON, err := json.Marshal(tt.m)
			if tt.text != "" {
				wantJSON = []byte(strconv.Quote(v.String()))
			} else if err != nil {
				return // Go has no JSON of keys of this kind
			}
			var g, w any
			json.Unmarshal(got, &g)
			json.Unmarshal(wantJSON, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("JSON: %s, Go %s", got, wantJSON)
			}
		})
	}
}

// cutMap reports whether got shows some of the entries of the map Go
// printed as goText, each as Go printed it, and ends in the marker cut.
func cutMap(got, goText, cut string) bool {
	entries, ok := strings.CutSuffix(strings.TrimPrefix(got, "map["), " "+cut)
	if !strings.HasPrefix(cut, "...") || !ok || entries == "" {
		return false
	}
	for _, e := range strings.SplitAfter(entries, "] ") {
		if !strings.Contains(goText, strings.TrimSuffix(e, " ")) {
			return false
		}
	}
	return true
}

func newField(name string, t types.Type) *types.Var {
	return types.NewField(token.NoPos, nil, name, t, false)
}
