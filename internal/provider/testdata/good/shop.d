/*
 * Probes of the shop service.
 *
 * Build with usdt; the same file also works with "dtrace -h -s shop.d".
 */

#include <sys/types.h>

/* Types shared with the C side of the service. */
#define OrderID uint64_t
#define bool unsigned char
typedef int32_t shard_t;
typedef const char *cstring_t;
typedef struct session session_t;

provider shop {
	/* HTTP layer */
	probe request__start(const char *method, const char *path, int64_t content_length);
	probe request__done(const char *path, int status, uint64_t duration_ns);

	// Orders
	probe order__placed(OrderID id, int64_t cents, cstring_t currency);
	probe order__failed(OrderID id, const char *reason) : (uint64_t, string);

	/* Cache */
	probe cache__hit(const char *key, size_t size);
	probe cache__miss(const char *key);
	probe cache__evict(const char *key, bool expired, shard_t shard);

	probe session__open(session_t *s, unsigned long long uid, void *conn);
	probe gc();
	probe tick(void);
};

provider shop_db {
	probe query__start(const char *sql, shard_t shard);
	probe query__done(const char *sql, long rows, int err);
};

#pragma D attributes Evolving/Evolving/ISA provider shop provider
#pragma D attributes Private/Private/Unknown provider shop module
#pragma D attributes Private/Private/Unknown provider shop function
#pragma D attributes Private/Private/ISA provider shop name
#pragma D attributes Evolving/Evolving/ISA provider shop args

#pragma D attributes Evolving/Evolving/ISA provider shop_db provider
#pragma D attributes Evolving/Evolving/ISA provider shop_db args
