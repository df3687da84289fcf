-- A mixer's contract (issue 43): a Lua mixer's output has its input's shape and dtype, in the
-- language model (src/lua/mixer.c) and in a mech.nn tree (nn.Block), for a sequence mixer and a
-- state mixer; and an init(t, gen) always gets a generator.
local T = require "check"
local nn = mech.nn

-- a mixer whose output is right except at length `bad_len`, where it is what `wrong` makes
local function mixer_class(name, bad_len, wrong)
  local C = nn.Module:extend(name)
  function C:init(o) self.w = self:param("w", { o.d_model }, { init = "ones" }) end
  function C:forward(x)
    local s = x:shape()
    if s[2] == bad_len then return wrong(s) end
    return x * self.w
  end
  return C
end

local wrongs = {
  { "a (1, 1) tensor", function() return mech.full({ 1, 1 }, 0.5) end, "a float32 tensor of shape [1,1]" },
  { "nil", function() return nil end, "returned nil" },
  { "a (B, 1, D) tensor", function(s) return mech.zeros({ s[1], 1, s[3] }) end, "shape [2,1,4]" },
  { "int32", function(s) return mech.zeros(s, { dtype = "int32" }) end, "an int32 tensor of shape [2,5,4]" },
}

T.test("nn.Block: a sequence mixer's output of another shape or dtype is an error naming the class and layer", function()
  for i, w in ipairs(wrongs) do
    local Bad = mixer_class("ContractSeq" .. i, 5, w[2])
    local tree = nn.Sequential(nn.Block { d_model = 4, mixer = Bad, state_mixer = "none" })
    T.eq(tree(mech.ones({ 2, 3, 4 })):shape(), { 2, 3, 4 }, w[1] .. ": a right output passes")
    local err = T.raises(function() tree(mech.ones({ 2, 5, 4 })) end, "0.mixer (ContractSeq" .. i .. "): forward returned ", w[1])
    T.raises(function() error(err) end, w[3])
    T.raises(function() error(err) end, "expected a float32 tensor of shape [2,5,4]")
  end
end)

T.test("nn.Block: a Lua module as the state mixer is run and held to the same contract", function()
  local Good = mixer_class("ContractStateOk", -1, nil)
  local b = nn.Block { d_model = 4, mixer = nn.Attention, state_mixer = Good }
  T.eq(b(mech.ones({ 2, 3, 4 })):shape(), { 2, 3, 4 })
  T.eq(b.mlp.w:shape(), { 4 }, "the module sits at mlp")
  local Bad = mixer_class("ContractState", 5, wrongs[1][2])
  local bad = nn.Block { d_model = 4, mixer = nn.Attention, state_mixer = Bad }
  T.raises(function() bad(mech.ones({ 2, 5, 4 })) end,
    "mlp (ContractState): forward returned a float32 tensor of shape [1,1], expected a float32 tensor of shape [2,5,4]")
end)

T.test("the language model: a mixer wrong at a length the probes did not see is an error naming layer and class", function()
  for i, w in ipairs(wrongs) do
    local Bad = mixer_class("ContractModel" .. i, 5, w[2])
    local m = mech.model { mixer = Bad, d_model = 4, n_layers = 1, vocab = 8, seed = 1 }
    local tok = mech.randint(0, 8, { 2, 5 })
    local err = T.raises(function() m:forward(tok) end, "blocks.0.mixer (mixer 'contract_model" .. i .. "'): forward returned ", w[1])
    T.raises(function() error(err) end, "expected a float32 tensor of shape [2,5,4]")
    T.raises(function() error(err) end, w[3], w[1] .. ": what came, as nn.Block says it")
  end
end)

T.test("a mixer returning no tensor or raising: an error naming layer and class, in the model and in nn.Block", function()
  local others = {
    { "a table", function() return {} end, "forward returned table", "forward returned a table" },
    { "a string", function() return "y" end, "forward returned 'y'", "forward returned a string" },
    { "a model", function() return mech.model { arch = "attention", d_model = 4, n_layers = 1, vocab = 8 } end,
      "forward returned userdata", "forward returned a userdata" },
    { "a raised message", function() error("mixer failed here", 0) end, "mixer failed here", "mixer failed here" },
    { "a raised table", function() error({}) end, "raised a table as its error", "raised a table as its error" },
    { "a raised nil", function() error(nil) end, "raised nil as its error", "raised nil as its error" },
  }
  for i, w in ipairs(others) do
    local Bad = mixer_class("ContractOther" .. i, 5, w[2])
    local m = mech.model { mixer = Bad, d_model = 4, n_layers = 2, vocab = 8, seed = 1 }
    local err = T.raises(function() m:forward(mech.randint(0, 8, { 2, 5 })) end,
      "blocks.0.mixer (mixer 'contract_other" .. i .. "'): ", w[1])
    T.raises(function() error(err) end, w[3], w[1])
    local tree = nn.Sequential(nn.Block { d_model = 4, mixer = Bad, state_mixer = Bad })
    err = T.raises(function() tree(mech.ones({ 2, 5, 4 })) end, "0.mixer (ContractOther" .. i .. "): ", w[1] .. " in nn.Block")
    T.raises(function() error(err) end, w[4], w[1] .. " in nn.Block")
  end
end)

T.test("a table or nil raised in a hook, a gradcheck function or a mixer's module is described, not passed on as NULL", function()
  local m = mech.model { arch = "attention", d_model = 4, n_layers = 1, vocab = 8 }
  local tok = mech.randint(0, 8, { 1, 3 })
  T.raises(function() m:forward(tok, { ["blocks.0.hook_resid_pre"] = function() error({}) end }) end,
    "hook at blocks.0.block_input: raised a table as its error (not a message)")
  local passed, msg = mech.gradcheck(function() error(nil) end, { mech.randn(2, { requires_grad = true }) })
  T.falsy(passed)
  T.eq(msg, "gradcheck: function failed: raised nil as its error (not a message)")
  package.preload.contract_raises_table = function() error({}) end
  T.raises(function() mech.model { mixer = "contract_raises_table", d_model = 4, n_layers = 1, vocab = 8 } end,
    "requiring it as a module failed: raised a table as its error (not a message)")
  package.preload.contract_raises_table = nil
end)

T.test("init(t, gen) gets a generator outside a model: the default one, seeded by mech.manual_seed", function()
  local got = {}
  local C = nn.Module:extend("ContractInit")
  function C:init()
    self.w = self:param("w", { 3 }, { init = function(t, gen)
      got[#got + 1] = gen
      t:copy_(mech.rand({ 3 }, { generator = gen }))
    end })
  end
  mech.manual_seed(11)
  local a = C {}
  mech.manual_seed(11)
  local b = C {}
  T.truthy(got[1] ~= nil and got[1] == mech.default_generator, "the default generator")
  T.eq((a.w - b.w):abs():max():item(), 0, "same seed, same init")
  mech.manual_seed(12)
  T.truthy((C {}.w - a.w):abs():max():item() > 0, "another seed, another init")
end)

T.done()
