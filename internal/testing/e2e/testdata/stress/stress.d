/* Hand-written probes of the stress fixture, next to its automatic ones. */
provider stress {
	probe round(long long n, unsigned long long sum);
	probe step(int worker, long long i);
};
