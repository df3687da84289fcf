-- TransformerLens-style probing of a fresh attention model
local task = mech.task.ar { num_kv = 8, min_length = 4, max_length = 8 }
local model = mech.model { arch = "attention", d_model = 32, n_layers = 2, n_heads = 2, vocab = task:vocab_size(), seed = 1 }
local ds = task:dataset(8, { seed = 1, split = "test" })
local tokens = ds:batch(0, 8)
local logits, cache = model:run_with_cache(tokens)
print("pattern", table.concat(cache:get("pattern", 1):shape(), "x"))
-- the logit lens: the last block's output through the final norm and head gives the logits
print("lens", model:unembed(cache["blocks.1.block_output"]):equal(logits))
-- direct logit attribution sums to the logits
local parts = cache:decompose_resid()
print("parts", parts:size(0))
-- ablate head 0 of layer 1 with a hook
local ablated = model:run_with_hooks(tokens, { ["blocks.1.attn.hook_z"] = function(z)
  local out = z:clone()
  out[{ {}, {}, 0 }] = 0
  return out
end })
print("ablation changes logits", not ablated:equal(logits))
-- a literal name filter caches only what it names
local _, only = model:run_with_cache(tokens, { names = "blocks.0.hook_resid_pre" })
print("filtered", #only:names())
print(pcall(model.site, model, 1, "attn_outt"))
