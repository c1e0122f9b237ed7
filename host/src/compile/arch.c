/*
** arch.c: the published limits of the GPU targets tocha knows (CUDA C++ Programming Guide,
** "Technical Specifications per Compute Capability"), for what a kernel's compiled code allows
** when no GPU of the target is at hand: the simulator's dynamic shared memory limit and the
** occupancy of a target. Every target here has 64 Ki 32-bit registers per SM and per block,
** allocated to warps in units of 256, shared memory allocated in units of 128 bytes, and 1 KiB
** of each block's shared memory reserved for the system.
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define KIB 1024u
#define REGISTER_UNIT 256 /* registers are allocated to a warp in units of this many */
#define SHARED_UNIT 128   /* bytes */

static const tocha_arch table[] = {
    {"sm_80", 2048, 32, 65536, 65536, 164 * KIB, 163 * KIB, KIB},
    {"sm_86", 1536, 16, 65536, 65536, 100 * KIB, 99 * KIB, KIB},
    {"sm_87", 2048, 32, 65536, 65536, 164 * KIB, 163 * KIB, KIB},
    {"sm_89", 1536, 24, 65536, 65536, 100 * KIB, 99 * KIB, KIB},
    {"sm_90", 2048, 32, 65536, 65536, 228 * KIB, 227 * KIB, KIB},
    {"sm_100", 2048, 32, 65536, 65536, 228 * KIB, 227 * KIB, KIB},
    {"sm_120", 1536, 32, 65536, 65536, 100 * KIB, 99 * KIB, KIB},
};

const tocha_arch *tocha_arch_find(const char *target)
{
    if (!target) return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].target, target) == 0) return &table[i];
    return NULL;
}

const char *tocha_arch_default(void)
{
    const char *arch = getenv("TOCHA_ARCH");
    return arch && *arch ? arch : "sm_90";
}

static uint64_t round_up(uint64_t n, uint64_t unit) { return (n + unit - 1) / unit * unit; }

int tocha_arch_blocks_per_sm(const tocha_arch *a, uint32_t threads, int registers, uint64_t shared)
{
    if (threads == 0) return 0;
    int warps = (int)((threads + 31) / 32);
    int blocks = a->blocks_per_sm;
    int by_warps = a->threads_per_sm / 32 / warps;
    if (by_warps < blocks) blocks = by_warps;
    if (registers > 0) {
        int per_warp = (int)round_up((uint64_t)registers * 32, REGISTER_UNIT);
        if ((int64_t)per_warp * warps > a->registers_per_block) return 0;
        int by_registers = a->registers_per_sm / per_warp / warps;
        if (by_registers < blocks) blocks = by_registers;
    }
    if (shared > a->shared_per_block) return 0;
    uint64_t per_block = round_up(shared + a->shared_reserved, SHARED_UNIT);
    int by_shared = (int)(a->shared_per_sm / per_block);
    if (by_shared < blocks) blocks = by_shared;
    return blocks;
}
