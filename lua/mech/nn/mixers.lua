-- The built-in sequence mixers as layers, one class per entry of the C registry
-- (mech.architectures): nn.Attention, nn.BaseConv, nn.Based, nn.H3, nn.Hyena, nn.Mamba, nn.DeltaNet.
-- A layer holds a private built-in model of its architecture (vocab 2, no positions, no state
-- mixer) and runs only its mixer (mech.nn.core.mixer_forward). Its parameters are that model's
-- leaves, named relative to the mixer (Wqkv.weight), so gradients and optimizers see them; its
-- internal sites (mixer.q, ...) fire as sites under the layer's path.
--   nn.Mamba{d_model = 64, d_conv = 4}   -- any option of mech.model the architecture reads
--   nn.Based{d_model = 64, layer = 0}    -- the mixer of block 0 of a Based LM (BaseConv)
local nn = require "mech.nn.module"
local core = require "mech.nn.core"

local M = {}

-- Each layer's private model and block index, out of the user's reach: a hook that could reach
-- the model could close it in the middle of its own forward.
local private = setmetatable({}, { __mode = "k" })

local function class_name(arch)
  return (arch:gsub("^%l", string.upper):gsub("_(%w)", string.upper))
end

local function build(fn, arch, opts, n_layers)
  local cfg = { arch = arch, n_layers = n_layers, vocab = 2, pos_emb = false, state_mixer = "none" }
  for k, v in pairs(opts) do
    if k ~= "layer" then
      if cfg[k] ~= nil and k ~= "arch" then
        error(string.format("%s: option '%s' belongs to the language model, not to a mixer layer", fn, tostring(k)), 4)
      end
      cfg[k] = v
    end
  end
  if cfg.arch ~= arch then error(string.format("%s: option arch expected nothing (the class is the architecture), got %s", fn, tostring(cfg.arch)), 4) end
  -- a seed from the default generator: mech.manual_seed makes layers reproducible
  cfg.seed = cfg.seed or math.floor(mech.rand(1):item() * 2 ^ 31)
  local ok, model = pcall(mech.model, cfg)
  if not ok then error(fn .. ": " .. tostring(model):gsub("^mech%.model: ", ""):gsub("^model: ", ""), 4) end
  return model
end

-- A view's init argument: the layer takes an existing model's block instead of building its own.
local VIEW = {}

-- The layer runs the mixer of block `layer` of `model`: its parameters (that model's leaves, named
-- relative to the mixer) and its internal sites.
local function attach(self, model, layer)
  local info = core.mixer_info(model, layer)
  private[self] = { model = model, layer = layer }
  self.block_index = layer
  self.mamba_block = info.mamba_block
  self.mixer_name = info.name
  local prefix = "backbone.layers." .. layer .. ".sequence_mixer."
  for _, np in ipairs(model:named_parameters()) do
    if np[1]:sub(1, #prefix) == prefix then self:_adopt(np[1]:sub(#prefix + 1), np[2]) end
  end
  local sites = {}
  for _, s in ipairs(model:hook_names()) do
    if s.layer == layer and s.component:sub(1, 6) == "mixer." then sites[#sites + 1] = s.component:sub(7) end
  end
  rawset(self, "_sites", sites)
end

-- The methods every mixer layer shares; `init` builds the layer's own model.
local function define(cls, name, init)
  function cls:init(opts, model, layer)
    if opts == VIEW then return attach(self, model, layer) end
    return init(self, opts)
  end

  function cls:internal_sites() return rawget(self, "_sites") end

  function cls:forward(x)
    local p = private[self]
    if not p then error(string.format("mech.nn: %s: not an initialised %s layer", nn.where(self), name), 2) end
    local model, layer = p.model, p.layer
    if not nn.active() then return core.mixer_forward(model, layer, x) end
    local path = rawget(self, "_path")
    local base = path == "" and "" or (path .. ".")
    return core.mixer_forward(model, layer, x, function(component, act)
      return nn.fire(base .. component:sub(7), act)
    end, function(component) return nn.wants(base .. component:sub(7)) end)
  end

  function cls:set_parameter(pname)
    error(string.format("mech.nn: %s: set_parameter: '%s' lives in the layer's built-in model; copy values in with load_state_dict",
      nn.where(self), tostring(pname)), 2)
  end
end

for _, arch in ipairs(mech.architectures) do
  local name = class_name(arch)
  local cls = nn.Module:extend(name)
  cls.arch = arch
  local fn = "mech.nn." .. name

  define(cls, name, function(self, opts)
    if opts ~= nil and (type(opts) ~= "table" or nn.is_module(opts)) then
      error(fn .. ": argument 1 expected an options table {d_model =, ...}, got " .. type(opts), 4)
    end
    opts = opts or {}
    -- layer: the block whose mixer this is (a hybrid and BaseConv differ between even and odd
    -- blocks); by default the first block that runs the architecture's own mixer
    local layer = opts.layer
    if layer ~= nil and (math.type(layer) ~= "integer" or layer < 0 or layer > 15) then
      error(fn .. ": option layer expected a block index in [0, 15], got " .. tostring(layer), 4)
    end
    local model = build(fn, arch, opts, (layer or 0) + 1)
    if layer == nil then
      layer = 0
      if core.mixer_info(model, 0).name ~= arch then -- a hybrid: its own mixer is on the odd layers
        model = build(fn, arch, opts, 2)
        layer = 1
      end
    end
    attach(self, model, layer)
  end)

  M[name] = cls
end

-- The mixer of a model whose architecture has no layer class of its own (a mixer written in Lua).
local MixerView = nn.Module:extend("MixerView")
define(MixerView, "MixerView", function(self)
  error(string.format("mech.nn: %s: a MixerView is made by mech.nn.mixer_view(model, layer)", nn.where(self)), 4)
end)

--- M.view(model, layer) -> the mixer layer of block `layer` of `model`, sharing its parameters.
local function view(model, layer)
  local cls = M[class_name(core.mixer_info(model, layer).name)] or MixerView
  return cls(VIEW, model, layer)
end

return setmetatable(M, { __index = { view = view } })
