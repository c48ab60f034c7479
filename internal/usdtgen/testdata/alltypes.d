/*
 * Every C type that usdtgen maps onto a Go type, in each spelling, and
 * argument lists that exercise the Plan9 frame layout: narrow arguments
 * packed together, wide ones aligned, and more arguments than either C ABI
 * passes in registers.
 */
typedef unsigned long long counter_t;
typedef const char *label_t;
typedef struct handle handle_t;
#define flag_t _Bool

provider types {
	/* Twelve narrow arguments: 7 bytes, then 16-bit ones from offset 8. */
	probe narrow(int8_t a, char b, signed char c, uint8_t d, unsigned char e, bool f, flag_t g, int16_t h, short i, uint16_t j, unsigned short k, short int l);
	/* 32-bit and signed 64-bit spellings. */
	probe words(int32_t a, int b, signed c, uint32_t d, unsigned e, unsigned int f, int64_t g, long h, long long i, long int j, ssize_t k, intptr_t l);
	/* Unsigned 64-bit spellings. */
	probe uwords(off_t a, uint64_t b, unsigned long c, unsigned long long d, size_t e, uintptr_t f, counter_t g);
	/* Strings and pointers. */
	probe pointers(const char *s, string t, label_t u, char **argv, void *p, handle_t *h, const void *cp, unsigned char *bytes, struct session *sess);
	/* Each argument starts at a multiple of its own size. */
	probe padded(int8_t a, int64_t b, uint16_t c, int32_t d, bool e);
	/* The frame size rounds up to a whole word. */
	probe odd(uint16_t a, int8_t b);
};
