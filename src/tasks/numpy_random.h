/* The random stream of the original ATR generator: numpy 1.x's legacy RandomState (MT19937)
 * and the few numpy and CPython behaviours the generator's draws depend on. Used by the ATR
 * tasks' rng = "numpy" mode (docs/tasks.md, "Random streams"). Pure C, no Lua. */
#ifndef ML_NUMPY_RANDOM_H
#define ML_NUMPY_RANDOM_H

#include <stdint.h>

enum { ML_MT_N = 624 };

typedef struct {
    uint32_t mt[ML_MT_N];
    int pos; /* next word of mt to temper; ML_MT_N = regenerate first */
} ml_np_random;

/* np.random.seed(seed) for an integer seed: MT19937 init_genrand. */
void ml_np_seed(ml_np_random *r, uint32_t seed);
/* One 32-bit MT19937 output. */
uint32_t ml_np_u32(ml_np_random *r);
/* random_sample(): 53 bits from two outputs, the first one drawn giving the high 27. */
double ml_np_double(ml_np_random *r);
/* randint(0, n) for n >= 1: masked rejection on 32-bit outputs; n == 1 draws nothing. */
uint32_t ml_np_below(ml_np_random *r, uint32_t n);
/* permutation(n) into perm: arange(n) shuffled from the top, swapping i with randint(0, i + 1)
 * for i = n-1 .. 1 (what choice(n, size=k, replace=False) takes its first k entries from). */
void ml_np_permutation(ml_np_random *r, int n, int32_t *perm);
/* standard_exponential(), which is also standard_gamma(1.0): -log(1 - U). */
double ml_np_exponential(ml_np_random *r);
/* dirichlet(ones(k)) as the cumulative distribution choice(p=...) searches: k exponentials,
 * each times 1/sum, then their running sum divided by its last element. */
void ml_np_dirichlet_ones_cdf(ml_np_random *r, int k, double *cdf);
/* The cumulative distribution of choice(p=p): running sum of p, divided by its last element. */
void ml_np_cdf(const double *p, int k, double *cdf);
/* searchsorted(cdf, u, side='right'): the first index whose entry exceeds u (k - 1 at most). */
int ml_np_search_right(const double *cdf, int k, double u);

/* The distinct values of v[0..n) (all >= 0) in the iteration order of a CPython 3.11 set built
 * by adding them in turn, set(v) (int hash = value: open addressing, 9 linear probes, perturbed
 * jumps, resize to 4 x used when 3/5 full). table is scratch of at least
 * ml_py_set_table_size(n) entries, out room for n. Writes the order to out, returns its length. */
int ml_py_set_order(const int32_t *v, int n, int32_t *table, int32_t *out);
int ml_py_set_table_size(int n);

#endif
