/* A probe whose Go side usdtgen generated before probe tables carried
 * argument names: the generated files here are kept as they were, and are
 * not regenerated (main.go has no go:generate line). */
provider old {
	probe hit(int64_t count, const char *label);
};
