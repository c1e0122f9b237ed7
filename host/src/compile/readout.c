/*
** readout.c: what a kernel's compiled code uses, and how many of its blocks an SM holds.
** A readout is one extra NVRTC compile of the kernel for a target with ptxas's report asked
** for (--ptxas-options=-v): registers, spills, static shared memory and stack frame come from
** ptxas's lines in the program log, __constant__ bytes from the cubin's .nv.constant3 section,
** the PTX from the program. It is kept with the kernel, never made on the launch path. On a
** cuda device of the target the driver's function attributes replace ptxas's figures (they
** are what launches see), and its occupancy calculator answers; elsewhere occupancy follows
** the target's published limits (arch.c).
*/
#include "internal.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tocha_readouts_free(tocha_readout *r)
{
    while (r) {
        tocha_readout *next = r->next;
        free(r->ptx);
        free(r);
        r = next;
    }
}

/* The target a readout is for: target itself (sm_XY), or by default the cuda device's own or the
** simulator's compile target. */
static int readout_target(tocha_device *d, const char *target, char out[32])
{
    if (!target) target = d && d->kind == TOCHA_DEVICE_CUDA ? d->target : tocha_arch_default();
    int major = 0, minor = 0, used = 0;
    if (sscanf(target, "sm_%1d%d%n", &major, &minor, &used) != 2 || target[used] || strlen(target) >= 32)
        return tocha_fail(TOCHA_E_ARGUMENT, "target: expected sm_XY (e.g. sm_90), got '%s'", target);
    snprintf(out, 32, "%s", target);
    return TOCHA_OK;
}

/* Bytes of the cubin's .nv.constant3 section (the __constant__ variables), 0 where there is none
** or the ELF is not one this reads. */
static int64_t constant_bytes(const unsigned char *elf, uint64_t size)
{
    Elf64_Ehdr h;
    if (size < sizeof h) return 0;
    memcpy(&h, elf, sizeof h);
    if (memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
        h.e_shentsize != sizeof(Elf64_Shdr) || h.e_shstrndx >= h.e_shnum || h.e_shoff > size ||
        (uint64_t)h.e_shnum * sizeof(Elf64_Shdr) > size - h.e_shoff)
        return 0;
    Elf64_Shdr names;
    memcpy(&names, elf + h.e_shoff + (uint64_t)h.e_shstrndx * sizeof names, sizeof names);
    if (names.sh_offset > size || names.sh_size > size - names.sh_offset) return 0;
    int64_t bytes = 0;
    for (int i = 0; i < h.e_shnum; i++) {
        Elf64_Shdr s;
        memcpy(&s, elf + h.e_shoff + (uint64_t)i * sizeof s, sizeof s);
        const char *want = ".nv.constant3";
        if (s.sh_name + strlen(want) + 1 > names.sh_size) continue;
        if (memcmp(elf + names.sh_offset + s.sh_name, want, strlen(want) + 1) == 0)
            bytes += (int64_t)s.sh_size;
    }
    return bytes;
}

/* The start of the line after p, or NULL. */
static const char *next_line(const char *p)
{
    p = strchr(p, '\n');
    return p ? p + 1 : NULL;
}

/* Reads ptxas's report of entry from log into out. */
static int parse_report(const char *log, const char *entry, tocha_kernel_info *out)
{
    char head[300];
    snprintf(head, sizeof head, "Compiling entry function '%s'", entry);
    const char *at = strstr(log, head);
    if (!at) return -1;
    const char *end = strstr(at + 1, "Compiling entry function");
    snprintf(head, sizeof head, "Function properties for %s\n", entry);
    const char *props = strstr(at, head);
    if (!props || (end && props > end)) return -1;
    const char *frame = next_line(props);
    long long stack = 0, stores = 0, loads = 0;
    if (!frame || !strstr(frame, "stack frame") ||
        sscanf(strstr(frame, ".") + 1,
               " %lld bytes stack frame, %lld bytes spill stores, %lld bytes spill loads", &stack,
               &stores, &loads) != 3)
        return -1;
    const char *used = strstr(frame, "Used ");
    if (!used || (end && used > end)) return -1;
    int registers = 0;
    if (sscanf(used, "Used %d registers", &registers) != 1) return -1;
    long long smem = 0;
    const char *line_end = strchr(used, '\n');
    const char *s = strstr(used, " bytes smem");
    if (s && (!line_end || s < line_end)) {
        while (s > used && s[-1] >= '0' && s[-1] <= '9') s--;
        smem = atoll(s);
    }
    out->registers = registers;
    out->local = stack;
    out->spill_stores = stores;
    out->spill_loads = loads;
    out->shared = smem;
    return 0;
}

/* The largest block k's code launches with: 1024, its launch bounds, and the registers a block
** may hold (allocated to warps 256 at a time). */
static int max_threads(const tocha_kernel *k, const tocha_arch *a, int registers)
{
    int threads = 1024;
    if (tocha_kernel_max_threads(k)) threads = tocha_kernel_max_threads(k);
    if (registers > 0) {
        int per_warp = (registers * 32 + 255) / 256 * 256;
        int warps = (a ? a->registers_per_block : 65536) / per_warp;
        if (warps * 32 < threads) threads = warps * 32;
    }
    return threads;
}

/* The readout of k for target, made (one NVRTC compile) the first time it is asked for. */
static int readout(tocha_kernel *k, const char *target, tocha_readout **out)
{
    tocha_readout **list = tocha_kernel_readouts(k);
    for (tocha_readout *r = *list; r; r = r->next)
        if (strcmp(r->info.target, target) == 0) {
            *out = r;
            return TOCHA_OK;
        }
    char *unit = tocha_kernel_unit(k, target);
    if (!unit) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for kernel source");
    char *log = NULL, *ptx = NULL;
    void *cubin = NULL;
    uint64_t cubin_size = 0;
    const char *entry = tocha_kernel_entry_point_name(k);
    int st = tocha_nvrtc_report(unit, target, tocha_kernel_options(k), &log, &ptx, &cubin, &cubin_size);
    /* Measured on the H200 machine (NVRTC 13.0, driver 13.0): in a process with a CUDA driver but
       no context yet, NVRTC leaves ptxas's report out of the log; once a context exists, it is
       there. So where the report is missing and a GPU is usable, its context is made and the
       unit compiled once more. (Without a driver the report is always there.) */
    tocha_kernel_info probe;
    tocha_device *gpu = NULL;
    if (!st && parse_report(log, entry, &probe) != 0 && tocha_device_get("cuda", &gpu) == TOCHA_OK) {
        free(log);
        free(ptx);
        free(cubin);
        st = tocha_nvrtc_report(unit, target, tocha_kernel_options(k), &log, &ptx, &cubin, &cubin_size);
    }
    free(unit);
    if (st) return st;
    tocha_readout *r = calloc(1, sizeof *r);
    if (!r)
        st = tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a readout");
    else
        r->reported = parse_report(log, entry, &r->info) == 0;
    if (st) {
        free(r);
        free(log);
        free(ptx);
        free(cubin);
        return st;
    }
    r->info.constant = constant_bytes(cubin, cubin_size);
    r->info.max_threads = max_threads(k, tocha_arch_find(target), r->info.registers);
    snprintf(r->info.target, sizeof r->info.target, "%s", target);
    r->ptx = ptx;
    free(log);
    free(cubin);
    r->next = *list;
    *list = r;
    *out = r;
    return TOCHA_OK;
}

/* The error of a readout that needs ptxas's figures where NVRTC's log did not have them. */
static int missing_report(const tocha_kernel *k, const char *target)
{
    return tocha_fail(TOCHA_E_COMPILE,
                      "kernel %s: ptxas's report for %s is not in NVRTC's log (NVRTC leaves it out in a "
                      "process that has a GPU driver but cannot make a context on it)",
                      tocha_kernel_entry_point_name(k), target);
}

/* Whether d is a cuda device compiling for target: then its driver answers. */
static bool driver_answers(const tocha_device *d, const char *target)
{
    return d && d->kind == TOCHA_DEVICE_CUDA && strcmp(d->target, target) == 0;
}

int tocha_kernel_info_get(tocha_kernel *k, tocha_device *d, const char *target, tocha_kernel_info *out)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the result, got NULL");
    char resolved[32];
    tocha_readout *r;
    int st = readout_target(d, target, resolved);
    if (!st) st = readout(k, resolved, &r);
    if (st) return st;
    bool driver = driver_answers(d, resolved) && d->backend->function_info;
    if (!r->reported && !driver) return missing_report(k, resolved);
    *out = r->info;
    out->from_device = 0;
    if (!r->reported) out->spill_stores = out->spill_loads = -1; /* only ptxas knows them */
    if (driver) {
        void *fn;
        if ((st = tocha_kernel_function(k, d, &fn))) return st;
        if ((st = d->backend->function_info(d, fn, out))) return st;
        out->from_device = 1;
    }
    return TOCHA_OK;
}

int tocha_kernel_occupancy(tocha_kernel *k, tocha_device *d, const char *target, uint32_t threads,
                           uint32_t shared_bytes, int32_t *blocks, double *fraction)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (threads < 1 || threads > 1024)
        return tocha_fail(TOCHA_E_ARGUMENT, "block: must be 1 to 1024 threads, got %u", threads);
    char resolved[32];
    int st = readout_target(d, target, resolved);
    if (st) return st;
    int warps = (int)((threads + 31) / 32), n = 0, warps_per_sm;
    if (driver_answers(d, resolved) && d->backend->occupancy) {
        void *fn;
        tocha_kernel_info info;
        if ((st = tocha_kernel_function(k, d, &fn))) return st;
        if ((st = d->backend->function_info(d, fn, &info))) return st;
        /* A block that could not launch holds no place: 0, as the table's answer is, rather than
           the driver's refusal; a size above 48 KiB is allowed first, as a launch would. */
        if ((int)threads <= info.max_threads && (uint64_t)shared_bytes + info.shared <= d->shared_per_block) {
            if ((st = tocha_kernel_allow_shared(k, d, fn, shared_bytes))) return st;
            if ((st = d->backend->occupancy(d, fn, threads, shared_bytes, &n))) return st;
        }
        warps_per_sm = d->threads_per_sm / 32;
    } else {
        const tocha_arch *a = tocha_arch_find(resolved);
        if (!a)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "target: tocha has no table of %s's limits (it has sm_80, sm_86, sm_87, "
                              "sm_89, sm_90, sm_100 and sm_120)",
                              resolved);
        tocha_readout *r;
        if ((st = readout(k, resolved, &r))) return st;
        if (!r->reported) return missing_report(k, resolved);
        if ((int)threads <= r->info.max_threads)
            n = tocha_arch_blocks_per_sm(a, threads, r->info.registers,
                                         (uint64_t)r->info.shared + shared_bytes);
        warps_per_sm = a->threads_per_sm / 32;
    }
    *blocks = n;
    *fraction = warps_per_sm > 0 ? (double)n * warps / warps_per_sm : 0;
    return TOCHA_OK;
}

int tocha_kernel_ptx(tocha_kernel *k, const char *target, const char **ptx)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    char resolved[32];
    tocha_readout *r;
    int st = readout_target(NULL, target, resolved);
    if (!st) st = readout(k, resolved, &r);
    if (st) return st;
    *ptx = r->ptx;
    return TOCHA_OK;
}
