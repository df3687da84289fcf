/* luaopen_mech: builds the `mech` module from the area openers. */
#define _DEFAULT_SOURCE /* realpath */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/version.h"
#include "io/os.h"
#include "lua/binding.h"

#ifndef MECHLAB_SOURCE_DIR
#define MECHLAB_SOURCE_DIR "."
#endif
#ifndef MECHLAB_HOME_FROM_BIN
#define MECHLAB_HOME_FROM_BIN "../share/mechlab"
#endif

/* mechlab's home: the directory holding its Lua library, sweep files and figure recipes (lua/,
 * experiments/, plots/). An installation (`cmake --install`) is found from the executable's own
 * location, so it runs from any directory and any prefix; a build tree uses its source tree. */
static void push_home(lua_State *L) {
    char exe[PATH_MAX];
    char *slash = ml_executable(exe, sizeof exe) ? (ml_clear_error(), NULL) : strrchr(exe, '/');
    if (slash) {
        *slash = '\0';
        char installed[PATH_MAX + 64], probe[PATH_MAX + 96], home[PATH_MAX];
        snprintf(installed, sizeof installed, "%s/%s", exe, MECHLAB_HOME_FROM_BIN);
        snprintf(probe, sizeof probe, "%s/lua/mech/sweep.lua", installed);
        if (ml_is_file(probe) && realpath(installed, home)) {
            lua_pushstring(L, home);
            return;
        }
    }
    lua_pushstring(L, MECHLAB_SOURCE_DIR);
}

/* Puts mechlab's Lua library (lua/mech/NAME.lua) first on package.path: $MECHLAB_LUA_PATH if set,
 * else HOME/lua. */
static void add_lua_path(lua_State *L, const char *home) {
    const char *env = getenv("MECHLAB_LUA_PATH");
    if (env && *env) lua_pushstring(L, env);
    else lua_pushfstring(L, "%s/lua", home);
    const char *dir = lua_tostring(L, -1);
    lua_getglobal(L, "package");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "path");
        lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
        lua_setfield(L, -3, "path");
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
}

/* mech.find(path): PATH itself if it names a file (relative to the working directory, or absolute),
 * else HOME/PATH if that does, else nil and a message naming both: how a script, sweep file or
 * recipe of the distribution is found from any directory, a local copy first (as `require`). */
static int l_find(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    if (ml_is_file(path)) {
        lua_settop(L, 1);
        return 1;
    }
    lua_getfield(L, lua_upvalueindex(1), "home");
    const char *home = lua_tostring(L, -1);
    if (path[0] != '/' && home) {
        lua_pushfstring(L, "%s/%s", home, path);
        if (ml_is_file(lua_tostring(L, -1))) return 1;
    }
    lua_pushnil(L);
    lua_pushfstring(L, "no file '%s' here%s%s", path, home && path[0] != '/' ? " or in mechlab's home " : "",
                    home && path[0] != '/' ? home : "");
    return 2;
}

int luaopen_mech(lua_State *L) {
    static int (*const openers[])(lua_State *) = {mlL_open_tensor, mlL_open_ops,    mlL_open_model, mlL_open_sys,
                                                  mlL_open_task,   mlL_open_interp, mlL_open_plot,  mlL_open_io,
                                                  mlL_open_optim,  mlL_open_nn,     mlL_open_mixer, NULL};
    lua_newtable(L);
    for (int i = 0; openers[i]; i++) {
        openers[i](L);
        luaL_checkstack(L, 1, NULL);
    }
    /* mech.plot.layers / components: the analysis figures (mech.interp.plot_layers, plot_components) */
    lua_getfield(L, -1, "plot");
    lua_getfield(L, -2, "interp");
    lua_getfield(L, -1, "plot_layers");
    lua_setfield(L, -3, "layers");
    lua_getfield(L, -1, "plot_components");
    lua_setfield(L, -3, "components");
    lua_pop(L, 2);
    lua_pushstring(L, MECHLAB_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, mechlab_git);
    lua_setfield(L, -2, "git");
    push_home(L);
    add_lua_path(L, lua_tostring(L, -1));
    lua_setfield(L, -2, "home");
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_find, 1);
    lua_setfield(L, -2, "find");
    return 1;
}
