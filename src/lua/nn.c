/* mech.nn: the layers of lua/mech/nn/ (Lua), reached as mech.nn on first use. */
#include <string.h>

#include "lua/binding.h"

/* mech's __index: mech.nn requires "mech.nn" once and keeps it in the table. */
static int mech_index(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    if (lua_type(L, 2) != LUA_TSTRING || strcmp(k, "nn") != 0) return 0;
    lua_getglobal(L, "require");
    lua_pushliteral(L, "mech.nn");
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "nn");
    return 1;
}

int mlL_open_nn(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, mech_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    return 0;
}
