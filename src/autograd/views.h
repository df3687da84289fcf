/* Views and copies with autograd's rules: they check their arguments (errors name the Lua
 * function), build on core's raw views (core/tensor.h), and record a node when grad mode is on
 * and the input needs grad. In-place writes are refused on leaves that require grad while grad
 * mode is on, as PyTorch does; they are not recorded. */
#ifndef ML_VIEWS_H
#define ML_VIEWS_H

#include "core/tensor.h"

/* ---- views: share storage; differentiable ---- */
ml_tensor *ml_narrow(ml_tensor *t, int dim, int64_t start, int64_t length);
ml_tensor *ml_slice(ml_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
ml_tensor *ml_select(ml_tensor *t, int dim, int64_t index); /* drops dim */
ml_tensor *ml_transpose(ml_tensor *t, int d0, int d1);
ml_tensor *ml_permute(ml_tensor *t, const int *perm);        /* perm has t->ndim entries */
ml_tensor *ml_view(ml_tensor *t, int ndim, const int64_t *shape);    /* one -1 allowed; needs compatible strides */
ml_tensor *ml_reshape(ml_tensor *t, int ndim, const int64_t *shape); /* view when possible, else copy */
ml_tensor *ml_expand(ml_tensor *t, int ndim, const int64_t *shape);  /* broadcast; -1 keeps a size */
ml_tensor *ml_unsqueeze(ml_tensor *t, int dim);
ml_tensor *ml_squeeze(ml_tensor *t, int dim);                /* dim must have size 1 */
/* Merges dims start_dim..end_dim into one (a view when the strides allow, else a copy); a 0-dim
 * tensor becomes [1], as in PyTorch. */
ml_tensor *ml_flatten(ml_tensor *t, int start_dim, int end_dim);

/* ---- copies ---- */
ml_tensor *ml_contiguous(ml_tensor *t); /* retains t itself if already contiguous */
ml_tensor *ml_clone(ml_tensor *t);      /* always a fresh contiguous copy; differentiable */
/* In place, not recorded. src broadcasts to dst's shape; dtypes are converted. */
ml_status ml_copy_(ml_tensor *dst, ml_tensor *src);
ml_status ml_fill_(ml_tensor *dst, double value);

#endif
