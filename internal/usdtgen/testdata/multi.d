/* Several providers in one file; five probes round the semaphores up to 8. */
#pragma D attributes Evolving/Evolving/Common provider http provider

typedef uint64_t request_id_t;

provider http {
	probe request__start(request_id_t id, const char *method, const char *path);
	probe request__done(request_id_t id, int status);
};

provider db {
	/* Same probe name as in http: the Go names differ by provider. */
	probe request__start(request_id_t id, const char *sql);
	probe request__done(request_id_t id, int64_t rows, bool ok);
};

provider shop_cache {
	probe hit(const char *key, size_t size);
};
