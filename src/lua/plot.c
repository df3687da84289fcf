/* mech.plot: heatmap, lines, scatter, box and bar figures from Lua tables or tensors.
 *
 *   mech.plot.heatmap{data = M, xlabels = {...}, ylabels = {...}, cmap = "RdBu", center = 0,
 *                     values = true, title = ..., out = "fig.png"}
 *   mech.plot.lines{series = {{label = "attention", x = {...}, y = {...}}, ...}, logx = 2,
 *                   out = "acc.png"}            -- or facets = {{title = ..., series = {...}}, ...}
 *   mech.plot.scatter{...}                      -- as lines
 *   mech.plot.box{groups = {{label = "attention", values = {...}}, ...}, hlines = {0, 1}, ...}
 *                                               -- categories = {keys}: the x order of the groups
 *   mech.plot.bar{categories = {...}, series = {{label = ..., values = {...}}, ...}, ...}
 *
 *   mech.plot.heatmap{..., filter = {values = den, min = 0.01, note = ...}}  -- or mask = booleans
 *
 * Each returns the output path; its extension (.png, .svg, .pdf) picks the format, and a CSV of
 * the data is written beside it (both or neither). C buffers live in userdata
 * anchored in a table on the stack, so a Lua error anywhere frees everything. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua/binding.h"
#include "plot/color.h"
#include "plot/plot.h"

typedef struct {
    lua_State *L;
    int anchor; /* stack index of the table keeping buffers and strings alive */
    int n;
    const char *fn;
} ctx;

static void *buf(ctx *c, size_t n) {
    void *p = lua_newuserdatauv(c->L, n ? n : 1, 0);
    lua_rawseti(c->L, c->anchor, ++c->n);
    return p;
}

static const char *got(lua_State *L, int idx) {
    ml_tensor *t = mlL_testtensor(L, idx);
    if (t) {
        char s[ML_SHAPE_STR];
        return lua_pushfstring(L, "a tensor of shape %s", ml_shape_str(s, t->ndim, t->shape));
    }
    return luaL_typename(L, idx);
}

/* A tensor at idx (erroring on a closed one), or NULL. */
static ml_tensor *tensor_at(ctx *c, int idx, const char *field) {
    if (!luaL_testudata(c->L, idx, MLL_TENSOR_MT)) return NULL;
    ml_tensor *t = mlL_testtensor(c->L, idx);
    if (!t) mlL_error(c->L, c->fn, "argument 1 option '%s' is a tensor that was closed", field);
    return t;
}

/* The value at idx as a vector of numbers (table or 1-D tensor); *n gets its length. With
 * `bools`, table entries may also be booleans (1 and 0). */
static double *vector_of(ctx *c, int idx, const char *field, int *n, int bools) {
    lua_State *L = c->L;
    idx = lua_absindex(L, idx);
    ml_tensor *t = tensor_at(c, idx, field);
    if (t) {
        if (t->ndim != 1 || t->shape[0] > 10000000)
            mlL_error(L, c->fn, "argument 1 option '%s': expected a vector (table of numbers or 1-D tensor), got %s", field, got(L, idx));
        *n = (int)t->shape[0];
        double *v = buf(c, sizeof(double) * (size_t)*n);
        for (int i = 0; i < *n; i++) v[i] = ml_get_flat(t, i);
        return v;
    }
    if (!lua_istable(L, idx))
        mlL_error(L, c->fn, "argument 1 option '%s': expected a vector (table of numbers or 1-D tensor), got %s", field, got(L, idx));
    lua_Integer len = luaL_len(L, idx);
    if (len > 10000000) mlL_error(L, c->fn, "argument 1 option '%s' is too long", field);
    *n = (int)len;
    double *v = buf(c, sizeof(double) * (size_t)*n);
    for (int i = 0; i < *n; i++) {
        lua_geti(L, idx, i + 1);
        if (bools && lua_isboolean(L, -1)) v[i] = lua_toboolean(L, -1);
        else if (lua_type(L, -1) == LUA_TNUMBER) v[i] = lua_tonumber(L, -1);
        else mlL_error(L, c->fn, "argument 1 option '%s' entry %d expected a number%s, got %s", field, i + 1, bools ? " or boolean" : "", got(L, -1));
        lua_pop(L, 1);
    }
    return v;
}

static double *vector_at(ctx *c, int idx, const char *field, int *n) { return vector_of(c, idx, field, n, 0); }

static double *opt_vector(ctx *c, int t, const char *field, int *n) {
    lua_getfield(c->L, t, field); /* by hand, once: a list or a tensor */
    double *v = NULL;
    *n = 0;
    if (!lua_isnil(c->L, -1)) v = vector_at(c, -1, field, n);
    lua_pop(c->L, 1);
    return v;
}

/* Labels: a table of strings or numbers (numbers are formatted as Lua does). */
static const char **labels_at(ctx *c, int t, const char *field, int *n) {
    lua_State *L = c->L;
    lua_getfield(L, t, field); /* by hand, once: a list */
    *n = -1;
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    if (!lua_istable(L, -1) || mlL_testtensor(L, -1))
        mlL_error(L, c->fn, "argument 1 option '%s': expected a table of strings, got %s", field, got(L, -1));
    int len = (int)luaL_len(L, -1);
    const char **v = buf(c, sizeof(char *) * (size_t)(len + 1));
    for (int i = 0; i < len; i++) {
        lua_geti(L, -1, i + 1);
        int ty = lua_type(L, -1);
        if (ty != LUA_TSTRING && ty != LUA_TNUMBER)
            mlL_error(L, c->fn, "argument 1 option '%s' entry %d expected a string, got %s", field, i + 1, got(L, -1));
        luaL_tolstring(L, -1, NULL);           /* a fresh string, anchored below */
        v[i] = lua_tostring(L, -1);
        lua_rawseti(L, c->anchor, ++c->n);
        lua_pop(L, 1);
    }
    v[len] = NULL;
    lua_pop(L, 1);
    *n = len;
    return v;
}

static void lim_field(ctx *c, int t, const char *key, double lim[2]) {
    int n;
    double *v = opt_vector(c, t, key, &n);
    if (!v) return;
    if (n != 2) mlL_error(c->L, c->fn, "argument 1 option '%s': expected {lo, hi}, got %d numbers", key, n);
    lim[0] = v[0], lim[1] = v[1];
}

static const char *const series_keys[] = {"label", "key", "x", "y", "values", "marker", "dashed", "color", "path", "highlight", "alpha", "tags", NULL};
static const mlL_option series_opts[] = {
    MLL_OPTION(MLL_STR, "label", pl_series, label), MLL_OPTION(MLL_STR, "key", pl_series, key),
    {"marker", MLL_ENUM, offsetof(pl_series, marker), 0, 0, pl_marker_names, NULL},
    MLL_OPTION(MLL_STR, "color", pl_series, color), MLL_OPTION(MLL_BOOL, "dashed", pl_series, dashed),
    MLL_OPTION(MLL_BOOL, "path", pl_series, path),  MLL_OPTION(MLL_NUM, "alpha", pl_series, alpha),
    MLL_OPTION(MLL_BOOL, "highlight", pl_series, highlight),
    {NULL}};

/* One series table at the top of the stack. */
static void read_series(ctx *c, pl_kind kind, pl_series *se, int j) {
    lua_State *L = c->L;
    int t = lua_gettop(L);
    char where[48];
    snprintf(where, sizeof where, "series %d", j + 1);
    if (!lua_istable(L, t) || mlL_testtensor(L, t))
        mlL_error(L, c->fn, "each series must be a table like {label = ..., %s}, series %d is %s",
                   kind == PL_BOX || kind == PL_BAR ? "values = {...}" : "x = {...}, y = {...}", j + 1, got(L, t));
    mlL_checkkeys_at(L, t, c->fn, 1, where, series_keys);
    memset(se, 0, sizeof *se);
    se->marker = PL_MARKER_AUTO;
    mlL_options_at(L, t, c->fn, 1, where, series_opts, se);
    if (se->path && kind != PL_SCATTER) mlL_error(L, c->fn, "series field 'path' belongs to mech.plot.scatter");
    if (se->highlight && kind != PL_SCATTER) mlL_error(L, c->fn, "series field 'highlight' belongs to mech.plot.scatter");
    int nx = 0, ny = 0, nt = 0; /* the vectors by hand, once each: lists or tensors */
    se->tag = opt_vector(c, t, "tags", &nt);
    if (se->tag && kind != PL_BOX) mlL_error(L, c->fn, "series field 'tags' belongs to mech.plot.box");
    if (kind == PL_BOX || kind == PL_BAR) {
        se->y = opt_vector(c, t, "values", &ny);
        if (!se->y) mlL_error(L, c->fn, "series %d has no 'values'", j + 1);
        se->n = ny;
        if (se->tag && nt != ny) mlL_error(L, c->fn, "group %d has %d values and %d tags", j + 1, ny, nt);
        return;
    }
    se->y = opt_vector(c, t, "y", &ny);
    if (!se->y) mlL_error(L, c->fn, "series %d has no 'y'", j + 1);
    se->x = opt_vector(c, t, "x", &nx);
    if (!se->x) { /* y alone: x = 1..n */
        double *x = buf(c, sizeof(double) * (size_t)ny);
        for (int i = 0; i < ny; i++) x[i] = i + 1;
        se->x = x, nx = ny;
    }
    if (nx != ny) mlL_error(L, c->fn, "series %d has %d x values and %d y values", j + 1, nx, ny);
    se->n = ny;
}

/* The list of series at the top of the stack (popped), the value of `field`. */
static pl_series *read_list(ctx *c, pl_kind kind, const char *field, int *n) {
    lua_State *L = c->L;
    if (!lua_istable(L, -1) || mlL_testtensor(L, -1))
        mlL_error(L, c->fn, "argument 1 option '%s': expected a list of series tables, got %s", field, got(L, -1));
    *n = (int)luaL_len(L, -1);
    if (*n > 256) mlL_error(L, c->fn, "argument 1 option '%s' has %d entries, at most 256", field, *n);
    pl_series *se = buf(c, sizeof *se * (size_t)*n);
    for (int j = 0; j < *n; j++) {
        lua_geti(L, -1, j + 1);
        read_series(c, kind, &se[j], j);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return se;
}

static const char *const fig_keys[] = {"series", "groups", "facets", "categories", "title", "xlabel", "ylabel",
                                       "legend", "legend_title", "width", "height", "scale", "ncol", "free_y", "logx",
                                       "xlim", "ylim", "xticks", "yticks", "hlines", "palette", "alpha", "line_width",
                                       "marker_size", "markers", "jitter", "seed", "dodge", "caption", "tag_title", "out", NULL};
static const char *const legend_names[] = {"auto", "right", "bottom", "none", NULL}; /* pl_legend_pos */
/* Read before 'logx' and the vectors; the defaults are pl_plot_init's. */
static const mlL_option fig_opts[] = {
    MLL_OPTION(MLL_STR, "out", pl_plot, out),
    MLL_OPTION(MLL_STR, "title", pl_plot, title),          MLL_OPTION(MLL_STR, "xlabel", pl_plot, xlabel),
    MLL_OPTION(MLL_STR, "ylabel", pl_plot, ylabel),        MLL_OPTION(MLL_STR, "legend_title", pl_plot, legend_title),
    MLL_OPTION(MLL_STR, "palette", pl_plot, palette),      MLL_OPTION(MLL_NUM, "width", pl_plot, width),
    MLL_OPTION(MLL_NUM, "height", pl_plot, height),        MLL_OPTION(MLL_NUM, "scale", pl_plot, scale),
    MLL_OPTION(MLL_INT32, "ncol", pl_plot, ncol),          MLL_OPTION(MLL_BOOL, "free_y", pl_plot, free_y),
    MLL_OPTION(MLL_NUM, "alpha", pl_plot, alpha),          MLL_OPTION(MLL_NUM, "line_width", pl_plot, line_width),
    MLL_OPTION(MLL_NUM, "marker_size", pl_plot, marker_size), MLL_OPTION(MLL_BOOL, "markers", pl_plot, markers),
    MLL_OPTION(MLL_NUM, "jitter", pl_plot, jitter),
    {"seed", MLL_INT32, offsetof(pl_plot, jitter_seed), 0, INT32_MAX, NULL, "a non-negative integer"},
    MLL_OPTION(MLL_NUM, "dodge", pl_plot, dodge),          MLL_OPTION(MLL_STR, "caption", pl_plot, caption),
    MLL_OPTION(MLL_STR, "tag_title", pl_plot, tag_title),
    {"legend", MLL_ENUM, offsetof(pl_plot, legend), 0, 0, legend_names, "'right', 'bottom' or 'none'"},
    {NULL}};

/* The figure's panels: the one list (`series` or `groups`) or the facets, each {title =, list =};
 * *np gets their number. Each read by hand, once: lists of tables. */
static pl_panel *read_panels(ctx *c, pl_kind kind, const char *list, int *np) {
    lua_State *L = c->L;
    const char *fn = c->fn;
    int has_facets = lua_getfield(L, 1, "facets") != LUA_TNIL, has_list = lua_getfield(L, 1, list) != LUA_TNIL;
    if (has_facets == has_list) mlL_error(L, fn, "give either '%s' or 'facets' (a list of {title = ..., %s = ...})", list, list);
    pl_panel *pan;
    if (has_list) {
        pan = buf(c, sizeof *pan);
        pan->title = NULL, pan->blank = 0;
        pan->series = read_list(c, kind, list, &pan->nseries);
        lua_pop(L, 1); /* the nil facets */
    } else {
        lua_pop(L, 1); /* the nil list */
        if (!lua_istable(L, -1)) mlL_error(L, fn, "argument 1 option \'facets\': expected a list of tables, got %s", got(L, -1));
        *np = (int)luaL_len(L, -1);
        if (*np < 1 || *np > PL_MAXPANELS) mlL_error(L, fn, "field 'facets' must have 1 to %d entries, got %d", PL_MAXPANELS, *np);
        pan = buf(c, sizeof *pan * (size_t)*np);
        const char *const facet_keys[] = {"title", list, "blank", NULL};
        static const mlL_option facet_opts[] = {MLL_OPTION(MLL_STR, "title", pl_panel, title),
                                                MLL_OPTION(MLL_BOOL, "blank", pl_panel, blank), {NULL}};
        for (int i = 0; i < *np; i++) {
            lua_geti(L, -1, i + 1);
            int t = lua_gettop(L);
            if (!lua_istable(L, t)) mlL_error(L, fn, "facet %d expected a table {title = ..., %s = ...}, got %s", i + 1, list, got(L, t));
            char where[32];
            snprintf(where, sizeof where, "facet %d", i + 1);
            mlL_checkkeys_at(L, t, fn, 1, where, facet_keys);
            pan[i] = (pl_panel){0};
            mlL_options_at(L, t, fn, 1, where, facet_opts, &pan[i]);
            bool has = lua_getfield(L, t, list) != LUA_TNIL; /* by hand, once: a list of tables */
            if (pan[i].blank && has) mlL_error(L, fn, "facet %d is blank and cannot have '%s'", i + 1, list);
            if (!pan[i].blank) pan[i].series = read_list(c, kind, list, &pan[i].nseries); /* an empty slot of the grid: no data */
            lua_settop(L, t - 1);
        }
        lua_pop(L, 1);
    }
    return pan;
}

/* Checks the figure's table (argument 1) against `keys` and puts the anchor table at index 2. */
static ctx open_args(lua_State *L, const char *fn, const char *const *keys) {
    mlL_checktable(L, 1, fn, 1);
    lua_settop(L, 1);
    lua_newtable(L);
    mlL_checkkeys(L, 1, fn, keys);
    return (ctx){L, 2, 0, fn};
}

static int figure(lua_State *L, pl_kind kind, const char *fn) {
    ctx c = open_args(L, fn, fig_keys);
    const char *list = kind == PL_BOX ? "groups" : "series";
    /* misuse of the other kinds' field names gets a pointed message (a key this kind never reads) */
    lua_getfield(L, 1, kind == PL_BOX ? "series" : "groups");
    if (!lua_isnil(L, -1)) mlL_error(L, fn, "use '%s' (not '%s') for the data", list, kind == PL_BOX ? "series" : "groups");
    lua_pop(L, 1);

    pl_plot p;
    pl_plot_init(&p);
    mlL_options(L, 1, fn, fig_opts, &p);
    if (!p.out) mlL_error(L, fn, "field 'out' (the PNG path) is required");
    lua_getfield(L, 1, "logx"); /* by hand, once: true or a number */
    if (lua_isboolean(L, -1)) p.logx = lua_toboolean(L, -1) ? 10 : 0;
    else if (lua_type(L, -1) == LUA_TNUMBER) p.logx = lua_tonumber(L, -1);
    else if (!lua_isnil(L, -1)) mlL_error(L, fn, "argument 1 option \'logx\': expected true or a base such as 2, got %s", got(L, -1));
    lua_pop(L, 1);
    lim_field(&c, 1, "xlim", p.xlim);
    lim_field(&c, 1, "ylim", p.ylim);
    p.xticks = opt_vector(&c, 1, "xticks", &p.nxticks);
    p.yticks = opt_vector(&c, 1, "yticks", &p.nyticks);
    p.hlines = opt_vector(&c, 1, "hlines", &p.nhlines);
    int ncat = 0;
    p.categories = labels_at(&c, 1, "categories", &ncat);
    if (kind == PL_BAR && !p.categories) mlL_error(L, fn, "field 'categories' (names along x) is required");
    if (kind != PL_BAR && kind != PL_BOX && p.categories)
        mlL_error(L, fn, "field 'categories' belongs to mech.plot.bar and mech.plot.box");
    p.ncat = ncat;

    int np = 1;
    pl_panel *pan = read_panels(&c, kind, list, &np);
    if (pl_figure(kind, &p, np, pan)) {
        const char *msg = ml_last_error();
        luaL_error(L, "mech.%s", msg); /* the core names "plot.lines: ..." */
    }
    lua_pushstring(L, p.out);
    return 1;
}

static int l_lines(lua_State *L) { return figure(L, PL_LINES, "mech.plot.lines"); }
static int l_scatter(lua_State *L) { return figure(L, PL_SCATTER, "mech.plot.scatter"); }
static int l_box(lua_State *L) { return figure(L, PL_BOX, "mech.plot.box"); }
static int l_bar(lua_State *L) { return figure(L, PL_BAR, "mech.plot.bar"); }

/* The value at idx as a matrix: a 2-D tensor or a table of equal-length rows (of numbers, or
 * with `bools` also booleans); row-major, *rows x *cols. */
static double *matrix_at(ctx *c, int idx, const char *field, int *rows, int *cols, int bools) {
    lua_State *L = c->L;
    const char *fn = c->fn, *want = "a matrix (table of equal-length rows or a 2-D tensor)";
    ml_tensor *t = tensor_at(c, idx, field);
    double *data = NULL;
    if (t) {
        if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[0] > 4096 || t->shape[1] > 4096)
            mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got %s", field, want, got(L, idx));
        *rows = (int)t->shape[0], *cols = (int)t->shape[1];
        data = buf(c, sizeof(double) * (size_t)*rows * (size_t)*cols);
        for (long i = 0; i < (long)*rows * *cols; i++) data[i] = ml_get_flat(t, i);
    } else if (lua_istable(L, idx)) {
        lua_Integer nr = luaL_len(L, idx);
        if (nr < 1 || nr > 4096) mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got a table of %d rows", field, want, (int)nr);
        *rows = (int)nr;
        for (int r = 0; r < *rows; r++) {
            lua_geti(L, idx, r + 1);
            int n;
            char name[64];
            snprintf(name, sizeof name, "%s[%d]", field, r + 1);
            if (!lua_istable(L, -1) && !mlL_testtensor(L, -1))
                mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got row %d as %s", field, want, r + 1, got(L, -1));
            double *row = vector_of(c, -1, name, &n, bools);
            if (r == 0) {
                *cols = n;
                if (n < 1 || n > 4096) mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got a first row of %d values", field, want, n);
                data = buf(c, sizeof(double) * (size_t)*rows * (size_t)n);
            } else if (n != *cols) {
                mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got row %d with %d values (row 1 has %d)", field, want, r + 1, n, *cols);
            }
            memcpy(data + (size_t)r * (size_t)*cols, row, sizeof(double) * (size_t)n);
            lua_pop(L, 1);
        }
    } else {
        mlL_error(L, fn, "argument 1 option \'%s\': expected %s, got %s", field, want, lua_isnil(L, idx) ? "nothing" : got(L, idx));
    }
    return data;
}

/* Heatmap cells to mark: `mask` (true or nonzero = marked) or `filter = {values =, min =, note =}`
 * (marked where values <= min or NaN: the cell fails "values > min"). */
static void heatmap_mask(ctx *c, pl_heatmap_spec *h) {
    lua_State *L = c->L;
    const char *fn = c->fn;
    lua_getfield(L, 1, "mask");   /* by hand, once: a matrix */
    lua_getfield(L, 1, "filter"); /* by hand, once: a table of its own */
    int has_mask = !lua_isnil(L, -2), has_filter = !lua_isnil(L, -1);
    if (has_mask && has_filter) mlL_error(L, fn, "give 'mask' or 'filter', not both");
    if (!has_mask && !has_filter) {
        if (h->mask_note) mlL_error(L, fn, "field 'mask_note' needs a 'mask'");
        lua_pop(L, 2);
        return;
    }
    int rows, cols, m = lua_gettop(L) - (has_mask ? 1 : 0);
    double *v, min = 0;
    const char *field = has_mask ? "mask" : "filter.values";
    if (has_mask) {
        v = matrix_at(c, m, "mask", &rows, &cols, 1);
    } else {
        if (!lua_istable(L, m)) mlL_error(L, fn, "argument 1 option 'filter': expected a table {values =, min =, note =}, got %s", got(L, m));
        static const char *const keys[] = {"values", "min", "note", NULL};
        mlL_checkkeys_at(L, m, fn, 1, "option 'filter'", keys);
        /* by hand, once each: messages name them filter.values, filter.min, filter.note */
        lua_getfield(L, m, "values");
        v = matrix_at(c, lua_gettop(L), "filter.values", &rows, &cols, 0);
        lua_pop(L, 1);
        lua_getfield(L, m, "min");
        if (lua_type(L, -1) != LUA_TNUMBER) mlL_error(L, fn, "argument 1 option \'filter.min\': expected a number, got %s", got(L, -1));
        min = lua_tonumber(L, -1);
        lua_pop(L, 1);
        const char *note = mlL_optstr(L, m, "note", NULL, fn);
        if (note && h->mask_note) mlL_error(L, fn, "give the note as 'filter.note' or 'mask_note', not both");
        if (note) h->mask_note = note;
        if (!h->mask_note) {
            char b[64];
            snprintf(b, sizeof b, "fails the filter (\xe2\x89\xa4 %g)", min);
            lua_pushstring(L, b);
            h->mask_note = lua_tostring(L, -1);
            lua_rawseti(L, c->anchor, ++c->n);
        }
    }
    if (rows != h->rows || cols != h->cols)
        mlL_error(L, fn, "field '%s' is %d x %d, data is %d x %d", field, rows, cols, h->rows, h->cols);
    unsigned char *marked = buf(c, (size_t)rows * (size_t)cols);
    for (long i = 0; i < (long)rows * cols; i++) marked[i] = has_mask ? v[i] != 0 && !isnan(v[i]) : !(v[i] > min);
    h->masked = marked;
    lua_pop(L, 2);
}

static const char *const heat_keys[] = {"data", "xlabels", "ylabels", "cmap", "center", "vmin", "vmax", "values",
                                        "digits", "title", "xlabel", "ylabel", "colorbar", "cell", "scale", "out",
                                        "mask", "filter", "mask_note", NULL};
/* Read first; the defaults are pl_heatmap_init's. */
static const mlL_option heat_opts[] = {
    MLL_OPTION(MLL_STR, "out", pl_heatmap_spec, out),      MLL_OPTION(MLL_STR, "mask_note", pl_heatmap_spec, mask_note),
    MLL_OPTION(MLL_STR, "cmap", pl_heatmap_spec, cmap),    MLL_OPTION(MLL_NUM, "center", pl_heatmap_spec, center),
    MLL_OPTION(MLL_NUM, "vmin", pl_heatmap_spec, vmin),    MLL_OPTION(MLL_NUM, "vmax", pl_heatmap_spec, vmax),
    MLL_OPTION(MLL_BOOL, "values", pl_heatmap_spec, values), MLL_OPTION(MLL_INT32, "digits", pl_heatmap_spec, digits),
    MLL_OPTION(MLL_STR, "title", pl_heatmap_spec, title),  MLL_OPTION(MLL_STR, "xlabel", pl_heatmap_spec, xlabel),
    MLL_OPTION(MLL_STR, "ylabel", pl_heatmap_spec, ylabel), MLL_OPTION(MLL_NUM, "cell", pl_heatmap_spec, cell),
    MLL_OPTION(MLL_NUM, "scale", pl_heatmap_spec, scale),  {NULL}};

static int l_heatmap(lua_State *L) {
    const char *fn = "mech.plot.heatmap";
    ctx c = open_args(L, fn, heat_keys);
    pl_heatmap_spec h;
    pl_heatmap_init(&h);
    mlL_options(L, 1, fn, heat_opts, &h);
    if (!h.out) mlL_error(L, fn, "field 'out' (the .png, .svg or .pdf path) is required");

    lua_getfield(L, 1, "data"); /* by hand, once: a matrix */
    double *data = matrix_at(&c, lua_gettop(L), "data", &h.rows, &h.cols, 0);
    lua_pop(L, 1);
    h.data = data;
    int nx, ny;
    h.xlabels = labels_at(&c, 1, "xlabels", &nx);
    h.ylabels = labels_at(&c, 1, "ylabels", &ny);
    if (h.xlabels && nx != h.cols) mlL_error(L, fn, "%d xlabels for %d columns", nx, h.cols);
    if (h.ylabels && ny != h.rows) mlL_error(L, fn, "%d ylabels for %d rows", ny, h.rows);
    lua_getfield(L, 1, "colorbar"); /* by hand, once: a boolean or a label */
    if (lua_isboolean(L, -1)) h.colorbar = lua_toboolean(L, -1);
    else if (lua_type(L, -1) == LUA_TSTRING) h.cbar_label = lua_tostring(L, -1);
    else if (!lua_isnil(L, -1)) mlL_error(L, fn, "argument 1 option \'colorbar\': expected a boolean or a label string, got %s", got(L, -1));
    lua_pop(L, 1);
    heatmap_mask(&c, &h);
    if (pl_heatmap(&h)) luaL_error(L, "mech.%s", ml_last_error());
    lua_pushstring(L, h.out);
    return 1;
}

/* mech.plot.color(palette, i [, n]) -> "#rrggbb": the figures' own colour for series i (0-based) of n,
 * so that a script can keep one series' colour across figures. */
static int l_color(lua_State *L) {
    const char *fn = "mech.plot.color";
    const char *name = luaL_checkstring(L, 1);
    int pal = pl_palette_find(name);
    if (pal < 0) return mlL_error(L, fn, "argument 1 expected a palette (%s), got '%s'", pl_palette_names(), name);
    int i = mlL_checkint32(L, 2, fn);
    int n = lua_isnoneornil(L, 3) ? i + 1 : mlL_checkint32(L, 3, fn);
    if (i < 0 || n < 1 || i >= n)
        return mlL_error(L, fn, "argument 2 expected 0 <= i < n, got i = %d, n = %d", i, n);
    pl_color c = pl_palette_at(pal, i, n);
    char hex[8];
    snprintf(hex, sizeof hex, "#%02x%02x%02x", (unsigned)lroundf(c.r * 255), (unsigned)lroundf(c.g * 255),
             (unsigned)lroundf(c.b * 255));
    lua_pushstring(L, hex);
    return 1;
}

int mlL_open_plot(lua_State *L) {
    static const luaL_Reg fns[] = {{"heatmap", l_heatmap}, {"lines", l_lines}, {"scatter", l_scatter},
                                   {"box", l_box},         {"bar", l_bar},     {"color", l_color},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_setfield(L, -2, "plot");
    return 0;
}
