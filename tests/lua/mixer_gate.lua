-- A small mixer written in Lua for tests/lua/test_lua_mixer.lua: a causal running mean of a
-- gated projection. Required by name ("mixer_gate") in fresh processes (checkpoints, sweeps).
local nn = mech.nn
local Gate = nn.Module:extend("MixerGate")

function Gate:init(o)
  local D = o.d_model
  self.W = self:param("W", { D, D }, { init = "linear_weight" })
  self.g = self:param("g", { D }, { init = { normal = o.scale or 1 } })
  self.hook_gate = nn.HookPoint()
  self.hook_mix = nn.HookPoint()
end

function Gate:forward(x)
  local L = x:shape()[2]
  local u = self.hook_gate(mech.linear(x, self.W)):sigmoid() * x * self.g
  -- causal mean over positions: cumsum / (t + 1)
  local count = (mech.arange(L, { dtype = "float32" }) + 1):reshape(1, L, 1)
  return self.hook_mix(mech.cumsum(u, 1) / count)
end

mech.register_mixer(Gate, { module = "mixer_gate" })
return Gate
