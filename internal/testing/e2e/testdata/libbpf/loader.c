// User side of the libbpf consumer: usdtload [-w] OBJ PROVIDER BINARY
// ARGS... attaches every program of OBJ to the USDT probe
// PROVIDER:<program name> of BINARY with libbpf, runs BINARY ARGS, and
// prints the lines the programs write until BINARY exits, or, without -w,
// until every program has fired (then it kills BINARY).
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PROGS 16

static char fired[MAX_PROGS][64];
static int nfired, nprogs;

static int on_line(void *ctx, void *data, size_t size)
{
	const char *text = data;
	char name[64];
	(void)ctx;
	(void)size;
	printf("%s\n", text);
	// A line starts with its program's name, or "P entry <name>".
	if (sscanf(text, strncmp(text, "P ", 2) == 0 ? "P %*s %63s" : "%63s", name) == 1) {
		for (int i = 0; i < nfired; i++)
			if (strcmp(fired[i], name) == 0)
				return 0;
		if (nfired < MAX_PROGS)
			snprintf(fired[nfired++], sizeof(fired[0]), "%s", name);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int wait = argc > 1 && strcmp(argv[1], "-w") == 0;
	argv += wait;
	argc -= wait;
	if (argc < 4) {
		fprintf(stderr, "usage: usdtload [-w] OBJ PROVIDER BINARY ARGS...\n");
		return 2;
	}
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || libbpf_get_error(obj)) {
		fprintf(stderr, "usdtload: opening %s failed\n", argv[1]);
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "usdtload: loading %s failed\n", argv[1]);
		return 1;
	}
	// Attach before the program starts: pid -1 is every process running
	// BINARY, so the semaphores are set from its first instruction.
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		const char *name = bpf_program__name(prog);
		struct bpf_link *link = bpf_program__attach_usdt(prog, -1, argv[3], argv[2], name, NULL);
		if (!link || libbpf_get_error(link)) {
			fprintf(stderr, "usdtload: attaching %s:%s failed\n", argv[2], name);
			return 1;
		}
		nprogs++;
	}
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(obj, "lines")), on_line, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "usdtload: ring buffer failed\n");
		return 1;
	}
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		execv(argv[3], argv + 3);
		perror("usdtload: exec");
		_exit(127);
	}
	int status = 0;
	for (;;) {
		ring_buffer__poll(rb, 100);
		fflush(stdout);
		if (!wait && nfired >= nprogs)
			kill(child, SIGKILL);
		if (waitpid(child, &status, WNOHANG) == child)
			break;
	}
	ring_buffer__consume(rb);
	printf("usdtload: %d of %d programs fired\n", nfired, nprogs);
	return 0;
}
