-- A fresh process: reloads run/ (allowing the mixer's module), the same logits, the interchange evaluation.
local model, _, meta = mech.load("run/checkpoint.safetensors", { modules = { "rglru" } })
local task = meta.task
local ic = require "mech.interchange"
local ds = task:dataset(16, { seed = 9, split = "test" })
local tok = ds:batch(0, 4)
print("logits", string.format("%.9g", model:forward(tok):sum():item()))
local res = ic.evaluate(model, ds, { layers = { 1 } })
print("combinations", res.n_combos)
print("sites", #model:hook_names("blocks.1.mixer"))
