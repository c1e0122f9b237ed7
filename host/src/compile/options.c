/*
** options.c: the compile options a kernel may carry (NVRTC's flags), checked before anything
** compiles. Only flags that shape code generation or the source's macros pass; those tocha sets
** itself (target, language standard, include path, output) or that would make a binary tocha
** cannot load whole (separate compilation, link-time optimisation) are refused by name. On the
** simulator only -D and -U mean anything (they change what the source says); the rest shape
** GPU code and are left out of the host compiler's command.
*/
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define OPTIONS_TAKEN                                                                                   \
    "-DNAME[=V], -UNAME, -lineinfo, --use_fast_math, -maxrregcount=N, -ftz=, -prec-div=, "              \
    "-prec-sqrt=, -fmad= (true or false), -G, --extra-device-vectorization, -restrict, -w, "            \
    "--ptxas-options=OPT or -Xptxas OPT"

/* Flags taken as they are. */
static const char *const plain[] = {
    "-lineinfo",
    "--generate-line-info",
    "--use_fast_math",
    "-use_fast_math",
    "-G",
    "--device-debug",
    "--extra-device-vectorization",
    "-extra-device-vectorization",
    "-restrict",
    "--restrict",
    "-w",
    "--disable-warnings",
};

/* Flags taking true or false. */
static const char *const boolean[] = {
    "-ftz=", "--ftz=", "-prec-div=", "--prec-div=", "-prec-sqrt=", "--prec-sqrt=", "-fmad=", "--fmad="};

/* Flags of tocha's own, or that break what it builds, with the reason given for each. */
static const struct {
    const char *prefix, *why;
} refused[] = {
    {"-arch", "tocha sets the target (the device's, or TOCHA_ARCH without a GPU)"},
    {"--gpu-architecture", "tocha sets the target (the device's, or TOCHA_ARCH without a GPU)"},
    {"-std", "tocha compiles C++17"},
    {"--std", "tocha compiles C++17"},
    {"-I", "tocha sets the include path (the toolkit's headers and its own)"},
    {"--include-path", "tocha sets the include path (the toolkit's headers and its own)"},
    {"-include", "tocha sets what every kernel includes"},
    {"--pre-include", "tocha sets what every kernel includes"},
    {"-o", "tocha keeps the compiled binary itself"},
    {"-rdc", "a kernel is one whole program: tocha links no device code"},
    {"--relocatable-device-code", "a kernel is one whole program: tocha links no device code"},
    {"-dc", "a kernel is one whole program: tocha links no device code"},
    {"-dlto", "a kernel is one whole program: tocha links no device code"},
    {"--dlink-time-opt", "a kernel is one whole program: tocha links no device code"},
};

/* ptxas's own flags that may follow --ptxas-options: reports, optimisation and cache hints. */
static const char *const ptxas_plain[] = {
    "-v",
    "--verbose",
    "-O0",
    "-O1",
    "-O2",
    "-O3",
    "--warn-on-spills",
    "-warn-spills",
    "--warn-on-local-memory-usage",
    "-warn-lmem-usage",
    "--warn-on-double-precision-use",
    "-warn-double-usage",
    "-dlcm=ca",
    "-dlcm=cg",
    "--def-load-cache=ca",
    "--def-load-cache=cg",
    "--allow-expensive-optimizations=true",
    "--allow-expensive-optimizations=false",
};

static bool in(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* A macro name (up to '=' or the end) that is a C identifier and not one of tocha's. */
static int check_macro(const char *opt, const char *name, bool value_allowed)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': expected a macro name (a C identifier)",
                          opt);
    while (isalnum((unsigned char)name[n]) || name[n] == '_') n++;
    if (name[n] && !(value_allowed && name[n] == '='))
        return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': expected a macro name (a C identifier)%s",
                          opt, value_allowed ? " and an optional =value" : "");
    if (strchr(name, '\n'))
        return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': a macro's value is one line", opt);
    if (strncmp(name, "TOCHA_", 6) == 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': TOCHA_ macros are tocha's own", opt);
    return TOCHA_OK;
}

static int check_ptxas(const char *opt, const char *value)
{
    if (in(value, ptxas_plain, sizeof ptxas_plain / sizeof ptxas_plain[0])) return TOCHA_OK;
    return tocha_fail(TOCHA_E_ARGUMENT,
                      "options: '%s': ptxas option '%s' is not one tocha passes (it takes -v, -O0 to "
                      "-O3, --warn-on-spills, --warn-on-local-memory-usage, "
                      "--warn-on-double-precision-use, -dlcm=ca|cg, "
                      "--allow-expensive-optimizations=true|false)",
                      opt, value);
}

static int check_one(const char *opt, const char *next, int *used)
{
    *used = 1;
    if (in(opt, plain, sizeof plain / sizeof plain[0])) return TOCHA_OK;
    for (size_t i = 0; i < sizeof boolean / sizeof boolean[0]; i++)
        if (starts(opt, boolean[i])) {
            const char *v = opt + strlen(boolean[i]);
            if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) return TOCHA_OK;
            return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': expected true or false after '='", opt);
        }
    if (starts(opt, "-maxrregcount=") || starts(opt, "--maxrregcount=")) {
        const char *v = strchr(opt, '=') + 1;
        char *end;
        long n = strtol(v, &end, 10);
        if (!isdigit((unsigned char)*v) || *end || n < 1 || n > 255)
            return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': expected a register count from 1 to 255",
                              opt);
        return TOCHA_OK;
    }
    if (starts(opt, "--define-macro=")) return check_macro(opt, opt + 15, true);
    if (starts(opt, "--undefine-macro=")) return check_macro(opt, opt + 17, false);
    if (starts(opt, "-D")) return check_macro(opt, opt + 2, true);
    if (starts(opt, "-U")) return check_macro(opt, opt + 2, false);
    if (starts(opt, "--ptxas-options=")) return check_ptxas(opt, opt + 16);
    if (starts(opt, "-Xptxas=")) return check_ptxas(opt, opt + 8);
    if (strcmp(opt, "-Xptxas") == 0 || strcmp(opt, "--ptxas-options") == 0) {
        if (!next)
            return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s': expected a ptxas option after it", opt);
        *used = 2;
        return check_ptxas(opt, next);
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        size_t n = strlen(refused[i].prefix);
        /* The flag itself, or it joined to its value ("-arch=sm_80", "-Ifolder", "-o" "x"). */
        if (strncmp(opt, refused[i].prefix, n) == 0 &&
            (opt[n] == '\0' || opt[n] == '=' || refused[i].prefix[1] == 'I' ||
             refused[i].prefix[1] == 'o'))
            return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s' is refused: %s", opt, refused[i].why);
    }
    return tocha_fail(TOCHA_E_ARGUMENT, "options: '%s' is not an option tocha passes (it takes %s)", opt,
                      OPTIONS_TAKEN);
}

int tocha_options_check(const char *const *options, int count)
{
    if (count < 0 || (count > 0 && !options))
        return tocha_fail(TOCHA_E_ARGUMENT, "options: expected a list of strings");
    if (count > TOCHA_MAX_OPTIONS)
        return tocha_fail(TOCHA_E_ARGUMENT, "options: at most %d, got %d", TOCHA_MAX_OPTIONS, count);
    for (int i = 0; i < count;) {
        if (!options[i])
            return tocha_fail(TOCHA_E_ARGUMENT, "options[%d]: expected a string, got NULL", i + 1);
        if (strlen(options[i]) > 1000)
            return tocha_fail(TOCHA_E_ARGUMENT, "options[%d]: longer than 1000 bytes", i + 1);
        int used;
        int st = check_one(options[i], i + 1 < count ? options[i + 1] : NULL, &used);
        if (st) return st;
        i += used;
    }
    return TOCHA_OK;
}

bool tocha_option_is_macro(const char *opt)
{
    return starts(opt, "-D") || starts(opt, "-U") || starts(opt, "--define-macro=") ||
           starts(opt, "--undefine-macro=");
}
