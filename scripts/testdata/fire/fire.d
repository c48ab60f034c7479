/* The usdtgen probe of the fire benchmark program. */
provider fire {
	probe tick(long long i);
};
