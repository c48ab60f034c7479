/*
 * Probes the cost benchmarks of package bench fire. Regenerate with
 *   go generate ./internal/testing/bench
 */
provider bench {
	/* An integer argument only: the cheapest probe. */
	probe hit(int64_t n);
	/* A string argument, copied NUL-terminated on the stack when enabled. */
	probe str(const char *s, int64_t n);
};
