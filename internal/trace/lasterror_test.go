package trace

import (
	"errors"
	"sync"
	"testing"
)

// TestLastError checks that an exit's last result, an error, is told nil
// or not by LastError as Values tells it, whichever is asked first, and
// from any goroutine: LastError decodes that value alone.
func TestLastError(t *testing.T) {
	sites, names := describedSites(t)
	o := &order{ID: 1, Name: "first"}
	failed := errors.New("out of stock")
	var nilErr error
	var zero order
	tests := []struct {
		name         string
		site         int
		args         []uint64
		isErr, fails bool
	}{
		{"a non-nil error", 2, []uint64{3, 1500, addr(o), addr(&failed)}, true, true},
		{"a nil error", 2, []uint64{3, 1500, addr(&zero), addr(&nilErr)}, true, false},
		{"an entry whose last value is no error", 1, []uint64{3, addr(o), 0, addr(&failed), 0, 0, 0, 0}, false, false},
		{"a usdtgen probe", 0, []uint64{7, 0, 1, 0, 2, 0}, false, false},
	}
	for _, tt := range tests {
		for _, first := range []string{"LastError", "Values", "both at once"} {
			t.Run(tt.name+"/"+first, func(t *testing.T) {
				d := newDecoder(sites, 0, names)
				ev := d.decode(sent(record(t, sites, tt.site, tt.args)))
				if ev == nil {
					t.Fatal("the record did not decode")
				}
				var isErr, fails bool
				switch first {
				case "LastError":
					isErr, fails = ev.LastError()
					ev.Values()
				case "Values":
					ev.Values()
					isErr, fails = ev.LastError()
				default:
					var wg sync.WaitGroup
					wg.Go(func() { ev.Values() })
					isErr, fails = ev.LastError()
					wg.Wait()
				}
				if isErr != tt.isErr || fails != tt.fails {
					t.Errorf("LastError() = %v, %v; want %v, %v", isErr, fails, tt.isErr, tt.fails)
				}
				vs := ev.Values()
				fromValues := len(vs) > 0 && vs[len(vs)-1].NonNilError()
				if fromValues != tt.fails {
					t.Errorf("the values say the last is a non-nil error: %v; want %v (%v)", fromValues, tt.fails, vs)
				}
				if again, _ := ev.LastError(); again != isErr {
					t.Errorf("LastError after Values says %v, before %v", again, isErr)
				}
			})
		}
	}
}
