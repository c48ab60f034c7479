package ring

// rdtsc reads the time-stamp counter, as the writers do.
func rdtsc() uint64

var readTicks = rdtsc
