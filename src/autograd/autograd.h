/* Reverse-mode autodiff on a dynamic tape, PyTorch semantics.
 *
 * An op whose input needs grad (ml_needs_grad) creates a node with ml_node_new(), saves what its
 * backward needs with ml_node_save() (detached aliases, version-checked at backward time), and
 * attaches it to its output with ml_attach(). ml_backward() walks the graph from a root in
 * reverse topological order; each node's backward function receives the gradient of its output
 * (contiguous, same shape) and returns one gradient per input (NULL where the input needs none);
 * the engine sums gradients into non-leaf nodes and into the .grad of leaves. Backward runs with
 * grad mode off and frees the saved tensors (a second backward through the same graph is an
 * error, as with PyTorch's retain_graph=False). */
#ifndef ML_AUTOGRAD_H
#define ML_AUTOGRAD_H

#include "autograd/views.h"
#include "core/tensor.h"

enum { ML_NODE_MAX_IN = 8, ML_NODE_MAX_SAVED = 8 };

/* Fills grad_in[i] for every input i with ml_node_input_needs_grad(node, i) (new references,
 * shaped like the input); others may be left NULL. Returns ML_OK or an error. */
typedef ml_status (*ml_backward_fn)(ml_node *node, ml_tensor *grad_out, ml_tensor **grad_in);

struct ml_node {
    int refcount;
    const char *name;                      /* "MatmulBackward" — shown by tostring */
    ml_backward_fn backward;
    int n_in;
    ml_tensor *in[ML_NODE_MAX_IN];         /* inputs that need grad (retained), else NULL */
    int in_ndim[ML_NODE_MAX_IN];           /* input shapes, kept even for NULL inputs */
    int64_t in_shape[ML_NODE_MAX_IN][ML_MAX_DIMS];
    ml_tensor *saved[ML_NODE_MAX_SAVED];   /* detached aliases of saved tensors */
    uint64_t saved_version[ML_NODE_MAX_SAVED];
    int64_t iarg[8];                       /* small integer parameters of the op */
    double farg[4];                        /* small real parameters of the op */
    void *ctx;                             /* larger op state, freed with ctx_free */
    void (*ctx_free)(void *ctx);
    bool released;                         /* saved state freed by a backward pass */
    /* engine bookkeeping */
    ml_tensor *grad;                       /* accumulated gradient of the output */
    int out_ndim;
    int64_t out_shape[ML_MAX_DIMS];
    unsigned mark;
    int pending;
};

/* ---- grad mode ---- */
bool ml_grad_enabled(void);
bool ml_set_grad_enabled(bool on); /* returns the previous mode */
/* True when grad mode is on and t requires grad or has a grad_fn. */
bool ml_needs_grad(const ml_tensor *t);
bool ml_any_needs_grad(int n, ml_tensor *const *ts);

/* ---- building the graph ---- */
ml_node *ml_node_new(const char *name, ml_backward_fn fn, int n_in, ml_tensor *const *in);
bool ml_node_input_needs_grad(const ml_node *node, int i);
void ml_node_save(ml_node *node, int slot, ml_tensor *t);
/* The saved tensor in `slot`, or NULL with an error when it was modified in place or freed. */
ml_tensor *ml_node_saved(ml_node *node, int slot);
/* Makes node the grad_fn of out (out takes one reference to node; the caller's reference to the
 * node is consumed). */
void ml_attach(ml_tensor *out, ml_node *node);
void ml_node_release(ml_node *node);

/* ---- running it ---- */
/* grad_root NULL means ones (root must then have one element). */
ml_status ml_backward(ml_tensor *root, ml_tensor *grad_root);
ml_status ml_set_requires_grad(ml_tensor *t, bool on); /* leaves only; float32 only */
void ml_zero_grad(ml_tensor *t);

/* ---- helpers for backward functions ---- */
/* When input i is a leaf whose .grad already exists (contiguous float32 of its shape; the
 * model's parameters always have one, in the flat gradient buffer), the pointer to that .grad:
 * a backward may add its gradient there directly (and leave grad_in[i] NULL), saving a
 * temporary and a pass over it. NULL otherwise: return the gradient as usual. */
float *ml_node_grad_sink(ml_node *node, int i);
/* Sums g down to the given shape (undoing broadcasting). Returns a new reference. */
ml_tensor *ml_sum_to_shape(ml_tensor *g, int ndim, const int64_t *shape);

/* ---- gradient checking ---- */
/* fn builds a tensor from inputs (any shape). gradcheck compares the analytic gradient of
 * L = sum(w * fn(inputs)) (w fixed random weights, accumulated in double) against central
 * differences with step eps for every element of every float input that requires grad.
 * Returns ML_OK, or ML_ERR_ARG with a message naming the input, element, both values. */
typedef ml_tensor *(*ml_gradcheck_fn)(void *ud, ml_tensor **inputs);
ml_status ml_gradcheck(ml_gradcheck_fn fn, void *ud, int n, ml_tensor **inputs, double eps, double atol,
                       double rtol);
/* The same with at most max_per_input elements of each input checked, evenly spaced from the first
 * to the last (every element where the input is smaller): for whole models, whose large tables
 * (Hyena's filter MLP, H3's kernels) would need two forwards per element. */
ml_status ml_gradcheck_sampled(ml_gradcheck_fn fn, void *ud, int n, ml_tensor **inputs, double eps, double atol,
                               double rtol, int64_t max_per_input);

#endif
