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
/* Makes the mixer of a config read from a file available (docs/security.md): a registered mixer
 * as it is; else its recorded module, only when this process loaded it already or the user allowed
 * it (the set {name = true} at modules_idx, 0 for none; mech.allow_module). The module's value
 * must be a mech.nn Module class or have registered the mixer. Any refusal or failure raises an
 * error naming the module and how to allow it (what: the caller), leaving no registration and no
 * package.loaded entry behind. Returns whether it required the module now. */
bool mlL_mixer_require(lua_State *L, const ml_model_config *c, const char *what, int modules_idx);
/* The mixers registered so far (a mark), and the undoing of every registration since a mark (a
 * load that failed): module (may be NULL), when required by that load, is forgotten too. */
int mlL_mixer_mark(lua_State *L);
void mlL_mixer_forget(lua_State *L, int mark, const char *module);

#endif
