/*
** nvtx.c: NVTX ranges around a script's timed regions, so that nsys and ncu runs of a tocha
** script find them by name. NVTX3 is header-only: it looks for a profiler's injection library
** (NVTX_INJECTION64_PATH, set by nsys and ncu) at the first call and is a few instructions
** otherwise. tocha counts each thread's open ranges itself, so that a pop without a push is an
** error and not an unbalanced profile.
*/
#include "internal.h"

#include <nvtx3/nvToolsExt.h>

static _Thread_local int depth;

int tocha_nvtx_push(const char *name)
{
    if (!name) return tocha_fail(TOCHA_E_ARGUMENT, "name: expected a string, got NULL");
    nvtxRangePushA(name);
    return ++depth;
}

int tocha_nvtx_pop(void)
{
    if (depth == 0) return tocha_fail(TOCHA_E_ARGUMENT, "no range is open on this thread (a pop without a push)");
    nvtxRangePop();
    return --depth;
}

int tocha_nvtx_depth(void) { return depth; }
