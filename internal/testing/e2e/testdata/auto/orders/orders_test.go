package orders

import "testing"

func TestBook(t *testing.T) {
	s := NewStore(map[string]int{"tea": 3})
	if _, err := s.Place("x", 0, 1, false); err == nil {
		t.Error("zero quantity accepted")
	}
	o, err := s.Place("y", 2, 300, true)
	if err != nil || o.Total(50) != 550 {
		t.Errorf("Place: %v %v", o, err)
	}
	if err := s.Ship(o.ID); err != nil {
		t.Error(err)
	}
	if err := s.Ship(99); err != ErrUnknown {
		t.Error(err)
	}
	for need, want := range map[int][2]int{2: {0, 1}, 5: {1, 0}, 6: {-1, -1}} {
		if r, c := FindBin([][]int{{1, 2}, {5}}, need); r != want[0] || c != want[1] {
			t.Errorf("FindBin %d: %d %d, want %v", need, r, c, want)
		}
	}
	if sh, err := SplitBill(10, 0); sh != -1 || err == nil {
		t.Errorf("SplitBill: %d %v", sh, err)
	}
	if Sum([]int{1, 2}, 3) != 6 || Tag("p", 0, 1) != 1 {
		t.Error("Sum or Tag")
	}
}
