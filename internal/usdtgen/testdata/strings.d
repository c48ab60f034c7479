/* Strings everywhere: each one gets its own buffer in the fire function. */
typedef const char *cstr_t;

provider log {
	/* The most arguments a probe may have, all strings. */
	probe line(const char *a, const char *b, const char *c, const char *d, const char *e, const char *f, char *g, string h, cstr_t i, const char *j, const char *k, const char *l);
	/* Strings between narrow integers. */
	probe field(uint8_t level, const char *key, int16_t width, const char *value, bool quoted);
	probe msg(const char *text);
};
