/* Every type usdtgen maps, at its extreme values; see ../../e2e_test.go. */
typedef unsigned char byte_t;
#define flag_t _Bool

provider types {
	probe ints(int8_t a, uint8_t b, int16_t c, unsigned short d, int e, unsigned f);
	probe wide(long long a, size_t b, uintptr_t c, bool t, flag_t f, void *p);
	probe strs(const char *empty, const char *utf8, const char *long300, char *plain);
	probe chars(char c, signed char s, byte_t u, ssize_t n, off_t o, unsigned long long x);
	probe twelve(int a0, int a1, int a2, int a3, int a4, int a5,
	             int a6, int a7, int a8, int a9, int a10, int a11);
	probe tick();
};
