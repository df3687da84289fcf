/* Language models: a config plus a parameter set (docs/mixers.md; docs/training.md, "Models").
 *
 * Parameters live in one flat float32 buffer (`flat`, shape [n]) with one named leaf view per
 * parameter; their gradients likewise live in one flat buffer (`grad_flat`) that each leaf's
 * .grad views, so AdamW is one loop and a checkpoint is one write. Names are the original
 * state-dict names (backbone.layers.0.sequence_mixer.Wqkv.weight, …).
 *
 * The forward is built from differentiable ops. At every hook site the model calls
 * ml_site(run, layer, name, act); a run with hooks may observe the activation or return a
 * replacement of the same shape (which takes part in autograd). Site names are
 * "blocks.{l}.{name}" with the paper's six per-layer names (block_input, attention_input,
 * attention_output, mlp_input, mlp_output, block_output) and mixer-internal "mixer.{x}" names.
 *
 * Mixers register in a table (mixers.c): each is one file with a constructor that declares its
 * parameters and sites, a forward, and a recurrent step. */
#ifndef ML_MODEL_H
#define ML_MODEL_H

#include "autograd/autograd.h"
#include "core/rng.h"
#include "nn/sites.h"
#include "ops/ops.h"

enum { ML_MAX_LAYERS = 16, ML_NAME_MAX = 112, ML_MAX_SITES = 48 };
/* Slots for the mixers' own options, all built-in mixers together (an option two mixers declare
 * under one name shares its slot). */
enum { ML_MIXER_OPTION_SLOTS = 16 };

/* The options every architecture reads; a mixer's own options (n_heads, d_conv, d_state, …) are
 * declared in its descriptor (ml_mixer_type.options) and held in mixer_opt (read them with
 * ml_mixer_opt). */
typedef struct {
    char arch[32];         /* attention, base_conv, based, h3, hyena, mamba, delta_net */
    int d_model;           /* D */
    int n_layers;
    int vocab;             /* V */
    int max_pos;           /* learned position table rows (1024) */
    bool pos_emb;          /* learned absolute positions (false = NoPE: no table at all) */
    char state_mixer[8];   /* mlp, glu, none (TransformerBlock only) */
    uint64_t seed;         /* initialisation seed */
    bool tie_embeddings;   /* the head is the embedding (true) or its own lm_head.weight */
    char precision[8];     /* fp32, or bf16: the linear products on AVX512_BF16 (ml_model_precision) */
    /* A runtime-registered mixer (arch names it): the module a host loads to register it again
     * (a Lua module name; "" when none) and its options as a JSON object text ("" for none). The
     * core only records them; the mixer's build reads the options. */
    char mixer_module[128];
    char mixer_options[1024];
    int64_t mixer_opt[ML_MIXER_OPTION_SLOTS]; /* the built-in mixers' options, by slot */
} ml_model_config;

/* How a parameter is initialised: the module it belongs to decides (docs/mixers.md, "Initialisation"). */
typedef enum {
    ML_P_LINEAR_W,  /* nn.Linear weight; fan = in_features */
    ML_P_LINEAR_B,  /* nn.Linear bias;   fan = in_features */
    ML_P_EMBEDDING, /* nn.Embedding */
    ML_P_CONV_W,    /* depthwise nn.Conv1d weight; fan = K */
    ML_P_CONV_B,    /* depthwise nn.Conv1d bias;   fan = K */
    ML_P_ONES,      /* norm weights */
    ML_P_ZEROS,     /* norm biases */
    ML_P_CUSTOM     /* the mixer's init() fills it */
} ml_param_kind;
/* A kind's name as mech.nn's param{init = ...} spells it ("linear_weight" ... "zeros"; "custom"),
 * and the kind of a name (-1: none of the first seven, which are the ones a name can ask for). */
const char *ml_param_kind_name(ml_param_kind k);
int ml_param_kind_of(const char *name);

typedef struct {
    char name[ML_NAME_MAX];
    int ndim;
    int64_t shape[4];
    int64_t offset, numel; /* into the flat buffers */
    ml_param_kind kind;
    int64_t fan;
    bool keep_bias;        /* Mamba dt_proj.bias: "_no_reinit" */
    int layer;             /* -1 for backbone-level parameters */
    ml_tensor *t;          /* leaf view of flat (requires grad) */
} ml_param;

/* A hook site: name relative to "blocks.{l}." and its shape; -1 = B, -2 = L. */
typedef struct {
    char name[48];
    int ndim;
    int64_t shape[5];
} ml_site_decl;

typedef struct ml_model ml_model;
typedef struct ml_run ml_run;

/* A key of the PyTorch state dict that is not a parameter of its own (docs/interop.md): a second
 * name of a parameter (lm_head.weight, Hyena's shared Sin freq) or a buffer the model computes
 * (Hyena's filter_fn.pos_emb.t and filter_fn.modulation.deltas). A checkpoint saved for PyTorch
 * holds them; loading accepts them only when they equal the model's values. */
typedef struct {
    char name[ML_NAME_MAX];
    int alias_of;      /* the parameter it names again, or -1 for a buffer */
    ml_tensor *buffer; /* the buffer's values (owned); NULL for an alias */
} ml_torch_key;

/* ---- model options (options.c): one table for defaults, ranges, Lua keys and JSON ----
 * The table is the common options (options.c) followed by the options the built-in mixers declare
 * in their descriptors, each name once; the checkpoint, mech.model, model:config() and the range
 * checks iterate it. */
typedef enum { ML_OPT_INT, ML_OPT_BOOL, ML_OPT_U64, ML_OPT_STRING } ml_option_type;
typedef struct {
    const char *name;
    ml_option_type type;
    size_t offset, size;      /* the field of ml_model_config (common options) */
    int64_t def, lo, hi;      /* default and range (ML_OPT_INT is checked against it) */
    const char *str_def;      /* ML_OPT_STRING default */
    bool common;              /* read by every architecture; otherwise by the mixers that declare it */
    bool key;                 /* a key of mech.model (no_conv is set by an alias only) */
    bool optional;            /* written to the checkpoint's JSON only when not the default (newer
                               * than the format: older readers and files keep their bytes) */
    const char *doc;          /* one line: what it sets */
    bool mixer;               /* a mixer's option: held in ml_model_config.mixer_opt[slot] */
    int slot;
} ml_model_option;
/* A mixer's own option in its descriptor: an integer in [LO, HI] or a boolean, a key of mech.model. */
#define ML_OPTION_INT(NAME, DEF, LO, HI, DOC) \
    {.name = NAME, .type = ML_OPT_INT, .def = DEF, .lo = LO, .hi = HI, .key = true, .doc = DOC}
#define ML_OPTION_BOOL(NAME, DEF, DOC) {.name = NAME, .type = ML_OPT_BOOL, .def = DEF, .hi = 1, .key = true, .doc = DOC}
int ml_model_option_count(void);
const ml_model_option *ml_model_option_at(int i);
const ml_model_option *ml_model_option_find(const char *name); /* NULL if none */
int64_t ml_option_get(const ml_model_config *c, const ml_model_option *o);
void ml_option_set(ml_model_config *c, const ml_model_option *o, int64_t v);
/* false if s does not fit the field */
bool ml_option_set_str(ml_model_config *c, const ml_model_option *o, const char *s);
const char *ml_option_str(const ml_model_config *c, const ml_model_option *o);
/* Every ML_OPT_INT option within its range; the error names the option. */
ml_status ml_model_config_check_ranges(const ml_model_config *c);
/* A mixer's option by name (the accessor mixers read theirs through); a name no built-in mixer
 * declares is a bug in the mixer and aborts with a message. */
int64_t ml_mixer_opt(const ml_model_config *c, const char *name);
void ml_mixer_opt_set(ml_model_config *c, const char *name, int64_t v);

/* A paper name for a variant of a mixer (mamba_without_conv, based_long_only, …): building it
 * builds the mixer with `apply` run on the config first. */
typedef struct {
    const char *name;
    void (*apply)(ml_model_config *cfg);
} ml_mixer_alias;

enum { ML_MIXER_MAX_ALIASES = 3, ML_MIXER_MAX_OPTIONS = 6 };

/* One sequence mixer: everything the model, the binding, the tests and the benches need to know
 * about it. Each lives in its own file (nn/mixer_X.c) and is listed once in nn/mixers.c. */
typedef struct ml_mixer_type {
    const char *name;
    ml_mixer_alias aliases[ML_MIXER_MAX_ALIASES]; /* unused entries: name NULL */
    /* Its own options (ML_OPTION_INT / ML_OPTION_BOOL; unused entries: name NULL), read with
     * ml_mixer_opt; a hybrid also reads its even layers'. Giving mech.model an option the mixer
     * does not read is an error naming it. A mixer that shares an option with another declares
     * it alike (same type, default and range; a test checks). Runtime-registered mixers have none
     * (a Lua mixer keeps its options as JSON, mixer_options). */
    ml_model_option options[ML_MIXER_MAX_OPTIONS];
    /* Hybrid(configs=[even_layers, this]): layers 0, 2, … build even_layers, and the mixer's
     * parameters live under "sequence_mixer.mixer."; NULL for a plain mixer. */
    const struct ml_mixer_type *even_layers;
    /* Forward matrix-product FLOPs of layer `layer` on a (B, L) batch, 2 per multiply-add (the
     * benches' GFLOP/s); scans and direct convolutions are not counted. */
    double (*flops)(const ml_model *m, int layer, double B, double L);
    /* Declares layer `layer`'s parameters (ml_model_add_param with names relative to
     * "backbone.layers.{l}.sequence_mixer.") and internal sites (ml_model_add_site, names
     * "mixer.x"); may allocate per-layer state into *state. Short causal convolutions are declared
     * ML_P_CONV_W / ML_P_CONV_B: the interventions on short convs find them by that kind. */
    ml_status (*build)(ml_model *m, int layer, void **state);
    /* Custom initialisation of ML_P_CUSTOM parameters (and any override); may be NULL. */
    void (*init)(ml_model *m, int layer, void *state, ml_rng *rng);
    /* Called once the parameters are allocated and initialised (ml_model_alloc), e.g. to hand
     * their leaf views to code the host holds; an error fails the allocation. May be NULL. */
    ml_status (*attach)(ml_model *m, int layer, void *state);
    /* x (B, L, D) -> y (B, L, D), new reference, or NULL with an error. */
    ml_tensor *(*forward)(ml_model *m, int layer, void *state, ml_tensor *x, ml_run *run);
    void (*free_state)(void *state);
    /* Recurrent form (docs/mixers.md: each mixer's "Recurrent form"): rec_new makes the
     * running state of a batch of B sequences (conv windows, SSM states, KV caches, histories),
     * rec_step maps x_t (B, D) to y_t (B, D) and advances it; running a document token by token
     * equals the parallel forward. Steps record no gradients. */
    void *(*rec_new)(ml_model *m, int layer, void *state, int64_t B);
    ml_tensor *(*rec_step)(ml_model *m, int layer, void *state, void *rec, ml_tensor *x_t);
    void (*rec_free)(void *rec);
    /* Marks the sites of the reference cache its forward from row t (ml_run.suffix) reads; NULL:
     * the mixer has no such forward (ml_model_hidden_suffix refuses the model). */
    void (*suffix_needs)(const ml_model *m, int layer, const void *state, bool *want);
    /* MambaBlock (RMSNorm, no state mixer) instead of TransformerBlock. */
    bool mamba_block;
    /* A runtime-registered mixer's context (e.g. the host's handle on the code that implements
     * it); its callbacks read it through ml_mixer_for_layer(&m->cfg, layer)->user. NULL for the
     * built-in mixers. */
    const void *user;
} ml_mixer_type;

typedef struct {
    const ml_mixer_type *mixer;
    void *state;
    int param_first, param_end; /* the layer's parameters, norms and MLP included */
    int site_first, site_end;
    int entry_site[7]; /* ids of the entry sites (ml_entry order); -1 where the block has none */
    int mlp_site[2];   /* mlp.hidden_pre, mlp.hidden_post; -1 without an MLP */
} ml_layer;

struct ml_model {
    ml_model_config cfg;
    ml_param *params;
    int n_params, cap_params;
    ml_tensor *flat, *grad_flat; /* [n_total] */
    int64_t n_total;
    ml_layer layers[ML_MAX_LAYERS];
    ml_site_decl *sites; /* all layers' sites, layer by layer */
    int *site_layer;
    int n_sites, cap_sites;
    ml_torch_key *torch_keys; /* aliases and buffers, in declaration order */
    int n_torch_keys, cap_torch_keys;
    int building_layer;  /* while building: the layer whose mixer is declaring */
    ml_status build_status; /* while building: set when a site could not be declared */
    /* backbone parameter indices */
    int p_wte, p_wpe, p_lnf_w, p_lnf_b;
    int p_norm1_w[ML_MAX_LAYERS], p_norm1_b[ML_MAX_LAYERS], p_norm2_w[ML_MAX_LAYERS], p_norm2_b[ML_MAX_LAYERS];
    int p_fc1_w[ML_MAX_LAYERS], p_fc1_b[ML_MAX_LAYERS], p_fc2_w[ML_MAX_LAYERS], p_fc2_b[ML_MAX_LAYERS];
    int p_fc3_w[ML_MAX_LAYERS], p_fc3_b[ML_MAX_LAYERS];
    int p_head; /* lm_head.weight of an untied head; -1 when the head is the embedding */
    /* Hooks every run of this model calls at each site before the run's own (the Lua binding
     * sets the persistent hooks of model:add_hook here for the duration of a call); NULL: none. */
    ml_run *hooks;
};

/* ---- hooks ---- */
/* Sites are integer ids (indices into m->sites) given out by ml_model_add_site while the model is
 * built; code on the hot path passes ids, and names exist only at the edges (Lua, messages). */
/* Called at every site. Return NULL to keep the activation (observe), or a new reference to a
 * replacement (same shape and dtype; checked by ml_site). On a Lua error etc. set *err. */
typedef ml_tensor *(*ml_hook_fn)(void *ud, int site, ml_tensor *act, ml_status *err);
struct ml_run {
    ml_hook_fn hook; /* NULL: no hooks (the fast path) */
    void *ud;
    /* Optional: does the run want site `site` (to pick decomposed compute paths)? */
    bool (*wants)(void *ud, int site);
    ml_status status; /* first error raised by a hook */
    /* Optional: the forward computes rows [t, t + Ls) only (ml_model_hidden_suffix); mixers with
     * suffix_needs read the rows before t from the reference cache. */
    const struct ml_suffix *suffix;
};
/* Returns a new reference to the activation to use from here on (act or its replacement, after
 * m->hooks and then run's hook), or NULL with an error (bad replacement shape, hook error). */
ml_tensor *ml_site(const ml_model *m, ml_run *run, int site, ml_tensor *act);
/* Does m->hooks or run want the site (mixers compute its value only then)? */
bool ml_site_wanted(const ml_model *m, ml_run *run, int site);
/* Site names and their parsers ("blocks.{layer}.{name}", TransformerLens aliases): nn/sites.h. */

/* ---- building ---- */
/* Resolves a paper alias in cfg->arch (ml_mixer_resolve_alias), validates the config (messages
 * name the key) and builds + initialises the model. */
ml_model *ml_model_new(const ml_model_config *cfg);
/* ml_model_new in two steps: the plan declares every parameter (name, shape, offset, n_total),
 * site and torch key without allocating the parameters (params[i].t stay NULL), so a file can be
 * checked against a config before paying for the model; ml_model_alloc then allocates and
 * initialises them. A plan that is never allocated is freed with ml_model_free. */
ml_model *ml_model_plan(const ml_model_config *cfg);
ml_status ml_model_alloc(ml_model *m);
void ml_model_free(ml_model *m);
/* Fills cfg with the defaults of the paper (2 layers, D=64, 1 head, V=8196, PE on, mlp). */
void ml_model_config_defaults(ml_model_config *cfg, const char *arch);
/* Used by mixers' build(): returns the parameter index or -1 on error. */
int ml_model_add_param(ml_model *m, int layer, const char *rel_name, int ndim, const int64_t *shape, ml_param_kind kind,
                       int64_t fan);
/* Declares a site of layer `layer` (name relative to "blocks.{l}.", shape with -1 = B, -2 = L);
 * returns its id, or -1 with an error. */
int ml_model_add_site(ml_model *m, int layer, const char *name, int ndim, const int64_t *shape);
/* Torch keys (names relative as for ml_model_add_param): an alias of parameter `param`, or a
 * buffer whose values the model takes over (its reference, also on failure). Return ML_OK or an
 * error. */
ml_status ml_model_add_alias(ml_model *m, int layer, const char *rel_name, int param);
ml_status ml_model_add_buffer(ml_model *m, int layer, const char *rel_name, ml_tensor *values);
static inline ml_tensor *ml_model_p(const ml_model *m, int idx) { return m->params[idx].t; }
int ml_model_find_param(const ml_model *m, const char *name);
/* A parameter by its state-dict name or by the hook-style name of its module:
 * "blocks.{l}.mixer.X" -> the layer's sequence mixer (a hybrid's even layers nest it under
 * "mixer."), "blocks.{l}.mlp.X" -> its state mixer, "blocks.{l}.X" -> the layer's own (norms);
 * "embed.W_E" / "pos_embed.W_pos" / "ln_final.w" / "ln_final.b" as TransformerLens spells them.
 * Returns the index or -1; buf gets the state-dict spelling tried (for a did-you-mean). */
int ml_model_resolve_param(const ml_model *m, const char *name, char *buf, size_t n);
/* Re-initialises every parameter from cfg.seed (as at construction). */
void ml_model_init(ml_model *m);

/* ---- precision (docs/kernels.md, "bf16 training") ----
 * A bf16 model runs its linear layers' products (every ml_linear of its forward, the head
 * included, and their backward) with bf16 inputs and fp32 sums; its parameters, gradients,
 * optimizer state, norms, softmaxes and scans stay fp32. The model's entry points (hidden states,
 * head, mixer forward, recurrent forward) set the thread's linear precision to the model's for
 * their duration. */
/* The model's precision on this thread: its config's, or fp32 inside ml_model_force_fp32. */
ml_precision ml_model_precision(const ml_model *m);
/* Sets the thread's linear precision to the model's (*saved: the previous one, for
 * ml_model_precision_leave). A bf16 model on a CPU without AVX512_BF16 fails, the message naming
 * fn, the option and the instruction. */
ml_status ml_model_precision_enter(const ml_model *m, const char *fn, ml_precision *saved);
static inline void ml_model_precision_leave(ml_precision saved) { ml_set_linear_precision(saved); }
/* on: every model on this thread runs in fp32 until the returned value is set back (the
 * interchange evaluation, which is fp32 whatever the model's precision). */
bool ml_model_force_fp32(bool on);

/* ---- running ---- */
/* tokens int32 (B, L) -> final hidden states h = LN_f(r) (B, L, D). */
ml_tensor *ml_model_hidden(ml_model *m, ml_tensor *tokens, ml_run *run);
/* r⁰ = E[tokens] (+ P): the residual entering block 0 (B, L, D). */
ml_tensor *ml_model_embed(ml_model *m, ml_tensor *tokens);
/* Resuming a forward inside the model (the fast path of interventions: a patch at layer l re-runs
 * only what it can change). The six paper sites of a block, in order: */
typedef enum {
    ML_ENTRY_BLOCK_INPUT = 0,
    ML_ENTRY_ATTENTION_INPUT,
    ML_ENTRY_ATTENTION_OUTPUT,
    ML_ENTRY_MLP_INPUT,
    ML_ENTRY_MLP_OUTPUT,
    ML_ENTRY_BLOCK_OUTPUT,
    ML_ENTRY_RESID_MID, /* after the six: the residual between the mixer's add and norm2 (with an MLP) */
    ML_ENTRY_COUNT,
    ML_ENTRY_PAPER = ML_ENTRY_RESID_MID /* the paper's six come first */
} ml_entry;
extern const char *const ml_entry_names[ML_ENTRY_COUNT];
int ml_entry_index(const char *name); /* -1 if not one of the entries */
typedef struct {
    int layer;        /* block to resume in */
    int entry;        /* ml_entry: the site to start at; it fires first, then the rest of the model */
    ml_tensor *act;   /* that site's value (B, L, D) */
    ml_tensor *resid; /* the residual it is added to: r entering the block (attention_input/_output)
                       * or r after the mixer (mlp_input/_output); NULL for block_input/_output */
    ml_tensor *rows;  /* optional int32 (B): after the last mixer keep only row rows[b] of each
                       * sequence (later sites see (B, 1, ·)); the result is then (B, 1, D) */
} ml_resume;
/* LN_f of the final residual, running from rs. ml_model_hidden is the resume from block_input of
 * layer 0 with act = ml_model_embed(tokens), so a resume from a cached activation reproduces the
 * full forward's bits. */
ml_tensor *ml_model_hidden_resume(ml_model *m, const ml_resume *rs, ml_run *run);
/* A forward of the rows from t on (interp's interchange: a corrupted run whose rows before t are a
 * cached run's, as a causal model's rows before the first changed token are). */
typedef struct ml_suffix {
    int64_t t;             /* first row computed */
    ml_tensor *const *pre; /* the reference run's cached sites by id, whole batch (B0, L0 >= t, ...) */
    const int32_t *docs;   /* sequence b of this run continues sequence docs[b] of pre's batch */
    /* Optional (with the run's readout rows, relative to t): the last layer's mixer returns only
     * those rows (B, 1, D), so that layer's attention_output site is one row per sequence. */
    const int32_t *rows;
} ml_suffix;
/* Does every layer's mixer have a forward from row t (suffix_needs)? */
bool ml_model_can_suffix(const ml_model *m);
/* Marks the sites the mixers read in the reference cache. */
void ml_model_suffix_needs(const ml_model *m, bool *want);
/* LN_f of rows [sx->t, sx->t + Ls) of the forward, tokens (B, Ls) being those rows' tokens and the
 * rows before sx->t those of pre's sequences docs[b]; rows (int32 (B), relative to sx->t) as in
 * ml_resume. The same bits as those rows of the whole forward (tested for every architecture). */
ml_tensor *ml_model_hidden_suffix(ml_model *m, ml_tensor *tokens, const ml_suffix *sx, ml_tensor *rows, ml_run *run);
/* Block `layer`'s sequence mixer alone on x (B, L, D) -> (B, L, D), firing its internal sites
 * through run (mech.nn's built-in mixer layers: a one-layer model run as a layer). */
ml_tensor *ml_model_mixer_forward(ml_model *m, int layer, ml_tensor *x, ml_run *run);
/* Logits of the head (the embedding when tied, else lm_head.weight): h (N, D) or (B, L, D) ->
 * (N, V) / (B, L, V). */
ml_tensor *ml_model_head(ml_model *m, ml_tensor *h);
/* The final LayerNorm (backbone.ln_f) on a residual r (..., D). */
ml_tensor *ml_model_final_norm(ml_model *m, ml_tensor *r);
/* The final LayerNorm and the head on a float32 residual x (B, L, D) or (L, D), e.g. a cached
 * block_output (the logit lens) -> (B, L, V) / (L, V); any other x is an error. */
ml_tensor *ml_model_unembed(ml_model *m, ml_tensor *x);
/* Mean cross-entropy over positions whose target is not −100 (targets (B, L) int32: the token
 * the logit at t must predict). Logits are computed only at those rows. If rows_logits is not
 * NULL it receives those logits (N, V) and rows_index the flat row indices b·L + t (N). */
ml_tensor *ml_model_loss(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_run *run, ml_tensor **rows_logits,
                         ml_tensor **rows_index);
/* The same, also counting at the supervised rows: how many, how many the argmax over the full
 * vocabulary gets right, and the sum of the target's probability. */
typedef struct {
    int64_t n, correct;
    double prob_sum;
} ml_row_stats;
ml_tensor *ml_model_loss_stats(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_run *run,
                               ml_tensor **rows_logits, ml_tensor **rows_index, ml_row_stats *stats);
void ml_model_zero_grad(ml_model *m);
/* The first parameter, in state-dict order, holding a NaN or an infinity; -1 when all are finite.
 * One pass over the flat buffer: for checkpoints and for a loss that went non-finite. */
int ml_model_first_nonfinite(const ml_model *m);
/* The same hidden states as ml_model_hidden, computed token by token through every mixer's
 * recurrent form (no hooks, no gradients). */
ml_tensor *ml_model_hidden_recurrent(ml_model *m, ml_tensor *tokens);
/* Parameter count as PyTorch counts it (tied embedding once). */
int64_t ml_model_count(const ml_model *m);

/* ---- the mixer registry ---- */
/* The built-in architectures in a fixed order: ml_mixer_at(i) for i in [0, ml_mixer_count()). */
int ml_mixer_count(void);
const ml_mixer_type *ml_mixer_at(int i);
/* The mixer named arch (not an alias), built in or registered at run time, or NULL. */
const ml_mixer_type *ml_mixer_find(const char *arch);
/* Runtime registration (a host adds mixers whose code it holds, e.g. written in Lua). The name is
 * a letter then letters, digits or '_', shorter than ml_model_config.arch, and taken by no built-in
 * mixer, alias or other registered mixer; the descriptor needs build and forward (a mixer without
 * rec_step has no recurrent form). The registry keeps the pointer: the caller keeps the descriptor
 * alive until it unregisters it and no model built with it remains. Not thread-safe: register
 * before models are built on other threads. */
ml_status ml_mixer_register(const ml_mixer_type *t);
/* Removes a registered mixer (false if it was not registered); built-in mixers stay. */
bool ml_mixer_unregister(const ml_mixer_type *t);
/* The registered mixers (not the built-in ones), in registration order. */
int ml_mixer_registered_count(void);
const ml_mixer_type *ml_mixer_registered_at(int i);
/* Does the mixer read option o (a common option, one it declares or, for a hybrid, one its even
 * layers declare)? */
bool ml_mixer_reads(const ml_mixer_type *t, const ml_model_option *o);
/* If cfg->arch is an alias, rewrites it to its mixer's name and applies the alias's settings. */
void ml_mixer_resolve_alias(ml_model_config *cfg);
/* The mixer of layer l for arch (Based alternates BaseConv and Based). */
const ml_mixer_type *ml_mixer_for_layer(const ml_model_config *cfg, int layer);

/* Whether every id of the int32 tensor tokens indexes the vocabulary; else an error naming the
 * first id out of range ("token id 99 out of range for vocabulary size 20"; the caller names itself). */
ml_status ml_model_check_tokens(const ml_model *m, const ml_tensor *tokens);

/* ---- parameters and init declared by name (a mixer written in Lua: src/lua/mixer.c) ---- */
/* ml_model_add_param with the init kind named as ml_param_kind_of reads it (NULL: ML_P_CUSTOM); an
 * unknown name is an error naming the parameter. */
int ml_model_add_param_named(ml_model *m, int layer, const char *rel_name, int ndim, const int64_t *shape,
                             const char *init, int64_t fan);
/* Fills parameter `param` from rng: normal with standard deviation a (b unused), or, when uniform,
 * uniform on [a, b). */
void ml_param_fill_random(ml_model *m, int param, bool uniform, double a, double b, ml_rng *rng);

#endif
