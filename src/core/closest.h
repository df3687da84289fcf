/* "Did you mean": the closest of a list of names to a name that matched none of them. */
#pragma once

/* The name of `names` (NULL-terminated) closest to s: by edit distance of the names with their
 * numbers written '#', then by the numbers (so "blocks.7.mlp" suggests the nearest layer), with
 * the synonyms users bring from PyTorch, Hugging Face and TransformerLens read as mechlab's names
 * ("learning_rate" finds "lr"). NULL when names is empty. Only the first 64 bytes count. */
const char *ml_closest(const char *s, const char *const *names);
