-- "Did you mean": suggestions come from the right vocabulary (config keys for a key, components
-- for a component) and know the common synonyms users bring from PyTorch and TransformerLens.
local T = require "check"
local train = require "mech.train"
local util = require "mech.util"

local function message(f, ...)
  local args = table.pack(...)
  return T.raises(function() return f(table.unpack(args, 1, args.n)) end)
end

-- the message contains the plain text `want`
local function says(msg, want)
  T.truthy(msg:find(want, 1, true), "message " .. string.format("%q", msg) .. " lacks " .. string.format("%q", want))
end

T.test("a training config key suggests a config key, synonyms included", function()
  says(message(train.run, { learning_rate = 1e-3 }), "unknown config key 'learning_rate' (did you mean 'lr'?)")
  says(message(train.run, { lerning_rate = 1e-3 }), "did you mean 'lr'?")
  says(message(train.run, { batch = 8 }), "did you mean 'batch_size'?")
  says(message(train.run, { wd = 0.1 }), "did you mean 'weight_decay'?")
  says(message(train.run, { bs = 8 }), "did you mean 'batch_size'?")
  says(message(train.run, { lr_ = 1 }), "did you mean 'lr'?") -- plain typos still work
end)

T.test("a model option given to train.run points under model=", function()
  says(message(train.run, { num_layers = 2 }), "did you mean model = { n_layers = ... }?")
  says(message(train.run, { n_layer = 2 }), "did you mean model = { n_layers = ... }?")
  says(message(train.run, { hidden_size = 64 }), "did you mean model = { d_model = ... }?")
  says(message(train.run, { width = 64 }), "did you mean model = { d_model = ... }?")
end)

T.test("epochs -> steps where steps is the name", function()
  T.eq(util.closest("num_epochs", { steps = true, num_heads = true, lr = true }), "steps")
  T.eq(util.closest("max_steps", { steps = true, seed = true, lr = true }), "steps")
end)

T.test("a component suggests a component", function()
  local m = mech.model { arch = "attention", d_model = 16, n_layers = 2, vocab = 20, n_heads = 2 }
  says(message(function() return m:site(0, "attn_outt") end), "did you mean 'attention_output'?")
  says(message(function() return m:site(0, "mlp_outt") end), "did you mean 'mlp_output'?")
  local toks = mech.zeros({ 1, 4 }, { dtype = "int32" })
  local hook = function() end
  says(message(function() return m:run_with_hooks(toks, { ["blocks.1.attn_outt"] = hook }) end),
    "did you mean 'blocks.1.attention_output'?")
  says(message(function() return m:run_with_hooks(toks, { ["blocks.0.hook_attn_outt"] = hook }) end),
    "did you mean 'blocks.0.hook_attn_out'?")
end)

T.test("mech.sys.closest is the one chooser, for Lua and C alike", function()
  T.eq(mech.sys.closest("learning_rate", { "lr", "seed", "steps" }), "lr")
  T.eq(mech.sys.closest("x", {}), nil)
  T.raises(function() mech.sys.closest("x", { 1 }) end, "bad argument #2 to 'mech.sys.closest' (expected a list of strings, entry 1 is a number)")
  T.raises(function() mech.sys.closest("x", 5) end, "bad argument #2 to 'mech.sys.closest' (a table expected, got 5)")
end)

T.done()
