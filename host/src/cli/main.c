/*
** main.c: the tocha executable: script runner, one-liners, REPL, info and cache commands.
** Like luajit's own front end, everything runs inside one protected call; an error prints
** "tocha: message" and a traceback on stderr and the exit status is 1 (error() without an
** object: status 1 alone).
*/
#include "repl.h"

#include <errno.h>
#include <luajit.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: tocha [options] [script [args...]]\n"
    "       tocha info             devices, driver, NVRTC, compile target, kernel cache\n"
    "       tocha cache info|clear the disk cache of compiled kernels\n"
    "options:\n"
    "  -e code    run code\n"
    "  -l module  require module (as a global of the same name)\n"
    "  -i         enter the REPL after the script\n"
    "  -v         print the version\n"
    "  -h, --help print this help\n"
    "  --         stop handling options\n"
    "With no script, tocha starts the REPL (history in ~/.tocha_history or $TOCHA_HISTORY).\n"
    "Environment: TOCHA_DEVICE=cuda|cuda:N|sim, TOCHA_ARCH, TOCHA_CACHE_DIR, TOCHA_CACHE=off.\n";

/* Prints a Lua error with its traceback; returns 1. An error without an object (error(), as
** busted's exit raises for a failed run under Lua 5.1) fails silently, as luajit's does. */
static int report(lua_State *L, int status)
{
    if (status == 0) return 0;
    if (!lua_isnil(L, -1)) {
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "tocha: %s\n", msg ? msg : "(error object is not a string)");
        fflush(stderr);
    }
    lua_pop(L, 1);
    return 1;
}

/* Message handler: adds a traceback to the error; a nil error stays nil (report's silent
** failure), and another object is shown by its __tostring or named by its type. */
static int traceback(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) return 1;
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1))
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "traceback");
    lua_pushstring(L, msg);
    lua_pushinteger(L, 2);
    lua_call(L, 2, 1);
    return 1;
}

int tocha_pcall(lua_State *L, int nargs, int nresults)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int status = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return status;
}

/* Makes require "tocha" find its Lua modules: the source tree when this executable lives in
** the build tree, else the install prefix. */
static void set_paths(lua_State *L)
{
    char exe[4096], dir[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(dir, sizeof dir, "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    char paths[8400];
    if (strcmp(dir, TOCHA_BINARY_DIR) == 0)
        snprintf(paths, sizeof paths,
                 "%1$s/lua/?.lua;%1$s/lua/?/init.lua;%1$s/bindings/?.lua;%2$s/lua/?.lua;",
                 TOCHA_SOURCE_DIR, TOCHA_BINARY_DIR);
    else
        snprintf(paths, sizeof paths, "%1$s/%2$s/?.lua;%1$s/%2$s/?/init.lua;", dir,
                 TOCHA_LUADIR_FROM_BIN);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s%s", paths, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* Sets the global arg as luajit does: arg[0] the script, arg[1..] its arguments, negative
** indices the interpreter and its options. */
static void set_arg(lua_State *L, char **argv, int argc, int script)
{
    lua_createtable(L, argc - script, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_chunk(lua_State *L, int load_status, int nargs)
{
    if (load_status) return report(L, load_status);
    if (nargs) lua_insert(L, -(nargs + 1));
    return report(L, tocha_pcall(L, nargs, 0));
}

static int run_script(lua_State *L, const char *path, int argc, char **argv, int first)
{
    int status = luaL_loadfile(L, strcmp(path, "-") == 0 ? NULL : path);
    if (status) return report(L, status);
    int nargs = 0;
    for (int i = first; i < argc; i++, nargs++) lua_pushstring(L, argv[i]);
    return report(L, tocha_pcall(L, nargs, 0));
}

/* Calls require("tocha.cli")[name](args...) for the info and cache commands. Their errors
** are usage errors that already name the command ("tocha cache: ..."): printed as they are,
** without a traceback. */
static int run_command(lua_State *L, const char *name, int argc, char **argv)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "tocha.cli");
    int status = tocha_pcall(L, 1, 1);
    if (status) return report(L, status);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
    if (lua_pcall(L, argc, 0, 0) == 0) return 0;
    const char *msg = lua_tostring(L, -1);
    if (msg) fprintf(stderr, "%s\n", msg);
    lua_pop(L, 1);
    return 1;
}

typedef struct {
    int argc;
    char **argv;
    int status;
} main_args;

static int pmain(lua_State *L)
{
    main_args *m = lua_touserdata(L, 1);
    int argc = m->argc;
    char **argv = m->argv;
    luaL_openlibs(L);
    set_paths(L);
    bool interactive = false, ran = false;
    int i = 1;
    if (argc > 1 && strcmp(argv[1], "info") == 0) {
        m->status = run_command(L, "info", argc - 2, argv + 2);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "cache") == 0) {
        m->status = run_command(L, "cache", argc - 2, argv + 2);
        return 0;
    }
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--") == 0) {
            i++;
            break;
        } else if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(o, "-v") == 0) {
            printf("tocha %s (%s)\n", TOCHA_VERSION_STRING, LUAJIT_VERSION);
            ran = true;
        } else if (strcmp(o, "-i") == 0) {
            interactive = true;
        } else if (strcmp(o, "-e") == 0 || strcmp(o, "-l") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tocha: %s needs an argument\n%s", o, usage);
                m->status = 1;
                return 0;
            }
            const char *value = argv[++i];
            int st;
            if (o[1] == 'e') {
                st = run_chunk(L, luaL_loadbuffer(L, value, strlen(value), "=(command line)"), 0);
            } else {
                lua_getglobal(L, "require");
                lua_pushstring(L, value);
                st = report(L, tocha_pcall(L, 1, 1));
                if (!st) lua_setglobal(L, value);
            }
            if (st) {
                m->status = 1;
                return 0;
            }
            ran = true;
        } else {
            fprintf(stderr, "tocha: unknown option '%s'\n%s", o, usage);
            m->status = 1;
            return 0;
        }
    }
    set_arg(L, argv, argc, i < argc ? i : argc - 1 < 0 ? 0 : i - 1);
    if (i < argc) {
        if (run_script(L, argv[i], argc, argv, i + 1)) {
            m->status = 1;
            return 0;
        }
        ran = true;
    }
    if (interactive || !ran) m->status = tocha_repl(L);
    return 0;
}

/* At every exit (main's return, os.exit): output that could not be written (a full disk, a
** closed stdout) is an error, status 1, never a silent 0. */
static void check_stdout(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    fprintf(stderr, "tocha: stdout: %s\n", errno ? strerror(errno) : "write error");
    fflush(stderr);
    _exit(1);
}

int main(int argc, char **argv)
{
    atexit(check_stdout);
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "tocha: cannot create a Lua state: out of memory\n");
        return 1;
    }
    main_args m = {argc, argv, 0};
    int status = lua_cpcall(L, pmain, &m);
    if (status) report(L, status);
    lua_close(L);
    fflush(stdout);
    return status || m.status ? 1 : 0;
}
