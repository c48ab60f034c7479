/*
 * Names that generated code must not use as they are: probes without
 * arguments, parameters named after Go keywords, after the identifiers the
 * generated bodies refer to (C, unsafe, usdtrt, usdt-prefixed locals), or
 * unnamed; and probe names whose underscores and digits vanish from the Go
 * name.
 */
provider edge {
	probe tick();
	probe idle(void);
	probe keywords(int type, int func, int go, int map, int range, int select, int chan, int defer, int package, int var, int interface, int fallthrough);
	probe shadows(const char *C, void *unsafe, int usdtrt, const char *usdtBuf0, int usdtBuf1, bool usdt, int64_t usdtStubEdgeShadows, int arg7);
	probe unnamed(int, const char *, void *, int _, uint8_t arg0, int arg4);
	probe predeclared(int64_t int64, const char *len, bool true, uint32_t nil, int iota, void *any);
	probe _leading(int x);
	probe trailing_(int x);
	probe double__under__score(int x);
	probe v2_3d_x86_64(int x);
};
