/* The task binding's shared parts (private to its four files):
 *   task.c         mech.task: constructors, presets, task objects and their methods;
 *   dataset.c      datasets and their batches;
 *   doc.c          document tables, both ways: a C document as a table, and the one reader of
 *                  tables (one document, or sample_batch's columns) back into C, checked by the
 *                  core's ml_doc_check;
 *   task_custom.c  the primitives of lua/mech/task_custom.lua (require "mech.task_c"). */
#ifndef MLL_TASK_H
#define MLL_TASK_H

#include "lua/binding.h"
#include "tasks/task.h"

#define MLL_TASK_MT "mech.Task"
#define MLL_DATASET_MT "mech.Dataset"
#define MLL_DOC_MT "mech.TaskDoc" /* a scratch ml_doc that the collector frees */

typedef struct {
    ml_task *t;
    ml_rng rng; /* task:sample() without a seed draws from here, so calls differ */
} mlL_task_box;

mlL_task_box *mlL_checktask(lua_State *L, int idx, const char *fn);
/* Pushes t as a task userdata (NULL: raises the core's error). Its one user value is the Lua
 * definition of a task made outside C (lua/mech/task_custom.lua), else nil. */
void mlL_pushtask(lua_State *L, ml_task *t);
/* Pushes an empty dataset userdata (its ds NULL until the caller sets it). */
ml_dataset **mlL_newdataset(lua_State *L);
/* Calls lua/mech/task_custom.lua's function `name` with this call's arguments; returns its results. */
int mlL_task_lib(lua_State *L, const char *name);
/* "train" (none at idx), "dev" or "test" at idx, else an argument error. */
ml_split mlL_optsplit(lua_State *L, int idx, const char *fn);
/* Pushes "a, b, c" (task t's position names) and returns it; names (ML_MAX_POS + 1 entries) gets
 * them NULL-terminated, for ml_closest. */
const char *mlL_push_pos_names(lua_State *L, const ml_task *t, const char **names);
/* Pushes the list of the first n names (n < 0: up to a NULL). */
void mlL_push_names(lua_State *L, const char *const *names, int n);
/* Pushes the list of t's position names by slot. */
int mlL_push_task_positions(lua_State *L, const ml_task *t);

/* doc.c */
ml_doc *mlL_push_scratch_doc(lua_State *L);
/* Pushes ml_doc_format's text of d, a document of task t; returns 1. */
int mlL_push_doc_text(lua_State *L, const ml_task *t, const ml_doc *d);
void mlL_push_int_array(lua_State *L, const int32_t *a, int n);
/* Pushes the document table of d; task_idx is the stack index of its task userdata. */
void mlL_push_doc(lua_State *L, int task_idx, const ml_doc *d, ml_split split);
/* task:show(doc) and mech.task.show(doc). */
int mlL_task_show(lua_State *L);
int mlL_doc_show(lua_State *L);
/* C.append and C.append_batch of mech.task_c (lua/mech/task_custom.lua). */
int mlL_doc_append(lua_State *L);
int mlL_doc_append_batch(lua_State *L);

/* The classes mech.Dataset and mech.TaskDoc, and the name codes of doc.c (mlL_open_task calls them). */
int mlL_open_dataset(lua_State *L);
void mlL_open_doc(lua_State *L);
/* The module mech.task_c (a preload of mlL_open_task). */
int mlL_open_task_c(lua_State *L);

#endif
