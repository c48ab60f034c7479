provider myapp {
	probe a(unsigned signed int x);
	probe b(long long long y);
	probe c(short long z);
	probe d(unsigned uint32_t w);
};
