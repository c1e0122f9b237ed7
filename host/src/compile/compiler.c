/*
** compiler.c: the translation unit each target compiles, and who compiles it.
** cuda targets ("sm_90") compile with NVRTC; the simulator's target with the host C++
** compiler. Both see the same kernel text behind a target-specific prelude.
*/
#include "internal.h"
#include "embedded.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_sim_target(const char *target) { return strncmp(target, "sim", 3) == 0; }

/* The simulator's headers, in the order they build on each other. */
static const char *const sim_prelude[] = {
    "sim/tocha_sim.h",          "sim/fibers.h", "sim/warp.h",        "sim/atomics.h",
    "sim/cooperative_groups.h", "sim/wmma.h",   "sim/tensor_core.h", "sim/warpgroup.h",
    "sim/mbarrier.h",
};

/* Appends `text` from its line `first` up to (not including) line `last` (0: to its end). */
static void append_lines(tocha_text *t, const char *text, int first, int last)
{
    int line = 1;
    const char *p = text;
    while (*p && line < first) {
        if (*p++ == '\n') line++;
    }
    const char *start = p;
    while (*p && (last == 0 || line < last)) {
        if (*p++ == '\n') line++;
    }
    tocha_text_appendf(t, "%.*s", (int)(p - start), start);
}

char *tocha_translation_unit(const char *source, const char *file, int entry_line, const char *target,
                             const char *sim_launcher)
{
    tocha_text t = {0};
    if (is_sim_target(target)) {
        for (size_t i = 0; i < sizeof sim_prelude / sizeof sim_prelude[0]; i++) {
            tocha_text_appendf(&t, "#line 1 \"%s\"\n", sim_prelude[i]);
            tocha_text_append(&t, tocha_embedded_find(sim_prelude[i]));
        }
    } else {
        tocha_text_append(&t, "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n");
    }
    tocha_text_append(&t, "#line 1 \"tocha.cuh\"\n");
    tocha_text_append(&t, tocha_embedded_find("tocha.cuh"));
    char *rewritten = is_sim_target(target) ? tocha_sim_rewrite_source(source) : NULL;
    if (is_sim_target(target) && !rewritten) {
        free(tocha_text_take(&t));
        return NULL;
    }
    const char *text = rewritten ? rewritten : source;
    tocha_text_appendf(&t, "\n#line 1 \"%s\"\n", file ? file : "kernel.cu");
    append_lines(&t, text, 1, entry_line);
    if (entry_line > 0) {
        tocha_text_append(&t, "#line 1 \"<entry point>\"\n");
        append_lines(&t, text, entry_line, 0);
    }
    free(rewritten);
    tocha_text_append(&t, "\n");
    if (is_sim_target(target) && sim_launcher) {
        tocha_text_append(&t, "#line 1 \"<simulator launcher>\"\n");
        tocha_text_append(&t, sim_launcher);
    }
    return tocha_text_take(&t);
}

int tocha_compile_unit(const char *unit, const char *target, const tocha_options *options, void **binary,
                       uint64_t *size)
{
    if (is_sim_target(target)) return tocha_sim_compile(unit, options, binary, size);
    return tocha_nvrtc_compile(unit, target, options, binary, size);
}

int tocha_compiler_fingerprint(const char *target, const char **out)
{
    static _Thread_local char text[640];
    if (is_sim_target(target)) {
        const char *ident;
        int st = tocha_sim_compiler_identity(&ident);
        if (st) return st;
        snprintf(text, sizeof text, "%s | %s", ident, tocha_sim_options());
    } else {
        const char *why = NULL;
        if (!tocha_nvrtc_available(&why)) return tocha_fail(TOCHA_E_UNAVAILABLE, "%s", why);
        snprintf(text, sizeof text, "%s | %s", tocha_nvrtc_identity(), tocha_nvrtc_options());
    }
    *out = text;
    return TOCHA_OK;
}

const char *tocha_embedded_find(const char *name)
{
    for (const tocha_embedded_file *f = tocha_embedded_files; f->name; f++)
        if (strcmp(f->name, name) == 0) return f->text;
    return NULL;
}

const char *tocha_kernel_library_source(const char *file)
{
    if (!file || strcmp(file, "tocha.cuh") == 0 || strncmp(file, "sim/", 4) == 0) return NULL;
    return tocha_embedded_find(file);
}
