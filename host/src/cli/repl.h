/* repl.h: the interactive loop of the tocha executable. */
#ifndef TOCHA_REPL_H
#define TOCHA_REPL_H
#include <lua.h>
#include <stdbool.h>

/* Runs the REPL on L until end of input; returns the exit status (0). */
int tocha_repl(lua_State *L);
/* lua_pcall with a traceback handler. */
int tocha_pcall(lua_State *L, int nargs, int nresults);
#endif
