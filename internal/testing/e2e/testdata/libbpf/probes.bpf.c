// BPF side of the libbpf consumer (see ../../libbpf_test.go): libbpf's own
// USDT support reads each probe's arguments through the note's argument
// specs, and every program prints one line into a ring buffer.
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "GPL";

#define LINE 1024

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} lines SEC(".maps");

// Strings are copied from the traced process first: bpf_snprintf's %s
// reads kernel memory, here the ring buffer record.
struct line {
	char text[LINE];
	char str[4][260];
};

#define EMIT(fmt, args...)                                                     \
	({                                                                     \
		struct line *l = bpf_ringbuf_reserve(&lines, sizeof(*l), 0);   \
		if (l) {                                                       \
			BPF_SNPRINTF(l->text, LINE, fmt, args);                \
			bpf_ringbuf_submit(l, 0);                              \
		}                                                              \
	})

#define COPY(i, p) bpf_probe_read_user_str(l->str[i], sizeof(l->str[i]), p)

#ifdef TYPES
SEC("usdt")
int BPF_USDT(ints, signed char a, unsigned char b, short c, unsigned short d, int e, unsigned int f)
{
	EMIT("ints %d %u %d %u %d %u", a, b, c, d, e, f);
	return 0;
}

SEC("usdt")
int BPF_USDT(wide, long long a, unsigned long b, unsigned long c, _Bool t, _Bool f, void *p)
{
	EMIT("wide %lld %llu %llx %d %d %llx", a, b, c, t, f, p);
	return 0;
}

SEC("usdt")
int BPF_USDT(strs, char *empty, char *utf8, char *long300, char *plain)
{
	struct line *l = bpf_ringbuf_reserve(&lines, sizeof(*l), 0);
	if (!l)
		return 0;
	COPY(0, empty);
	COPY(1, utf8);
	COPY(2, long300);
	COPY(3, plain);
	// The probe passes 256 bytes and a NUL: read the bytes at 255 and 256.
	unsigned char end[2] = {};
	bpf_probe_read_user(end, sizeof(end), long300 + 255);
	BPF_SNPRINTF(l->text, LINE, "strs [%s][%s][%s][%s] %d %d", l->str[0], l->str[1], l->str[2], l->str[3], end[0], end[1]);
	bpf_ringbuf_submit(l, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(chars, signed char c, signed char s, unsigned char u, long n, long o, unsigned long long x)
{
	EMIT("chars %d %d %u %ld %ld %llu", c, s, u, n, o, x);
	return 0;
}

SEC("usdt")
int BPF_USDT(twelve, int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9, int a10, int a11)
{
	EMIT("twelve %d %d %d %d %d %d", a0, a1, a2, a3, a4, a5);
	EMIT("twelve %d %d %d %d %d %d", a6, a7, a8, a9, a10, a11);
	return 0;
}
#elif defined(NOTES)
// The probes of notesSrc (../../notes_test.go), whose sites are notes on
// the functions' own code: libbpf attaches an exit probe at every return,
// counts here, and main's exit prints the counts and sums.
static long leafs, adds, addexits, sumk, sumn;

SEC("usdt")
int BPF_USDT(entry__main__leaf, long g, signed char a, unsigned int b, void *p)
{
	if (a == -3 && b == 7 && p)
		__sync_fetch_and_add(&leafs, 1);
	return 0;
}

SEC("usdt")
int BPF_USDT(entry__main__Tree__Add, long g, void *t, long k, _Bool ok)
{
	__sync_fetch_and_add(&adds, 1);
	__sync_fetch_and_add(&sumk, k);
	return 0;
}

SEC("usdt")
int BPF_USDT(exit__main__Tree__Add, long g, long elapsed, long n, _Bool ok)
{
	__sync_fetch_and_add(&addexits, 1);
	__sync_fetch_and_add(&sumn, n);
	return 0;
}

SEC("usdt")
int BPF_USDT(exit__main__main, long g, long elapsed)
{
	EMIT("notes g=%ld leaf=%ld add=%ld addexit=%ld k=%ld n=%ld elapsed=%ld", g, leafs, adds, addexits, sumk, sumn, elapsed);
	return 0;
}
#else
// An automatic probe of ../auto: goroutine id, receiver pointer, string,
// two ints and a bool.
SEC("usdt")
int BPF_USDT(entry__orders__Store__Place, long g, void *recv, char *cust, long qty, long price, _Bool rush)
{
	struct line *l = bpf_ringbuf_reserve(&lines, sizeof(*l), 0);
	if (!l)
		return 0;
	COPY(0, cust);
	BPF_SNPRINTF(l->text, LINE, "P entry Place g=%ld recv=%lx cust=%s qty=%ld price=%ld rush=%d", g, recv, l->str[0], qty, price, rush);
	bpf_ringbuf_submit(l, 0);
	return 0;
}
#endif
