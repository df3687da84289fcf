/* Site names (docs/interventions.md, "Sites and names"): the one module that builds, parses and
 * aliases the full names "blocks.{layer}.{component}". Sites themselves are integer ids (indices
 * into m->sites, given out by ml_model_add_site); every other file asks this one for a name or
 * an id and never spells the form itself.
 *
 * TransformerLens names are aliases: a hook name ("hook_resid_pre", "attn.hook_q") or
 * get_act_name's short name ("resid_pre", "q") stands for mechlab's component ("block_input",
 * "mixer.head_q"). The residual between the mixer's add and the MLP's norm (hook_resid_mid) is the
 * site resid_mid of every block with an MLP. */
#ifndef ML_SITES_H
#define ML_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ml_model ml_model;

enum { ML_SITE_NAME_MAX = 128 }; /* enough for any full name */

/* "blocks.{layer}.{component}" into buf (truncated to n bytes). */
void ml_site_format(char *buf, size_t n, int layer, const char *component);
/* The full name of site id `site`. */
void ml_site_fullname(const ml_model *m, int site, char *buf, size_t n);
/* Splits "blocks.{l}.{component}": sets *layer and returns the component (a pointer into name),
 * or NULL for a name of another form. The layer is not checked against a model. */
const char *ml_site_split(const char *name, int *layer);

/* A TransformerLens component name -> mechlab's; any other name is returned unchanged. */
const char *ml_site_component(const char *name);
/* The k-th mechlab component a TransformerLens name stands for (attn.hook_q: mixer.head_q, then
 * mixer.q for mixers without heads), or NULL. */
const char *ml_site_component_at(const char *name, int k);
/* mechlab component -> its TransformerLens hook name, or NULL when it has none. */
const char *ml_site_tl_name(const char *component);
/* The mechlab spelling of a full name whose component may be a TransformerLens name, written
 * into buf; a name not of the form "blocks.{l}.x" is returned itself. */
const char *ml_site_canonical(const char *name, char *buf, size_t n);

/* The full name's TransformerLens spelling into buf; false when its component has none. */
bool ml_site_tl_spelling(const char *name, char *buf, size_t n);
/* Whether the literal name filter `lit` selects the full name `name`: lit is a whole run of name's
 * dot-separated parts (the full name, a layer "blocks.0", a component in every layer), whose last
 * part may leave off TransformerLens's "hook_" ("resid_post"); or lit in either spelling is name;
 * or lit is such a run of name's TransformerLens spelling. A typo ("hook_resid_pr") selects nothing. */
bool ml_site_literal_match(const char *name, const char *lit);

/* Declares layer `layer`'s internal site "mixer.<path>" (ml_model_add_site); -1 with an error when
 * the name does not fit a site's name. */
int ml_model_add_mixer_site(ml_model *m, int layer, const char *path, int ndim, const int64_t *shape);

/* Ids, -1 when the model has no such site: a layer's component (mechlab spelling), a full name
 * (mechlab spelling), a full name in either spelling. */
int ml_site_lookup(const ml_model *m, int layer, const char *component);
/* A layer's component in either spelling: the name itself, else each component it stands for. */
int ml_site_find(const ml_model *m, int layer, const char *name);
int ml_site_parse(const ml_model *m, const char *full);
int ml_site_resolve(const ml_model *m, const char *name);

/* The sites of layers × components (either spelling), layer by layer in the components' order,
 * skipping what a layer lacks, into out (nl·nc entries); returns how many. *missing (may be NULL):
 * the first component no layer has, or -1. */
int ml_site_grid(const ml_model *m, const int *layers, int nl, const char *const *components, int nc, int *out,
                 int *missing);

#endif
