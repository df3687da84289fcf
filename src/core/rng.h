/* mechlab's one random generator: Philox4x32-10 (Salmon et al., SC'11), counter based.
 *
 * A generator is (key, counter). The key is derived from (seed, stream) with SplitMix64, so
 * every (seed, stream) pair is an independent stream; the counter advances by one per block of
 * four 32-bit outputs. Results depend only on the seed, the stream and how many numbers were
 * drawn: the same on every machine and for every thread count (nothing here is shared between
 * threads; give each consumer its own stream).
 *
 * Derived distributions:
 *   ml_rng_u32      raw 32-bit output
 *   ml_rng_uniform  float in [0, 1): top 24 bits of one output times 2^-24
 *   ml_rng_double   double in [0, 1): 53 bits from two outputs
 *   ml_rng_normal   standard normal, Box-Muller on two doubles (both values used, in order)
 *   ml_rng_below    integer in [0, n), unbiased (Lemire's multiply-and-reject)
 *   ml_rng_gamma    Gamma(shape, 1), Marsaglia-Tsang (with the shape<1 boost)
 *
 * The state is plain data (ml_rng_state) so checkpoints can store and restore it exactly. */
#ifndef ML_RNG_H
#define ML_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t seed, stream; /* what the stream was created from (for printing/saving) */
    uint32_t key[2];
    uint64_t counter;      /* index of the next block */
    uint32_t block[4];     /* the current block of outputs */
    int used;              /* outputs of `block` already consumed (4 = empty) */
    int has_spare;         /* Box-Muller keeps its second value */
    double spare;
} ml_rng;

/* Well-known stream ids, so that independent consumers of one seed never overlap. */
enum {
    ML_STREAM_INIT = 1,   /* parameter initialisation */
    ML_STREAM_DATA = 2,   /* training-set generation */
    ML_STREAM_EVAL = 3,   /* evaluation-set generation */
    ML_STREAM_SHUFFLE = 4,
    ML_STREAM_GRAMMAR = 5, /* PCFG construction */
    ML_STREAM_SPLIT = 6,   /* train/test split of pairs */
    ML_STREAM_INTERP = 7,  /* corruption/resampling in interventions */
    ML_STREAM_USER = 100   /* first id free for scripts */
};

void ml_rng_init(ml_rng *r, uint64_t seed, uint64_t stream);
uint32_t ml_rng_u32(ml_rng *r);
uint64_t ml_rng_u64(ml_rng *r);
float ml_rng_uniform(ml_rng *r);
double ml_rng_double(ml_rng *r);
double ml_rng_normal(ml_rng *r);
uint32_t ml_rng_below(ml_rng *r, uint32_t n); /* n >= 1 */
double ml_rng_gamma(ml_rng *r, double shape);  /* shape > 0 */
/* Fisher-Yates shuffle of an int32 array. */
void ml_rng_shuffle_i32(ml_rng *r, int32_t *a, int64_t n);

/* The Philox4x32-10 block function itself (exposed for the known-answer test). */
void ml_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
