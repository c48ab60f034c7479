/* Probes of the shop fixture's store (usdtgen), beside its automatic
 * probes: trace -otlp makes them span events or spans of their own. */
provider store {
	/* The store looked an item up; qty is 0 for one it does not have. */
	probe stock__checked(const char *item, int qty);
	/* The shop opened with this many workers, outside any traced call. */
	probe opened(int workers);
};
