/* luaopen_mech: builds the `mech` module from the area openers. */
#include <stdlib.h>

#include "lua/binding.h"

#ifndef MECHLAB_LUA_DIR
#define MECHLAB_LUA_DIR "lua"
#endif

/* Puts mechlab's Lua library (lua/mech/NAME.lua) first on package.path: $MECHLAB_LUA_PATH if set,
 * else the source tree's lua/ directory baked in at build time. */
static void add_lua_path(lua_State *L) {
    const char *dir = getenv("MECHLAB_LUA_PATH");
    if (!dir || !*dir) dir = MECHLAB_LUA_DIR;
    lua_getglobal(L, "package");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

int luaopen_mech(lua_State *L) {
    static int (*const openers[])(lua_State *) = {mlL_open_tensor, mlL_open_ops,    mlL_open_model, mlL_open_sys,
                                                  mlL_open_task,   mlL_open_interp, mlL_open_plot,  mlL_open_io,
                                                  mlL_open_optim,  NULL};
    lua_newtable(L);
    for (int i = 0; openers[i]; i++) {
        openers[i](L);
        luaL_checkstack(L, 1, NULL);
    }
    lua_pushstring(L, MECHLAB_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, MECHLAB_GIT);
    lua_setfield(L, -2, "git");
    add_lua_path(L);
    return 1;
}
