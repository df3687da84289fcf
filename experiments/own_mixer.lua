-- A mixer of your own, written in Lua, in the paper's language model (docs/nn.md, "Your own mixer"):
-- gated linear attention (GLA-style), trained on AR (ar_32, D = 64) with mech.train, then the
-- interchange evaluation and a patching map on it.
--   mechlab experiments/own_mixer.lua [--steps=2000] [--out=runs/own_mixer] [--docs=320]
-- Required as a module (require "experiments.own_mixer": found from any directory, mech.home is on
-- the module path) it only defines and registers the class. Its checkpoints name this module, so a
-- fresh process reloads one where you allow it (docs/security.md):
--   mech.load("runs/own_mixer/checkpoint.safetensors", {modules = {"experiments.own_mixer"}})
--   mechlab experiments/interchange.lua runs/own_mixer/checkpoint.safetensors --allow-module experiments.own_mixer
local nn = mech.nn

---------------------------------------------------------------------------------------- the mixer
-- S_t = diag(α_t) S_{t−1} + k_t v_tᵀ, y_t = S_tᵀ q_t, with a data-dependent forget gate per key
-- channel, α_t = σ(x_t W_α)^(1/τ). In parallel form, with b_t = Σ_{s≤t} log α_s:
-- y_t = Σ_{s≤t} (q_t ⊙ e^{b_t})·(k_s ⊙ e^{−b_s}) v_s, a causal (L, L) score matrix times v.
local GLA = nn.Module:extend("GLA")

function GLA:init(o)
  local D, Dk = o.d_model, o.d_key or o.d_model
  self.tau = o.tau or 16                    -- α = σ(·)^(1/τ): slow forgetting at first
  self.conv = nn.Conv1d(D, o.d_conv or 4)    -- a short causal conv first, as GLA's short_conv
  self.q_proj = nn.Linear(D, Dk, { bias = false })
  self.k_proj = nn.Linear(D, Dk, { bias = false })
  self.v_proj = nn.Linear(D, D, { bias = false })
  self.gate_proj = nn.Linear(D, Dk)         -- the forget gate's logits
  self.out_gate = nn.Linear(D, D)           -- the output gate (swish)
  self.norm = nn.RMSNorm(D)
  self.out_proj = nn.Linear(D, D, { bias = false })
  self.hook_log_decay = nn.HookPoint()      -- log α_t (B, L, Dk)
  self.hook_scores = nn.HookPoint()         -- the decayed causal scores (B, L, L)
end

-- the causal mask (t, s) = s ≤ t, cached by length
local masks = {}
local function causal(L)
  if not masks[L] then
    local i = mech.arange(L)
    masks[L] = mech.ge(i:reshape(L, 1), i:reshape(1, L)):float()
  end
  return masks[L]
end

function GLA:forward(x0)
  local L, x = x0:shape()[2], mech.silu(self.conv(x0))
  -- unit-norm queries and keys: retrieval by direction, as DeltaNet's
  local q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
  q, k = q / (mech.norm(q, 2, -1, true) + 1e-6), k / (mech.norm(k, 2, -1, true) + 1e-6)
  -- log α ∈ [−0.5, 0]: e^{±b} stays finite over the sequence
  local log_a = self.hook_log_decay((mech.log(mech.sigmoid(self.gate_proj(x))) / self.tau):clamp(-0.5, 0))
  local b = mech.cumsum(log_a, 1)
  local scores = mech.matmul(q * mech.exp(b), (k * mech.exp(-b)):transpose(1, 2)) * causal(L)
  local y = mech.matmul(self.hook_scores(scores), v)
  return self.out_proj(self.norm(y) * mech.silu(self.out_gate(x0)))
end

-- its name in models and checkpoints ("gla"), and the module that gives it back
nn.register_mixer(GLA, { module = "experiments.own_mixer" })
if ... == "experiments.own_mixer" then return GLA end

---------------------------------------------------------------------------------------- the run
local train = require "mech.train"
local ic = require "mech.interchange"
local opts = { steps = 2000, out = nil, docs = 320, lr = 1e-3, threads = 1 }
local args = arg or {}
for i = 1, #args do
  local k, v = args[i]:match("^%-%-([%w_]+)=(.*)$")
  if not k then k, v = args[i]:match("^([%w_]+)=(.*)$") end
  if not k and args[i]:match("^%-%-[%w_]+$") then k, v = args[i]:sub(3), args[i + 1] end
  if k and opts[k] ~= nil or k == "out" then opts[k] = v elseif not (args[i - 1] or ""):match("^%-%-[%w_]+$") then
    error("usage: own_mixer.lua [--steps=2000] [--out=DIR] [--docs=320] [--lr=1e-3] [--threads=1]; got " .. args[i], 0)
  end
end
local steps, docs = math.tointeger(tonumber(opts.steps)), math.tointeger(tonumber(opts.docs))

local run = train.run {
  model = { mixer = "experiments.own_mixer", d_model = 64, n_layers = 2 }, task = "ar_32", steps = steps,
  lr = tonumber(opts.lr), eval_every = math.max(steps // 4, 1), eval_docs = docs, out = opts.out,
  overwrite = opts.out and true or nil, threads = math.tointeger(tonumber(opts.threads)),
}
local model, task = run.model, run.task
print(string.format("%s: %d parameters, %d steps in %.1f s (%.1f steps/s); test accuracy %.4f", tostring(model),
  model:n_params(), steps, run.wall, run.steps_per_second, run.final.accuracy))
print("its sites in layer 1: " .. #model:hook_names("blocks.1.mixer") .. " (e.g. blocks.1.mixer.hook_scores)")

-- the paper's interchange evaluation (the layer-1 block-input attributions of Fig. 3)
local ds = task:dataset(docs, { seed = 42, split = "test" })
local res = ic.evaluate(model, ds)
local T = ic.type_name(task)
for _, p in ipairs { "target_item_orig", "query_item", "query_item_orig" } do
  local a, pass = ic.attrib(res, string.format("1.%s.query_item_orig.%s.block_input", T, p))
  print(string.format("  Attrib @ %-16s %7.3f%s", p, a, pass and "" or "  (filtered: original − corrupted <= 0.01)"))
end

-- a patching map over layer 1's block input and the mixer's own sites, key corrupted
local n_map = math.min(32, docs) -- the map's documents: at most the evaluated ones
local clean, corrupted = ic.corrupt(ds, 0, n_map)
local rows, targets = ic.readout(ds, 0, n_map)
local map = mech.interp.patching_map(model, clean, corrupted, { layers = { 1 },
  components = { "block_input", "mixer.hook_log_decay", "mixer.v_proj", "attention_output" }, rows = rows,
  targets = targets })
print(string.format("patching map (clean p %.3f, corrupted p %.3f): the largest restoration per site", map.clean,
  map.corrupted))
for r, site in ipairs(map.sites) do
  local best, at = -math.huge, 0
  for c = 0, #map.positions - 1 do
    local v = map.values:get(r - 1, c)
    if v > best then best, at = v, map.positions[c + 1] end
  end
  print(string.format("  %-28s %6.3f at position %d", site, best, at))
end
if map.warning then print("  note: " .. map.warning) end
