/* Tab completion for the REPL: names of globals, table fields and, through metatables, the
 * methods of userdata (tensors, models); shown by their last component. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "host/host.h"
#include "lua/binding.h"

/* REPL: tab completion                                                                         */

static lua_State *g_state; /* the state whose globals are completed */
static char **g_cands;
static size_t g_ncands, g_next_cand, g_cand_prefix;

static void free_cands(void) {
    for (size_t i = 0; i < g_ncands; i++) free(g_cands[i]);
    free(g_cands);
    g_cands = NULL;
    g_ncands = g_next_cand = 0;
}

static bool is_ident(const char *s, size_t n) {
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Replaces the value on top with its field `name`, running no metamethods: raw lookups that
 * follow __index only where it is a table. Missing fields give nil. */
static void safe_field(lua_State *L, const char *name, size_t len) {
    for (int depth = 0; depth < 16 && !lua_isnil(L, -1); depth++) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_pushlstring(L, name, len);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                lua_remove(L, -2);
                return;
            }
            lua_pop(L, 1);
        }
        if (!lua_getmetatable(L, -1)) break;
        lua_pushliteral(L, "__index");
        lua_rawget(L, -2);
        lua_remove(L, -2);
        lua_remove(L, -2); /* __index value replaces the value */
    }
    lua_pop(L, 1);
    lua_pushnil(L);
}

/* Adds "<prefix><key><suffix>" to the result set (table at `res`) for each string key of the
 * table on top that is an identifier starting with `part`. Names beginning with "__" are
 * metamethods and internals: shown only when asked for. */
static void add_keys(lua_State *L, int res, const char *prefix, size_t plen, const char *part,
                     bool methods_only) {
    size_t partlen = strlen(part);
    bool hidden_ok = part[0] == '_' && part[1] == '_';
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        size_t klen;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        bool func = lua_type(L, -1) == LUA_TFUNCTION;
        if (k && is_ident(k, klen) && klen >= partlen && memcmp(k, part, partlen) == 0 &&
            (hidden_ok || strncmp(k, "__", 2) != 0) && (!methods_only || func)) {
            lua_pushlstring(L, prefix, plen);
            lua_pushvalue(L, -3);
            lua_pushstring(L, func ? "(" : "");
            lua_concat(L, 3);
            lua_pushboolean(L, 1);
            lua_rawset(L, res);
        }
        lua_pop(L, 1);
    }
}

/* Adds the fields of the value on top and what its metatable offers: the __index chain of
 * tables, the metatable's own functions (classes whose __index is a function dispatching to
 * the metatable), a __methods table, and for tensors the binding's method table. Pops it. */
static void add_members(lua_State *L, int res, const char *prefix, size_t plen, const char *part,
                        bool methods_only) {
    for (int depth = 0; depth < 16; depth++) {
        if (lua_type(L, -1) == LUA_TTABLE) add_keys(L, res, prefix, plen, part, methods_only);
        if (!lua_getmetatable(L, -1)) break;
        lua_remove(L, -2);
        lua_pushliteral(L, "__index");
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_remove(L, -2);
            continue; /* follow the __index table */
        }
        lua_pop(L, 1);
        add_keys(L, res, prefix, plen, part, true);
        lua_pushliteral(L, "__methods");
        if (lua_rawget(L, -2) == LUA_TTABLE) add_keys(L, res, prefix, plen, part, methods_only);
        lua_pop(L, 1);
        lua_pushliteral(L, "__name");
        lua_rawget(L, -2);
        const char *name = lua_tostring(L, -1);
        bool tensor = name && strcmp(name, MLL_TENSOR_MT) == 0;
        lua_pop(L, 1);
        if (tensor) {
            mlL_tensor_methods(L);
            add_keys(L, res, prefix, plen, part, methods_only);
            lua_pop(L, 1);
        }
        break;
    }
    lua_pop(L, 1);
}

/* The last '.' or ':' in s, or NULL. */
static const char *last_sep(const char *s) {
    const char *sep = NULL;
    for (; *s; s++)
        if (*s == '.' || *s == ':') sep = s;
    return sep;
}

/* Pushes the REPL's environment (its kept locals, then the globals through __index), or the
 * globals when there is none. */
static void push_env(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, "mechlab.repl_env") != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_pushglobaltable(L);
    }
}

/* Replaces the value on top with the value of the path "a.b.c" (len bytes) from the REPL's
 * environment, or nil. Runs no code (safe_field). */
static void push_path(lua_State *L, const char *p, size_t len) {
    const char *end = p + len;
    push_env(L);
    while (p <= end && !lua_isnil(L, -1)) {
        const char *e = memchr(p, '.', (size_t)(end - p));
        if (!e) e = end;
        if (!is_ident(p, (size_t)(e - p))) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
        safe_field(L, p, (size_t)(e - p));
        p = e + 1;
    }
}

/* Protected: the string keys of the table at path index 1 that start with index 2 (inside
 * `t["...`: cache and hook names), as a set table. */
static int collect_string_keys(lua_State *L) {
    size_t plen, tlen;
    const char *path = lua_tolstring(L, 1, &plen), *text = lua_tolstring(L, 2, &tlen);
    lua_newtable(L);
    int res = lua_gettop(L);
    push_path(L, path, plen);
    if (lua_type(L, -1) != LUA_TTABLE) return 1;
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        size_t klen;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &klen) : NULL;
        if (k && klen >= tlen && memcmp(k, text, tlen) == 0) {
            lua_pushvalue(L, -1);
            lua_pushboolean(L, 1);
            lua_rawset(L, res);
        }
    }
    lua_settop(L, res);
    return 1;
}

/* Protected: collects the completions of the word at index 1 into a set table (returned).
 * "a.b.c" completes fields of a.b, "a.b:c" methods of a.b, a bare word globals and keywords. */
static int collect_completions(lua_State *L) {
    static const char *const keywords[] = {
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
        "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"};
    const char *text = lua_tostring(L, 1);
    lua_newtable(L);
    int res = lua_gettop(L);
    const char *sep = last_sep(text);
    if (!sep) {
        push_env(L);
        add_members(L, res, "", 0, text, false);
        for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
            if (strncmp(keywords[i], text, strlen(text)) != 0) continue;
            lua_pushboolean(L, 1);
            lua_setfield(L, res, keywords[i]);
        }
        return 1;
    }
    /* "a:b.c" is not a path, and ".x" follows something we cannot see, like "f()" */
    if (sep == text || memchr(text, ':', (size_t)(sep - text))) return 1;
    push_path(L, text, (size_t)(sep - text));
    if (lua_isnil(L, -1)) return 1;
    add_members(L, res, text, (size_t)(sep - text + 1), sep + 1, *sep == ':');
    lua_settop(L, res);
    return 1;
}

static char *next_completion(const char *text, int state) {
    (void)text;
    if (state == 0) g_next_cand = 0;
    return g_next_cand < g_ncands ? strdup(g_cands[g_next_cand++]) : NULL;
}

/* Inside a string key, `path["text` or `path['text`: the length of path (its start in *from),
 * else -1. */
static int string_key_path(const char *line, int start, int *from) {
    if (start < 2 || (line[start - 1] != '"' && line[start - 1] != '\'') || line[start - 2] != '[') return -1;
    int b = start - 2;
    while (b > 0 && (is_ident(line + b - 1, 1) || (line[b - 1] >= '0' && line[b - 1] <= '9') || line[b - 1] == '.')) b--;
    *from = b;
    return start - 2 - b;
}

const char mh_word_breaks[] = " \t\n\"\\'`><=;+-*/%^~#&|,{}()[]";

int mh_completions(lua_State *L, const char *line, int start, const char *text) {
    int from, plen = string_key_path(line, start, &from);
    if (plen > 0) {
        lua_pushcfunction(L, collect_string_keys);
        lua_pushlstring(L, line + from, (size_t)plen);
        lua_pushstring(L, text);
    } else {
        lua_pushcfunction(L, collect_completions);
        lua_pushstring(L, text);
    }
    lua_newtable(L);
    int out = lua_gettop(L) - (plen > 0 ? 3 : 2);
    lua_insert(L, out); /* the result list below the call */
    if (lua_pcall(L, plen > 0 ? 2 : 1, 1, 0) != LUA_OK) {
        lua_pop(L, 1);
        return plen > 0;
    }
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, out, ++n);
    }
    lua_pop(L, 1);
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_remove(L, -2);
    lua_pushvalue(L, out);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1);
    if (plen > 0 && n == 1) { /* the one key: close its quote and the bracket */
        lua_rawgeti(L, out, 1);
        lua_pushfstring(L, "%s%c]", lua_tostring(L, -1), line[start - 1]);
        lua_rawseti(L, out, 1);
        lua_pop(L, 1);
    }
    return plen > 0;
}

void mh_lookup_path(lua_State *L, const char *path, size_t len) { push_path(L, path, len); }

static char **complete(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_append_character = '\0';
    free_cands();
    lua_State *L = g_state;
    int top = lua_gettop(L);
    bool key = mh_completions(L, rl_line_buffer, start, text);
    size_t n = lua_rawlen(L, -1);
    g_cands = calloc(n ? n : 1, sizeof *g_cands);
    for (size_t i = 1; g_cands && i <= n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        char *s = strdup(lua_tostring(L, -1));
        if (s) g_cands[g_ncands++] = s;
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    if (key && g_ncands == 1) rl_completion_suppress_append = 1;
    const char *sep = last_sep(text);
    g_cand_prefix = sep ? (size_t)(sep - text + 1) : 0; /* for display_matches */
    if (g_ncands == 0) return NULL;
    return rl_completion_matches(text, next_completion);
}

/* Lists candidates by their last component ("plot" rather than "mech.plot"). */
static void display_matches(char **matches, int n, int maxlen) {
    char **shown = malloc((size_t)(n + 2) * sizeof *shown);
    if (!shown) return;
    int width = 0;
    shown[0] = matches[0];
    for (int i = 1; i <= n; i++) {
        size_t len = strlen(matches[i]);
        shown[i] = matches[i] + (len >= g_cand_prefix ? g_cand_prefix : len);
        if ((int)strlen(shown[i]) > width) width = (int)strlen(shown[i]);
    }
    shown[n + 1] = NULL;
    (void)maxlen;
    rl_display_match_list(shown, n, width);
    free(shown);
    rl_forced_update_display();
}


void mh_complete_start(lua_State *L) {
    g_state = L;
    rl_attempted_completion_function = complete;
    rl_completion_display_matches_hook = display_matches;
    rl_completer_word_break_characters = mh_word_breaks;
    rl_basic_quote_characters = ""; /* else readline closes a key's quote itself, before our ']' */
}

void mh_complete_end(void) {
    free_cands();
    g_state = NULL;
}
