/* Mixers written in Lua (src/lua/mixer.c): what mech.model and mech.load (src/lua/model.c) need. */
#ifndef MLL_MIXER_H
#define MLL_MIXER_H

#include "lua/binding.h"
#include "nn/model.h"

/* The arch name of mech.model's `mixer` value at idx: a mech.nn Module class (registered on first
 * use; a built-in mixer's layer class is that mixer), a built-in or registered mixer's name, or a
 * module to require that returns the class. */
const char *mlL_mixer_arch(lua_State *L, int idx, const char *fn);
/* Is arch a mixer written in Lua? */
bool mlL_mixer_is_lua(const char *arch);
/* For a Lua mixer c->arch: records its module and, as JSON, every option of the table at idx whose
 * key is not in config_keys (NULL-terminated) — the options its class is built with. */
void mlL_mixer_options(lua_State *L, int idx, const char *fn, const char *const *config_keys, ml_model_config *c);
/* Makes the mixer of a config read from a file available by requiring its recorded module; a
 * module that cannot be loaded, or does not register the mixer, raises an error naming both
 * (what: the caller, for the message). Without a module the model builder names the choices. */
void mlL_mixer_require(lua_State *L, const ml_model_config *c, const char *what);

#endif
