package shop

import "testing"

func TestCart(t *testing.T) {
	c := &Cart{}
	c.Add(100)
	c.Add(250)
	if got := c.Total(); got != 350 {
		t.Errorf("Total() = %d, want 350", got)
	}
	if got := Discount(c.Total(), 10); got != 315 {
		t.Errorf("Discount(350, 10) = %d, want 315", got)
	}
}
