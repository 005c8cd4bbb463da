// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin (plugin API version 1, as QEMU 7.2 has it) for scripts/insn-count: counts,
 * for every translation block of the guest's kernel (addresses in the upper half), how often it
 * ran, the instructions and memory accesses that makes (each by an inline add, no callback),
 * the target of the direct call ending it, if one does, its atomic instructions and whether it
 * ends with an indirect jump. Whenever a file snap-NAME appears in the directory given as
 * dir=DIR (the guest creates it in its $OX_OUT), the counts so far are written to
 * DIR/counts-NAME.txt, one line per block: address, instructions, executions, memory accesses,
 * call target (hexadecimal, 0 for none), atomic instructions, indirect exit (0 or 1); then
 * snap-NAME is removed.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu-plugin-v1.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One translation of a block (a block translated again gets another; the report adds them). */
struct block {
	uint64_t vaddr;
	uint64_t execs;
	uint64_t mems;
	uint64_t target;
	uint32_t insns;
	uint32_t atomics;
	uint32_t indirect;
	struct block *next;
};

static struct block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static char dir[512];

#define KERNEL_HALF 0xffff800000000000ULL
#define CALL_REL32 0xe8
#define PREFIX_LOCK 0xf0

/* Whether the instruction is atomic: LOCK-prefixed, or XCHG with memory (locked implicitly). */
static int is_atomic(const uint8_t *code, size_t size)
{
	size_t i = 0;

	/* Legacy prefixes, then REX. */
	while (i < size && (code[i] == PREFIX_LOCK || code[i] == 0x66 || code[i] == 0x67 ||
			    code[i] == 0xf2 || code[i] == 0xf3 || code[i] == 0x2e ||
			    code[i] == 0x3e || code[i] == 0x26 || code[i] == 0x36 ||
			    code[i] == 0x64 || code[i] == 0x65)) {
		if (code[i] == PREFIX_LOCK)
			return 1;
		i++;
	}
	if (i < size && (code[i] & 0xf0) == 0x40)
		i++;
	return i + 1 < size && (code[i] == 0x86 || code[i] == 0x87) && (code[i + 1] >> 6) != 3;
}

/*
 * Whether the instruction leaves by an address known only when it runs (RET, or an indirect
 * CALL or JMP), which TCG looks up instead of chaining to the next block.
 */
static int is_indirect(const uint8_t *code, size_t size)
{
	size_t i = 0;

	while (i < size && (code[i] == 0x66 || code[i] == 0xf2 || code[i] == 0xf3 ||
			    code[i] == 0x2e || code[i] == 0x3e))
		i++;
	if (i < size && (code[i] & 0xf0) == 0x40)
		i++;
	if (i >= size)
		return 0;
	if (code[i] == 0xc3 || code[i] == 0xc2)
		return 1;
	if (code[i] == 0xff && i + 1 < size) {
		int reg = (code[i + 1] >> 3) & 7;

		return reg == 2 || reg == 4;
	}
	return 0;
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b;

	(void)id;
	if (va < KERNEL_HALF || n == 0)
		return;
	b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->vaddr = va;
	b->insns = n;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		b->atomics += is_atomic(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));
	}
	{
		struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
		const uint8_t *code = qemu_plugin_insn_data(last);
		size_t size = qemu_plugin_insn_size(last);

		b->indirect = is_indirect(code, size);
		if (size == 5 && code[0] == CALL_REL32) {
			int32_t rel;

			memcpy(&rel, code + 1, sizeof(rel));
			b->target = qemu_plugin_insn_vaddr(last) + 5 + (int64_t)rel;
		}
	}
	/* Counters shared by the vCPUs, added to without atomics: close enough for statistics. */
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
	for (size_t i = 0; i < n; i++)
		qemu_plugin_register_vcpu_mem_inline(qemu_plugin_tb_get_insn(tb, i),
						     QEMU_PLUGIN_MEM_RW, QEMU_PLUGIN_INLINE_ADD_U64,
						     &b->mems, 1);
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
}

static void write_counts(const char *name)
{
	char path[1100];
	FILE *f;

	snprintf(path, sizeof(path), "%s/counts-%s.txt", dir, name);
	f = fopen(path, "w");
	if (!f)
		return;
	pthread_mutex_lock(&blocks_lock);
	for (struct block *b = blocks; b; b = b->next)
		if (b->execs)
			fprintf(f, "%llx %u %llu %llu %llx %u %u\n", (unsigned long long)b->vaddr,
				b->insns, (unsigned long long)b->execs,
				(unsigned long long)b->mems, (unsigned long long)b->target,
				b->atomics, b->indirect);
	pthread_mutex_unlock(&blocks_lock);
	fclose(f);
}

/* Polls DIR for snapshot requests every 5 ms. */
static void *watch(void *arg)
{
	(void)arg;
	for (;;) {
		DIR *d = opendir(dir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			char path[1100];

			if (strncmp(de->d_name, "snap-", 5) != 0)
				continue;
			write_counts(de->d_name + 5);
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
		if (d)
			closedir(d);
		usleep(5000);
	}
	return NULL;
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv)
{
	pthread_t t;

	(void)info;
	for (int i = 0; i < argc; i++)
		if (strncmp(argv[i], "dir=", 4) == 0)
			snprintf(dir, sizeof(dir), "%s", argv[i] + 4);
	if (!dir[0]) {
		fprintf(stderr, "insn-count: the plugin needs dir=DIR\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	if (pthread_create(&t, NULL, watch, NULL) != 0)
		return -1;
	pthread_detach(t);
	return 0;
}
