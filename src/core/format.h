/* Tensor text as PyTorch prints it (mech.Tensor's tostring): every element up to `threshold`
 * elements; above it each dim longer than 2·edgeitems shows edgeitems at each end. One format for
 * the whole tensor (chosen from the elements shown): integral floats as "3.", fixed with
 * `precision` decimals, or scientific when the magnitudes span more than 10³, exceed 10⁸ or go
 * below 10⁻⁴ — except probabilities (every value shown in [0, 1], the largest at least 0.01: an
 * attention pattern, a softmax), which stay fixed; `sci_mode` forces one or the other. Every
 * element is padded to the widest; rows wrapped at `linewidth` columns. */
#ifndef ML_FORMAT_H
#define ML_FORMAT_H

#include "core/tensor.h"

typedef struct {
    double threshold;
    int edgeitems, precision, linewidth;
    int sci_mode; /* ML_SCI_AUTO, ML_SCI_OFF (fixed) or ML_SCI_ON (scientific) */
} ml_print_options;

enum { ML_SCI_AUTO = -1, ML_SCI_OFF = 0, ML_SCI_ON = 1 };

/* mech.set_printoptions' profiles: ml_print_profile_names[i] ("default", "short", "full"; NULL
 * after the last) names ml_print_profiles[i]. The first is the default. */
extern const char *const ml_print_profile_names[];
extern const ml_print_options ml_print_profiles[];

/* The nested-bracket text of t's elements ("[[1., 2.],\n [3., 4.]]"): a malloc'd string, or
 * NULL with an error when memory runs out. */
char *ml_tensor_format(const ml_tensor *t, const ml_print_options *o);
/* mech.Tensor's tostring: "tensor(shape=[2,3], dtype=float32[, grad_fn=NAME][, requires_grad=true])\n"
 * then ml_tensor_format's text; grad_fn is the name of the node that made t, or NULL. */
char *ml_tensor_repr(const ml_tensor *t, const char *grad_fn, const ml_print_options *o);

#endif
