/*
** repl.c: the REPL. Lines are read with libedit (history in ~/.tocha_history or
** $TOCHA_HISTORY) when stdin is a terminal, and plainly from a pipe. An expression's values
** are printed (`x` and `=x`); input continues until the chunk is complete; an error prints
** its traceback and the session goes on; Ctrl-C interrupts a running chunk; end of input
** (Ctrl-D) leaves. Tab completes names (tocha.completion, in Lua) and, inside a string, file
** names (libedit's own).
*/
#include "repl.h"

#include <editline/readline.h>
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char history_path[4096];

/* Ctrl-C while a chunk runs interrupts it, not the session (as lua.c does): the handler sets
** a hook, and the hook raises "interrupted!" in the running code at its next instruction. */
static lua_State *running;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_interrupt(int sig)
{
    signal(sig, SIG_DFL); /* a second Ctrl-C before the hook runs ends the process */
    if (running) lua_sethook(running, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static int run_interruptible(lua_State *L, int nargs)
{
    running = L;
    signal(SIGINT, on_interrupt);
    int status = tocha_pcall(L, nargs, LUA_MULTRET);
    signal(SIGINT, SIG_DFL);
    running = NULL;
    return status;
}

/* ---- Tab completion ---- */

static lua_State *session;
static char **offered; /* the candidates of the word being completed, NULL-terminated */
static size_t n_offered, next_offered;

static void forget_offered(void)
{
    for (size_t i = next_offered; i < n_offered; i++) free(offered[i]);
    free(offered);
    offered = NULL;
    n_offered = next_offered = 0;
}

/* Fills offered from tocha.completion.candidates(text); any Lua error offers nothing. */
static void ask_lua(const char *text)
{
    forget_offered();
    lua_State *L = session;
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "tocha.completion");
    if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
        lua_getfield(L, -1, "candidates");
        lua_pushstring(L, text);
        if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
            size_t n = lua_objlen(L, -1);
            offered = calloc(n + 1, sizeof *offered);
            for (size_t i = 0; offered && i < n; i++) {
                lua_rawgeti(L, -1, (int)i + 1);
                const char *c = lua_tostring(L, -1);
                if (c && (offered[n_offered] = strdup(c))) n_offered++;
                lua_pop(L, 1);
            }
        }
    }
    lua_settop(L, top);
}

/* libedit's generator: the state-th candidate (state 0 asks Lua first); libedit frees it. */
static char *next_candidate(const char *text, int state)
{
    if (state == 0) ask_lua(text);
    if (next_offered < n_offered) return offered[next_offered++];
    forget_offered();
    return NULL;
}

/* Whether position `at` of line lies inside a string literal ('...' or "..."). */
static bool in_string(const char *line, int at)
{
    char quote = 0;
    for (int i = 0; i < at && line[i]; i++) {
        if (quote && line[i] == '\\')
            i++;
        else if (quote && line[i] == quote)
            quote = 0;
        else if (!quote && (line[i] == '"' || line[i] == '\''))
            quote = line[i];
    }
    return quote != 0;
}

static char **complete(const char *text, int start, int end)
{
    (void)end;
    rl_completion_append_character = '\0'; /* tocha.Ups -> tocha.UpsampleNearest2dForward, then "." */
    if (in_string(rl_line_buffer, start)) return NULL; /* libedit completes the file name */
    rl_attempted_completion_over = 1;                  /* and nothing else falls back to it */
    return rl_completion_matches(text, next_candidate);
}

static void open_completion(lua_State *L)
{
    static char breaks[] = " \t\n\"'`@$><=;|&{(,[+-*/%^~#";
    session = L;
    rl_completer_word_break_characters = breaks; /* not . and :, so tocha.Ups is one word */
    rl_attempted_completion_function = complete;
}

static void open_history(void)
{
    const char *env = getenv("TOCHA_HISTORY");
    const char *home = getenv("HOME");
    if (env && *env)
        snprintf(history_path, sizeof history_path, "%s", env);
    else if (home && *home)
        snprintf(history_path, sizeof history_path, "%s/.tocha_history", home);
    using_history();
    stifle_history(1000);
    if (history_path[0]) read_history(history_path);
}

/* One line without its newline (malloc'd), or NULL at end of input. */
static char *read_line(bool tty, const char *prompt)
{
    if (tty) return readline(prompt);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
    return line;
}

/* Whether a load error means the chunk is only unfinished. */
static bool incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    /* LuaJIT quotes the token: "'end' expected near '<eof>'". */
    return (len >= 5 && strcmp(msg + len - 5, "<eof>") == 0) ||
           (len >= 7 && strcmp(msg + len - 7, "'<eof>'") == 0);
}

/* Returns its arguments. Expressions are compiled as "return pass(<expr>)" rather than
** "return <expr>", so that a call in them is no tail call and its errors keep their line. */
static int pass(lua_State *L) { return lua_gettop(L); }

/* Compiles the chunk: as an expression first (so values print), else as statements.
** Returns the load status; the function (and its argument, if any) or the message is on
** the stack; *nargs tells how many arguments the function takes. */
static int load_chunk(lua_State *L, const char *chunk, int *nargs)
{
    const char *code = chunk[0] == '=' ? chunk + 1 : chunk;
    *nargs = 0;
    lua_pushfstring(L, "local pass = ...; return pass(%s\n)", code);
    int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_objlen(L, -1), "=stdin");
    lua_remove(L, -2);
    if (status == 0) {
        lua_pushcfunction(L, pass);
        *nargs = 1;
    }
    if (status == 0 || chunk[0] == '=') return status;
    lua_pop(L, 1);
    return luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
}

static void print_results(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    if (n <= 0) return;
    lua_getglobal(L, "tostring");
    for (int i = 1; i <= n; i++) {
        lua_pushvalue(L, -1);
        lua_pushvalue(L, base + i);
        if (tocha_pcall(L, 1, 1) != 0) {
            const char *msg = lua_tostring(L, -1);
            fprintf(stdout, "%s(error in tostring: %s)", i > 1 ? "\t" : "", msg ? msg : "nil");
        } else {
            fprintf(stdout, "%s%s", i > 1 ? "\t" : "", lua_tostring(L, -1));
        }
        lua_pop(L, 1);
    }
    fputc('\n', stdout);
    fflush(stdout);
    lua_settop(L, base);
}

static void banner(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "tocha.cli");
    if (tocha_pcall(L, 1, 1) == 0) {
        lua_getfield(L, -1, "banner");
        if (tocha_pcall(L, 0, 1) == 0)
            fprintf(stdout, "%s\n", lua_tostring(L, -1));
        else if (lua_tostring(L, -1))
            fprintf(stderr, "tocha: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        /* The REPL offers tocha as a global, as a convenience. */
        lua_getglobal(L, "require");
        lua_pushstring(L, "tocha");
        if (tocha_pcall(L, 1, 1) == 0)
            lua_setglobal(L, "tocha");
        else
            lua_pop(L, 1);
    } else {
        fprintf(stderr, "tocha: %s\n", lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    fflush(stdout);
}

int tocha_repl(lua_State *L)
{
    bool tty = isatty(0);
    if (tty) {
        open_history();
        open_completion(L);
    }
    banner(L);
    char *chunk = NULL;
    for (;;) {
        char *line = read_line(tty, chunk ? ">> " : "> ");
        if (!line) break;
        size_t old = chunk ? strlen(chunk) : 0, add = strlen(line);
        char *joined = realloc(chunk, old + add + 2);
        if (!joined) {
            free(line);
            break;
        }
        if (old) joined[old++] = '\n';
        memcpy(joined + old, line, add + 1);
        chunk = joined;
        free(line);
        int base = lua_gettop(L);
        int nargs = 0;
        int status = load_chunk(L, chunk, &nargs);
        if (incomplete(L, status)) {
            lua_pop(L, 1);
            continue;
        }
        if (tty && chunk[0]) {
            add_history(chunk);
            if (history_path[0]) write_history(history_path);
        }
        free(chunk);
        chunk = NULL;
        if (status == 0) status = run_interruptible(L, nargs);
        if (status != 0) {
            const char *msg = lua_tostring(L, -1); /* NULL for error(): nothing to say */
            if (msg) fprintf(stderr, "%s\n", msg);
            fflush(stderr);
            lua_settop(L, base);
            continue;
        }
        print_results(L, base);
    }
    /* Input that ends inside a chunk ("for i = 1, 3 do" and no "end") is said, and fails the
    ** session, rather than dropped. */
    int status = 0;
    if (chunk) {
        int nargs = 0, base = lua_gettop(L);
        load_chunk(L, chunk, &nargs);
        fprintf(stderr, "tocha: the input ended inside a chunk: %s\n", lua_tostring(L, -1));
        fflush(stderr);
        lua_settop(L, base);
        status = 1;
    }
    free(chunk);
    if (tty) fputc('\n', stdout);
    return status;
}
