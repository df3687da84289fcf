-- The Lua half of building a mixer written in Lua (src/lua/mixer.c, docs/nn.md "Your own mixer"):
-- per layer, the module instance, its parameters as the model must declare them, and its
-- internal sites with shapes in B / L found by two probe forwards. mixer.c declares what these
-- return in the model (ml_model_add_param, ml_model_add_site). Errors are plain messages: the C
-- side puts "model: mixer 'NAME' layer L: " in front.
local mech = _G.mech
local nn = require "mech.nn.module"

local M = {}

local describe = require("mech.show").value

--- The module of the class for the options (their JSON, "" for none) plus d_model, and its
--- parameters: {obj =, specs =, params = {{name =, shape =, init = name or nil, fan =}, ...}}.
function M.build(class, options_json, d_model)
  local opts = {}
  if options_json ~= "" then
    opts = require("mech.json").decode(options_json)
    if type(opts) ~= "table" then error("mixer options are not a JSON object", 0) end
  end
  opts.d_model = d_model
  local obj = class(opts)
  if type(obj) ~= "table" then error("the class returned " .. type(obj) .. ", expected a module", 0) end
  if type(obj.param_specs) ~= "function" then
    error("the module has no param_specs method (is it a mech.nn.Module?)", 0)
  end
  local specs = obj:param_specs()
  if type(specs) ~= "table" then error("param_specs() returned " .. type(specs) .. ", expected a list", 0) end
  local params = {}
  for i = 1, #specs do
    local s = specs[i]
    if type(s) ~= "table" then error(("param_specs() entry %d is not a table"):format(i), 0) end
    local name = s.name
    if type(name) ~= "string" and type(name) ~= "number" then error(("param_specs() entry %d has no name"):format(i), 0) end
    name = tostring(name)
    local shape = type(s.shape) == "table" and s.shape or {}
    if #shape < 1 or #shape > 4 then error(("parameter '%s' needs a shape of 1 to 4 dims"):format(name), 0) end
    for d = 1, #shape do
      if math.type(shape[d]) ~= "integer" or shape[d] < 1 then error(("parameter '%s' has a bad shape"):format(name), 0) end
    end
    local init, fan = s.init, math.type(s.fan) == "integer" and s.fan or 0
    if type(init) == "string" then
      -- nn.Linear and nn.Conv1d fans: in_features (the last dim), K
      if fan == 0 and (init == "linear_weight" or init == "conv_weight") then fan = shape[#shape] end
    elseif init ~= nil and type(init) ~= "table" and type(init) ~= "function" then
      error(("parameter '%s' has an init of type %s"):format(name, type(init)), 0)
    else
      init = nil -- the custom kinds: mixer.c's init runs them
    end
    params[i] = { name = name, shape = shape, init = init, fan = fan }
  end
  return { obj = obj, specs = specs, params = params }
end

-- One probe forward of obj at (B, L): the shape each path fired with, and the paths in order.
local function probe(obj, B, T, D)
  local shapes, order = {}, {}
  nn.push_context({ fire = function(path, t)
    if not mech.is_tensor(t) then error("mixer probe: argument 2 expected a tensor, got " .. describe(t), 2) end
    if type(path) == "string" and not shapes[path] then
      shapes[path] = t:shape()
      order[#order + 1] = path
    end
    return t
  end })
  local ok, y = pcall(obj, mech.full({ B, T, D }, 0.01))
  nn.pop_context()
  if not ok then error(y, 0) end
  local ys = mech.is_tensor(y) and y:shape()
  if not ys or y:dtype() ~= "float32" or #ys ~= 3 or ys[1] ~= B or ys[2] ~= T or ys[3] ~= D then
    error(("forward returned %s, expected a float32 tensor of shape [%d,%d,%d] (B, L, d_model)"):format(describe(y), B, T, D), 0)
  end
  return shapes, order
end

--- The module's internal sites: {{path, shape}, ...} for each path both probes fired (the root's
--- own output, path "", is the block's attention_output), sizes -1 for B and -2 for L.
function M.sites(obj, D)
  local B1, T1, B2, T2 = 2, 7, 3, 11
  local s1, order = probe(obj, B1, T1, D)
  local s2 = probe(obj, B2, T2, D)
  local sites = {}
  for _, path in ipairs(order) do
    if path ~= "" then
      local a, b = s1[path], s2[path]
      if not b then error(("site '%s' fired in one probe forward only"):format(path), 0) end
      if #a ~= #b or #a > 5 then error(("site '%s' changes its number of dims with (B, L) or has more than 5"):format(path), 0) end
      local shape = {}
      for d = 1, #a do
        if a[d] == B1 and b[d] == B2 then shape[d] = -1
        elseif a[d] == T1 and b[d] == T2 then shape[d] = -2
        elseif a[d] == b[d] then shape[d] = a[d]
        else
          error(("dim %d of site '%s' is neither B, L nor a constant (%d at B=%d L=%d, %d at B=%d L=%d)"):format(
            d - 1, path, a[d], B1, T1, b[d], B2, T2), 0)
        end
      end
      sites[#sites + 1] = { path, shape }
    end
  end
  return sites
end

--- The arch name of a class, its name (Module:extend("BaseConv") keeps it as __name) in snake
--- case ("base_conv", "GLA" -> "gla"), or nil when it has none.
function M.arch_name(class)
  local name = rawget(class, "__name")
  return type(name) == "string" and (name:gsub("([%l%d])(%u)", "%1_%2"):lower()) or nil
end

--- The mixer's own options among mech.model's (every key not in the set `config`) as the JSON
--- text the config records ("" for none): the options its class is built with.
function M.options_json(opts, fn, config)
  local own, any = {}, false
  for k, v in pairs(opts) do
    if type(k) ~= "string" then error(fn .. ": option keys must be strings", 0) end
    if not config[k] then
      local t = type(v)
      if t ~= "number" and t ~= "string" and t ~= "boolean" and t ~= "table" then
        error(("%s: mixer option '%s': expected a number, string, boolean or table (it is recorded in checkpoints), got %s")
          :format(fn, k, t), 0)
      end
      own[k], any = v, true
    end
  end
  return any and require("mech.json").encode(own) or ""
end

-- FNV-1a (64 bits) of a text, as 16 hex digits: a fingerprint of a module's source.
local function fnv1a(text)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #text do h = (h ~ text:byte(i)) * 0x100000001b3 end
  return string.format("%016x", h)
end

-- The file require would load for module, and the hash of its source; nil and why when none.
local function module_source(module)
  local path, why = package.searchpath(module, package.path)
  if not path then return nil, why end
  local text, err = mech.sys.read_file(path)
  if not text then return nil, err end
  return path, fnv1a(text)
end

--- At save: the hash of the source of the mixer's module (recorded in the checkpoint), or an error
--- when there is no module or require cannot find it by its recorded name, so no other process
--- could load the checkpoint.
function M.module_hash(module, arch)
  if module == "" then
    error(string.format("save: mixer '%s' was registered without a module (a class defined in a script), so no "
      .. "other process could load this checkpoint: move the class into a module file on the module path (the "
      .. "script's directory, the working directory, mech.home or LUA_PATH) and register it with "
      .. "{module = \"NAME\"} (docs/nn.md)", arch), 0)
  end
  local path, hash = module_source(module)
  if not path then
    error(string.format("save: mixer '%s' records module '%s', which require cannot find, so no other process "
      .. "could load this checkpoint: move the class into a module file on the module path (the script's "
      .. "directory, the working directory, mech.home or LUA_PATH) and register it with {module = \"NAME\"} "
      .. "(docs/nn.md)%s", arch, module, tostring(hash):gsub("\n%s*", "; ")), 0)
  end
  return hash
end

--- At load: warns on stderr when the module's source differs from the one the checkpoint was saved
--- with (recorded hash), naming both hashes.
function M.check_module_hash(module, recorded, ckpt)
  local path, hash = module_source(module)
  if path and hash ~= recorded then
    io.stderr:write(string.format("mech.load: warning: %s: the source of mixer module '%s' (%s) has changed since "
      .. "the checkpoint was saved: hash %s now, %s at save\n", ckpt, module, path, hash, recorded))
  end
  return hash
end

return M
