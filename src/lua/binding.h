/* The thin Lua binding: shared helpers. Each area has one file src/lua/<area>.c exporting
 *     int mlL_open_<area>(lua_State *L);
 * which is called with the `mech` module table on top of the stack and adds its fields to it
 * (sub-tables such as mech.plot or mech.task are created by their opener). mech.c calls the
 * openers in order. Errors: every failure becomes a Lua error whose message names the function,
 * the argument, what was expected and what came ("bad argument #1 to 'mech.zeros' (a size
 * (integer >= 0) expected, got -3)"); core failures are raised with mlL_raise(). */
#ifndef MLL_BINDING_H
#define MLL_BINDING_H

#include <stdbool.h>
#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/closest.h"
#include "core/tensor.h"
#include "optim/optim.h"

#define MLL_TENSOR_MT "mech.Tensor"
#define MLL_RNG_MT "mech.Generator" /* userdata holding an ml_rng */
#define MLL_CACHE_MT "mech.Cache"   /* metatable of run_with_cache's tables (src/lua/cache.c) */

/* Tensor userdata: a box holding one reference. */
ml_tensor *mlL_checktensor(lua_State *L, int arg, const char *fn);
ml_tensor *mlL_testtensor(lua_State *L, int arg); /* NULL if not a live tensor */
/* Pushes t as a userdata, taking over the caller's reference. If t is NULL, raises the core's
 * error instead (so `mlL_pushtensor(L, ml_op(...))` is the idiom). */
void mlL_pushtensor(lua_State *L, ml_tensor *t);
/* Converts a tensor or a (nested) table of numbers, or a number, to a tensor (new reference). */
ml_tensor *mlL_totensor(lua_State *L, int arg, const char *fn, ml_dtype dtype_if_table);

/* Index-like arguments (indices, token ids, targets, rows): an int32 tensor, or an integer or a
 * (nested) table of integers converted to one, which replaces the value at idx on the stack (the
 * pointer is borrowed and lives as long as that slot). `key` names an option ("rows") in errors;
 * NULL names idx as the argument. Anything else (a float32 tensor, 0.5 in a table) raises
 * "fn: argument N: expected an int32 tensor or a table of integers, got ...". */
ml_tensor *mlL_checkints(lua_State *L, int idx, const char *fn, const char *key);

/* Errors, in one format (docs/ARCHITECTURE.md, "Errors of the binding"). fn names the caller:
 * "mech.zeros", "mech.interp.patching_map", "tensor:narrow", "model:forward" (a method: self is
 * not counted, arg 1 is a bad self), or a bare tensor op ("sum") named "tensor:sum" when called
 * as a method and "mech.sum" otherwise. None returns. */
/* The core's last error; one that names the running call's function gets the format below. */
int mlL_raise(lua_State *L);
/* "bad argument #n to 'NAME' (<expected> expected, got <what came>)". */
int mlL_argerror(lua_State *L, const char *fn, int arg, const char *expected);
/* "bad argument #n to 'NAME' (<detail>)", the detail formatted as lua_pushfstring does. */
int mlL_argfail(lua_State *L, const char *fn, int arg, const char *fmt, ...);
/* "NAME: <message>". */
int mlL_error(lua_State *L, const char *fn, const char *fmt, ...);
/* Checked arguments (errors as mlL_argerror). mlL_optarg_int: def for none or nil. */
lua_Integer mlL_checkint(lua_State *L, int arg, const char *fn);
lua_Integer mlL_optarg_int(lua_State *L, int arg, lua_Integer def, const char *fn);
lua_Number mlL_checknum(lua_State *L, int arg, const char *fn);
const char *mlL_checkstr(lua_State *L, int arg, const char *fn);
void *mlL_checkudata(lua_State *L, int arg, const char *mt, const char *fn, const char *what);
/* A short description of the value at idx for "got ..." messages: "a float32 tensor of shape
 * [2,3]", "'text'", "nil", ... (written into buf). */
const char *mlL_describe(lua_State *L, int idx, char *buf, size_t n);
/* The message of an error object at idx, or what was raised when it is no string (a table, nil):
 * never NULL, so it can go to a %s. */
const char *mlL_error_text(lua_State *L, int idx);
/* Tells Lua's collector about memory held outside the Lua heap (tensors, models, datasets). */
void mlL_account(lua_State *L, size_t nbytes);

void mlL_checktable(lua_State *L, int idx, const char *fn, int arg);
/* Option tables: fn names the caller, idx the table's stack index, which is the argument that
 * messages name (`arg` of mlL_checktable and mlL_opttable is not used: kept for its callers). */
/* Errors on a key not in `allowed` (NULL-terminated), suggesting the closest allowed name. */
void mlL_checkkeys(lua_State *L, int idx, const char *fn, const char *const *allowed);
/* The same for a table inside argument arg: `what` ("series 2") starts the detail. */
void mlL_checkkeys_at(lua_State *L, int idx, const char *fn, int arg, const char *what, const char *const *allowed);
/* An options table as the last argument, at idx (the top is set there; `arg` is its number in
 * messages): nil becomes an empty table; anything else must be a table with keys in `allowed`. */
void mlL_opttable(lua_State *L, int idx, const char *fn, int arg, const char *const *allowed);
lua_Integer mlL_optint(lua_State *L, int idx, const char *key, lua_Integer def, const char *fn);
/* Integers that C keeps in an int: out of range is an error, never a silent wrap. */
int mlL_optint32(lua_State *L, int idx, const char *key, int def, const char *fn);
int mlL_checkint32(lua_State *L, int arg, const char *fn);
lua_Number mlL_optnum(lua_State *L, int idx, const char *key, lua_Number def, const char *fn);
int mlL_optbool(lua_State *L, int idx, const char *key, int def, const char *fn);
const char *mlL_optstr(lua_State *L, int idx, const char *key, const char *def, const char *fn);
/* s quoted for a message: 'whole' up to 80 characters, else its start, "..." and its length. */
const char *mlL_quote(const char *s, char *buf, size_t n);
/* The slot of the position named by the string at idx among task t's positions (the paper's
 * eight, then its free names: docs/tasks.md, "Position names"); anything else raises "<fn>: <what>
 * expected a position name of task '<name>' (its names), got ... (did you mean ...?)". */
struct ml_task;
int mlL_task_pos(lua_State *L, const struct ml_task *t, int idx, const char *fn, const char *what);
/* A full site name ("blocks.{l}.{name}") -> its id; an unknown one raises an error naming `fn`
 * and the closest site. */
struct ml_model;
int mlL_checksite(lua_State *L, const struct ml_model *m, const char *name, const char *fn);
/* Whether the filter at idx keeps the full site name `name`: a literal name (either spelling)
 * that equals the name or its trailing dotted part, {pattern = a Lua pattern} matched anywhere in
 * the name or its TransformerLens spelling, or a function(name). A bad pattern names fn and arg. */
bool mlL_name_filter(lua_State *L, int idx, const char *name, const char *fn, const char *arg);
/* Checks that idx holds a name filter (else an error naming fn and arg); returns idx, absolute. A
 * {pattern = ...} table is read once and replaced in its slot by a plain copy: call this first. */
int mlL_checkfilter(lua_State *L, int idx, const char *fn, const char *arg);
/* The live model at arg (src/lua/model.c), else an error naming fn. */
struct ml_model *mlL_checkmodel(lua_State *L, int arg, const char *fn);
/* The live dataset at arg (src/lua/dataset.c), else an error naming fn. */
struct ml_dataset *mlL_checkdataset(lua_State *L, int arg, const char *fn);
/* Token ids for model m at arg: an int32 tensor or a table of integers, (B, L) or one document
 * (L), each in [0, vocab). Returns a contiguous (B, L) tensor pushed on the stack (anchored). */
ml_tensor *mlL_checktokens(lua_State *L, const struct ml_model *m, int arg, const char *fn);
/* Wraps the functions table[names[i]] (argument 1: a model) so that the model's persistent hooks
 * (model:add_hook) are on for every run inside them (src/lua/model.c). Without hooks the wrapper
 * calls the C function directly, without its upvalues: a declared row (mlL_setdecls) cannot be
 * wrapped, so a hooked function stays a function. */
void mlL_hooked(lua_State *L, int table, const char *const *names);
/* Zeroed scratch memory of n bytes owned by the stack (pushed; freed by the collector even when an
 * error unwinds). */
void *mlL_scratch(lua_State *L, size_t n);
/* Adds cache.c's cache class (mlL_open_interp calls it). */
void mlL_open_cache(lua_State *L);
/* model:run_with_cache (cache.c), a method that model.c registers and hooks with the others. */
int mlL_run_with_cache(lua_State *L);
/* Adds analysis.c's model methods (mlL_open_interp calls it). */
int mlL_open_analysis(lua_State *L);
/* The model optimiser of mech.adamw (a mech.AdamW userdata, src/lua/optim.c): the one at arg, else
 * an error naming fn; and a new one holding `state` (the userdata takes its buffers over). */
ml_adamw *mlL_checkadamw(lua_State *L, int arg, const char *fn);
void mlL_pushadamw(lua_State *L, const ml_adamw *state);
/* Reads a shape from arguments first..top (numbers) or one table of numbers at `first`. */
int mlL_checkshape(lua_State *L, int first, const char *fn, int64_t shape[ML_MAX_DIMS]);

/* Pushes the table of Tensor methods (t:foo(...) looks names up there first); areas add
 * their methods to it. Metamethods (__add, ...) go in the metatable: luaL_getmetatable(L,
 * MLL_TENSOR_MT). */
void mlL_tensor_methods(lua_State *L);

/* A userdata class: the metatable named mt (registered), with `methods` as its __index and
 * `metamethods` (__gc, __close, __tostring, __len, ...) in it. Both lists end with {NULL, NULL}. */
void mlL_new_class(lua_State *L, const char *mt, const luaL_Reg *methods, const luaL_Reg *metamethods);

/* Area openers, called by luaopen_mech in this order. */
int mlL_open_tensor(lua_State *L); /* src/lua/tensor.c: userdata, constructors, indexing */
/* Called by mlL_open_tensor with the mech table on top: src/lua/autograd.c (t:backward,
 * t:requires_grad_, mech.no_grad, grad_enabled, gradcheck) and src/lua/print.c (__tostring,
 * mech.set_printoptions, get_printoptions). */
void mlL_open_autograd(lua_State *L);
void mlL_open_print(lua_State *L);
int mlL_open_ops(lua_State *L);    /* src/lua/ops.c: a method and a mech.* function per op */
int mlL_open_model(lua_State *L);  /* src/lua/model.c: models, hooks, optimiser, checkpoints */
int mlL_open_sys(lua_State *L);    /* src/lua/sys.c: mech.sys (clock, tty, files, metrics CSV) */
int mlL_open_task(lua_State *L);   /* src/lua/task.c: mech.task (tasks; dataset.c, doc.c, task_custom.c) */
/* Sets meta.task (the table at meta_idx) to the task the checkpoint at path records, if any; a record
 * that cannot be rebuilt (a Lua task's module missing or not allowed) sets meta.task_error instead
 * (src/lua/task.c). modules_idx: the list of modules the caller allowed (0: none; docs/security.md). */
void mlL_meta_task(lua_State *L, int meta_idx, const char *path, int modules_idx);
int mlL_open_interp(lua_State *L); /* src/lua/interp.c: mech.interp, and cache.c's run_with_cache/_hooks */
int mlL_open_plot(lua_State *L);   /* src/lua/plot.c: mech.plot (figures to PNG + CSV) */
int mlL_open_io(lua_State *L);     /* src/lua/io.c: mech.save_tensors / load_tensors, cache:save */
int mlL_open_optim(lua_State *L);  /* src/lua/optim.c: mech.optim (AdamW, SGD, clip_grad_norm) */
int mlL_open_mixer(lua_State *L);  /* src/lua/mixer.c: mech.register_mixer (mixers written in Lua) */
int mlL_open_nn(lua_State *L);     /* src/lua/nn.c: mech.nn (lua/mech/nn/, loaded on first use) */
/* Pushes the metadata of an open safetensors file as a table {key = value} (src/lua/model.c). */
struct ml_safetensors;
void mlL_push_meta(lua_State *L, const struct ml_safetensors *f);
/* cache:save(path) (src/lua/io.c), a method of mech.Cache. */
int mlL_cache_save(lua_State *L);

int luaopen_mech(lua_State *L);

/* ---- slimtensor: the generic option reader ----
 * One row per option of a C struct: key, type, offset of the field, an optional range and enum
 * names. mlL_options reads every row's key from the table at idx into `out`; an absent (nil) key
 * leaves its field as it was, so the caller (or the core's *_init) sets the defaults first.
 * Errors read "bad argument #idx to 'fn' (option 'k': expected X, got Y)": a wrong type as
 * mlL_optint32 & co. say it; a value out of [min, max] (checked before an integer's int32 range)
 * or not among `names` with X = `expected`, or when that is NULL "an integer in [min, max]" ("a
 * number" for MLL_NUM/MLL_FLOAT) or "one of 'a', 'b'", and Y the value as read.
 * Unknown keys are the caller's check (mlL_checkkeys / mlL_opttable): tables often hold more. */
typedef enum {
    MLL_INT,   /* int64_t (or uint64_t: a seed) */
    MLL_INT32, /* int, and out of int32 range is an error */
    MLL_NUM,   /* double */
    MLL_FLOAT, /* float */
    MLL_BOOL,  /* int, 0 or 1 */
    MLL_CBOOL, /* bool */
    MLL_STR,   /* const char *, borrowed from the option table */
    MLL_ENUM,  /* int: the index of the string in `names` */
} mlL_opt_type;
typedef struct {
    const char *key;
    mlL_opt_type type;
    size_t offset;            /* offsetof(the struct, the field) */
    double min, max;          /* numbers: checked when min < max (both inclusive) */
    const char *const *names; /* MLL_ENUM: NULL-terminated */
    const char *expected;     /* range or enum failure: what was expected, or NULL for the generic text */
} mlL_option;
/* A row without a range: MLL_OPTION(MLL_NUM, "width", pl_plot, width). */
#define MLL_OPTION(type, key, T, field) {key, type, offsetof(T, field), 0, 0, NULL, NULL}
/* Reads the rows of spec (ended by a row whose key is NULL) from the table at idx into out. */
void mlL_options(lua_State *L, int idx, const char *fn, const mlL_option *spec, void *out);
/* The same for a table nested in argument arg (a plot's series): messages read "bad argument
 * #arg to 'fn' (<what>: option 'k': expected X, got Y)", what such as "series 2". */
void mlL_options_at(lua_State *L, int idx, const char *fn, int arg, const char *what, const mlL_option *spec, void *out);
/* The same error for an option read by hand (a list, an object, a function), for the value on top:
 * "bad argument #idx to 'fn' (option 'key': expected <expected>, got <the value>)". */
int mlL_opterror(lua_State *L, const char *fn, int idx, const char *key, const char *expected);

/* ---- sliminterp: functions written in the Lua library, reached from C tables */

/* Pushes a C function that calls require(module)[name] with its arguments and returns its
 * results, for presentation and plumbing that Lua says shorter (__tostring, figures, help). First
 * it checks argument 1, naming fn: MLL_CHECK_TABLE a table (then the only argument passed),
 * MLL_CHECK_MODEL a live mech.Model; MLL_CHECK_NONE nothing. */
enum { MLL_CHECK_NONE, MLL_CHECK_TABLE, MLL_CHECK_MODEL };
void mlL_pushlua(lua_State *L, const char *module, const char *name, int check, const char *fn);
/* One entry of a table of such functions: field `name` = require(module)[function or name]. */
typedef struct {
    const char *name, *module, *function;
    int check;
    const char *fn;
} mlL_LuaReg;
/* Sets table[reg.name] for each entry up to the one whose name is NULL (table: a stack index). */
void mlL_setlua(lua_State *L, int table, const mlL_LuaReg *regs);
/* A layer of m at stack index arg, else an argument error that names the model's layer count. */
int mlL_checklayer(lua_State *L, const struct ml_model *m, int arg, const char *fn);
/* What a Lua hook returned (on top of the stack, popped): nil -> NULL, a tensor -> a new reference,
 * anything else -> NULL with *err set and the core message "<who> returned <type>, expected ...". */
ml_tensor *mlL_hook_result(lua_State *L, const char *who, ml_status *err);
/* Raises the core's last error with its function name ("patching_map: ...") replaced by fn. */
int mlL_raise_as(lua_State *L, const char *fn);

/* ---- declared wrappers (src/lua/decl.c) ----
 * A simple wrapper (a core call with checked arguments and one result) is a row, not a function:
 *   {"tensor:narrow", "Tdii", 'T', MLL_FN(ml_narrow)}
 * name: the Lua name as messages give it (the key set is after its ':' or last '.'); args: one
 * kind per argument from stack index 1 (self for a method): T a tensor, C the same passed as
 * const, O an operand (a tensor, or a number or table converted to float32), o an operand or nil
 * (NULL), I int32 indices (mlL_checkints), d a dimension of argument 1 (checked; negative counts
 * from the end), D the same or nil (-1), k a C int (the core checks it), i an integer, n a
 * number, s a string, M a model, N the same passed as const, K a task (its const ml_task), A a dataset
 * (const); result: T a new tensor (NULL raises the core's error), b a boolean, i an int64_t, k a
 * C int, n a double, s a C string (copied), v nothing. A bare name ("matmul") is a tensor op, a method
 * and a mech function both (messages name it by the call). The dispatcher calls fn through the C
 * type its kinds spell; a new signature adds one line there. */
enum { MLL_DECL_MAX_ARGS = 6 };
typedef void (*mlL_fn)(void);
#define MLL_FN(f) ((mlL_fn)(f))
typedef struct {
    const char *name;
    const char *args;
    char result;
    mlL_fn fn;
} mlL_Decl;
/* Sets table[key] to a dispatcher for each row up to the one whose name is NULL. */
void mlL_setdecls(lua_State *L, int table, const mlL_Decl *rows);

#endif
