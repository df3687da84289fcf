/* Datasets and their batches: the mech.Dataset class (core: src/tasks/task.h). task:dataset
 * (src/lua/task.c) makes them; every index is 0-based. */
#include <limits.h>
#include <stdio.h>

#include "lua/task.h"

ml_dataset **mlL_newdataset(lua_State *L) {
    ml_dataset **ds = lua_newuserdatauv(L, sizeof *ds, 1);
    *ds = NULL;
    luaL_setmetatable(L, MLL_DATASET_MT);
    return ds;
}

ml_dataset *mlL_checkdataset(lua_State *L, int idx, const char *fn) {
    ml_dataset **ds = luaL_testudata(L, idx, MLL_DATASET_MT);
    if (!ds || !*ds) mlL_argerror(L, fn, idx, "a mech.Dataset");
    return *ds;
}

/* Pushes the task of the dataset at ds_idx, with the dataset's definition (a task made outside C). */
static int push_ds_task(lua_State *L, int ds_idx, ml_dataset *ds) {
    mlL_pushtask(L, ml_task_retain(ml_dataset_task(ds)));
    lua_getiuservalue(L, ds_idx, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static int64_t check_index(lua_State *L, const ml_dataset *ds, int idx, const char *fn) {
    int ok;
    lua_Integer i = lua_tointegerx(L, idx, &ok);
    if (!ok || i < 0 || i >= ml_dataset_size(ds)) {
        char want[96];
        snprintf(want, sizeof want, "a document index in 0..%lld", (long long)ml_dataset_size(ds) - 1);
        mlL_argerror(L, fn, idx, want);
    }
    return i;
}

/* Positions of a batch as {name = {row 1, row 2, ...}} (0-based; -1 where absent). */
static void push_batch_positions(lua_State *L, const ml_dataset *ds, const int64_t *idx, int n) {
    const ml_task *t = ml_dataset_task(ds);
    lua_createtable(L, 0, ml_dataset_npos(ds) + 1);
    for (int k = 0; k < ml_dataset_npos(ds); k++) {
        lua_createtable(L, n, 0);
        for (int b = 0; b < n; b++) {
            lua_pushinteger(L, ml_dataset_positions(ds, idx[b])[k]);
            lua_rawseti(L, -2, b + 1);
        }
        lua_setfield(L, -2, ml_task_pos_name(t, k));
    }
    lua_createtable(L, n, 0);
    for (int b = 0; b < n; b++) {
        int na;
        const int32_t *at = ml_dataset_all_targets(ds, idx[b], &na);
        mlL_push_int_array(L, at, na);
        lua_rawseti(L, -2, b + 1);
    }
    lua_setfield(L, -2, "all_target_items_orig");
}

static int push_batch(lua_State *L, const ml_dataset *ds, const int64_t *idx, int n) {
    ml_tensor *tk, *tg;
    if (ml_dataset_batch(ds, idx, n, &tk, &tg) != ML_OK) return mlL_raise(L);
    mlL_pushtensor(L, tk);
    mlL_pushtensor(L, tg);
    push_batch_positions(L, ds, idx, n);
    return 3;
}

/* Reads (first, count) at idx, idx+1 into a temporary index array (a userdata). */
static int64_t *range_indices(lua_State *L, const ml_dataset *ds, int idx, const char *fn, int *count) {
    int64_t first = check_index(L, ds, idx, fn);
    int ok;
    lua_Integer c = lua_tointegerx(L, idx + 1, &ok);
    if (!ok || c < 1 || c > ml_dataset_size(ds) - first) {
        char want[96];
        snprintf(want, sizeof want, "a count in 1..%lld", (long long)(ml_dataset_size(ds) - first));
        mlL_argerror(L, fn, idx + 1, want);
    }
    int64_t *a = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)c, 0);
    for (lua_Integer i = 0; i < c; i++) a[i] = first + i;
    *count = (int)c;
    return a;
}

/* ds:batch(first, count) -> tokens, targets, positions */
static int l_batch(lua_State *L) {
    const char *fn = "dataset:batch";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int n;
    int64_t *idx = range_indices(L, ds, 2, fn, &n);
    return push_batch(L, ds, idx, n);
}

/* ds:batch_at({i, j, ...}) -> tokens, targets, positions (0-based indices) */
static int l_batch_at(lua_State *L) {
    const char *fn = "dataset:batch_at";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    if (!lua_istable(L, 2)) return mlL_argerror(L, fn, 2, "a list of document indices");
    lua_Integer n = luaL_len(L, 2);
    if (n < 1 || n > INT_MAX) return mlL_argerror(L, fn, 2, "a non-empty list of document indices");
    int64_t *idx = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < 0 || v >= ml_dataset_size(ds))
            return mlL_argfail(L, fn, 2, "entry %I expected a document index in 0..%I, got %s", i + 1,
                                    (lua_Integer)ml_dataset_size(ds) - 1, luaL_tolstring(L, -1, NULL));
        idx[i] = v;
        lua_pop(L, 1);
    }
    return push_batch(L, ds, idx, (int)n);
}

/* A tensor of documents first .. first + count - 1 (arguments 2, 3) that the core function f makes. */
static int range_tensor(lua_State *L, const char *fn,
                        ml_status (*f)(const ml_dataset *, const int64_t *, int, ml_tensor **)) {
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int n;
    int64_t *idx = range_indices(L, ds, 2, fn, &n);
    ml_tensor *t;
    if (f(ds, idx, n, &t) != ML_OK) return mlL_raise(L);
    mlL_pushtensor(L, t);
    return 1;
}

/* ds:position_names() -> its task's positions() */
static int l_position_names(lua_State *L) {
    return mlL_push_task_positions(L, ml_dataset_task(mlL_checkdataset(L, 1, "dataset:position_names")));
}

/* ds:positions(first, count) -> int32 tensor (count, #ds:position_names()) */
static int l_positions(lua_State *L) { return range_tensor(L, "dataset:positions", ml_dataset_batch_positions); }

/* ds:target_dist(first, count) -> float32 tensor (count, V) */
static int l_target_dist(lua_State *L) { return range_tensor(L, "dataset:target_dist", ml_dataset_batch_target_dist); }

/* ds:doc(i) -> document table (0-based i) */
static int l_doc(lua_State *L) {
    const char *fn = "dataset:doc";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int64_t i = check_index(L, ds, 2, fn);
    push_ds_task(L, 1, ds);
    int task_idx = lua_gettop(L);
    ml_doc *d = mlL_push_scratch_doc(L);
    if (ml_dataset_get_doc(ds, i, d) != ML_OK) return mlL_raise(L);
    mlL_push_doc(L, task_idx, d, ml_dataset_split(ds));
    return 1;
}

/* ds:show(i) -> string */
static int l_show(lua_State *L) {
    const char *fn = "dataset:show";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int64_t i = check_index(L, ds, 2, fn);
    ml_doc *d = mlL_push_scratch_doc(L);
    if (ml_dataset_get_doc(ds, i, d) != ML_OK) return mlL_raise(L);
    return mlL_push_doc_text(L, ml_dataset_task(ds), d);
}

/* ds:stats() -> means of the per-document statistics, plus min/max of the lengths */
static int l_stats(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "dataset:stats");
    double m[ML_STAT_MEANS];
    int lo, hi;
    ml_dataset_stat_means(ds, m, &lo, &hi);
    lua_createtable(L, 0, 14);
    for (int j = 0; j < ML_STAT_MEANS; j++) lua_pushnumber(L, m[j]), lua_setfield(L, -2, ml_doc_stat_fields[j].name);
    lua_pushinteger(L, lo), lua_setfield(L, -2, "yield_len_min");
    lua_pushinteger(L, hi), lua_setfield(L, -2, "yield_len_max");
    lua_pushinteger(L, ml_dataset_size(ds)), lua_setfield(L, -2, "documents");
    return 1;
}

static int l_size(lua_State *L) {
    lua_pushinteger(L, ml_dataset_size(mlL_checkdataset(L, 1, "dataset:size")));
    return 1;
}

static int l_task(lua_State *L) { return push_ds_task(L, 1, mlL_checkdataset(L, 1, "dataset:task")); }

static int l_split(lua_State *L) {
    lua_pushstring(L, ml_split_name(ml_dataset_split(mlL_checkdataset(L, 1, "dataset:split"))));
    return 1;
}

static int l_max_len(lua_State *L) {
    lua_pushinteger(L, ml_dataset_max_len(mlL_checkdataset(L, 1, "dataset:max_len")));
    return 1;
}

static int l_tostring(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "tostring");
    lua_pushfstring(L, "mech.Dataset(%s, %s, %I documents)", ml_task_name(ml_dataset_task(ds)),
                    ml_split_name(ml_dataset_split(ds)), (lua_Integer)ml_dataset_size(ds));
    return 1;
}

static int l_gc(lua_State *L) {
    ml_dataset **ds = luaL_checkudata(L, 1, MLL_DATASET_MT);
    ml_dataset_free(*ds);
    *ds = NULL;
    return 0;
}

int mlL_open_dataset(lua_State *L) {
    static const luaL_Reg methods[] = {{"batch", l_batch},         {"batch_at", l_batch_at},
                                       {"positions", l_positions}, {"position_names", l_position_names},
                                       {"target_dist", l_target_dist}, {"doc", l_doc},
                                       {"show", l_show},           {"stats", l_stats},
                                       {"size", l_size},           {"task", l_task},
                                       {"split", l_split},         {"max_len", l_max_len},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_gc}, {"__tostring", l_tostring}, {"__len", l_size}, {NULL, NULL}};
    mlL_new_class(L, MLL_DATASET_MT, methods, meta);
    static const mlL_LuaReg in_lua[] = {{"write_jsonl", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL}, {NULL, NULL, NULL, 0, NULL}};
    luaL_getmetatable(L, MLL_DATASET_MT);
    lua_getfield(L, -1, "__index");
    mlL_setlua(L, -1, in_lua);
    lua_pop(L, 2);
    return 0;
}
