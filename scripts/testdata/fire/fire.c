/*
 * cfire fires one probe N times in a loop and prints the loop's time:
 *
 *   cfire sdt N    a sys/sdt.h probe (its site is a 1-byte NOP)
 *   cfire nop5 N   a 5-byte NOP at symbol site5, for uprobe:cfire:site5
 *   cfire nop5x N  the same NOP across a page boundary, at symbol site5x:
 *                  the kernel does not optimize a site it cannot rewrite
 *                  atomically, so this is the trap path of a 5-byte NOP
 *   cfire step N   a 5-byte cmp $0,%eax at symbol sitestep: not a NOP, so
 *                  no kernel optimizes or emulates it; it traps and is
 *                  single-stepped out of line, what kernels without NOP
 *                  emulation do with a 5-byte NOP
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/sdt.h>

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: cfire sdt|nop5|nop5x|step N\n");
		return 2;
	}
	long n = atol(argv[2]);
	long long t0 = now();
	if (strcmp(argv[1], "sdt") == 0) {
		for (long i = 0; i < n; i++)
			DTRACE_PROBE1(cfire, tick, i);
	} else if (strcmp(argv[1], "nop5") == 0) {
		for (long i = 0; i < n; i++)
			__asm__ volatile(".globl site5\n.type site5,@function\nsite5:\n.byte 0x0f,0x1f,0x44,0x00,0x00\n.size site5,5" ::: "memory");
	} else if (strcmp(argv[1], "nop5x") == 0) {
		for (long i = 0; i < n; i++)
			__asm__ volatile("jmp 1f\n.p2align 12,0xcc\n.skip 4093,0xcc\n.globl site5x\n.type site5x,@function\nsite5x:\n1:\n.byte 0x0f,0x1f,0x44,0x00,0x00\n.size site5x,5" ::: "memory");
	} else if (strcmp(argv[1], "step") == 0) {
		for (long i = 0; i < n; i++)
			__asm__ volatile(".globl sitestep\n.type sitestep,@function\nsitestep:\n.byte 0x3d,0x00,0x00,0x00,0x00\n.size sitestep,5" ::: "cc", "memory");
	} else {
		fprintf(stderr, "cfire: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("loop_ns %lld\n", now() - t0);
	return 0;
}
