--- Residual-stream analysis on a cache (docs/analysis.md): the cache methods accumulated_resid,
--- decompose_resid, stack_head_results, apply_ln_to_stack and logit_attrs, and the figures
--- mech.plot.layers / components (also mech.interp.plot_layers / plot_components). The cache
--- methods (A.cache_NAME, set as methods of mech.Cache by src/lua/cache.c) check the cache and
--- pass the model and tokens it came from (A.set_origin, at model:run_with_cache); everything here
--- is tensor ops, so the results carry gradients where the cached tensors do.
local show = require "mech.show"

local A = {}

local function fail(fn, msg) error(fn .. ": " .. msg, 3) end

local function opt_keys(fn, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fn, "the options expected a table, got " .. type(opts)) end
  local bad = require("mech.util").unknown_option(opts, allowed)
  if bad then fail(fn, bad) end
  return opts
end

local function need(cache, fn, key)
  if not cache:has(key) then
    fail(fn, "the cache lacks '" .. key .. "' (run_with_cache without 'names', or with it among them)")
  end
  return cache[key]
end

-- A site's name from the model (model:site owns the naming); nil when the layer has no such site
-- (no MLP, a mixer without heads).
local function site(model, l, c)
  local ok, name = pcall(model.site, model, l, c)
  return ok and name or nil
end

local function check_layer(fn, layer, n, default)
  if layer == nil then return default end
  if math.type(layer) ~= "integer" or layer < 0 or layer > n then
    fail(fn, string.format("option 'layer': expected an integer in [0, %d], got %s", n, tostring(layer)))
  end
  return layer
end

-- A stack's options checked against `allowed`, the model's layer count and opts.layer (default:
-- every layer).
local function layer_opts(fn, model, opts, allowed)
  opts = opt_keys(fn, opts, allowed)
  local n = model:config().n_layers
  return opts, n, check_layer(fn, opts.layer, n, n)
end

-- The parts stacked on a new dim 0 and, with opts.apply_ln, through the final norm.
local function stacked(cache, model, opts, parts, labels)
  local stack = mech.stack(parts, 0)
  if opts.apply_ln then stack = A.apply_ln_to_stack(cache, model, nil, stack) end
  return stack, labels
end

-- The label of layer l's mixer output: TransformerLens's attn_out for attention.
local function mixer_label(model, l)
  return (model:config().arch == "attention" or model:config().arch == "based" and l % 2 == 1) and "attn_out" or "mixer_out"
end

--- The residual stream before each layer (and between mixer and MLP with incl_mid), up to
--- `layer` (default n_layers: then the final residual last): (n, B, L, D) and labels.
function A.accumulated_resid(cache, model, _, options)
  local fn = "cache:accumulated_resid"
  local opts, n, layer = layer_opts(fn, model, options, { "layer", "incl_mid", "apply_ln" })
  local parts, labels = {}, {}
  for i = 0, layer do
    if i < n then
      parts[#parts + 1], labels[#labels + 1] = need(cache, fn, site(model, i, "block_input")), i .. "_pre"
      if opts.incl_mid and i < layer and site(model, i, "resid_mid") then
        parts[#parts + 1], labels[#labels + 1] = need(cache, fn, site(model, i, "resid_mid")), i .. "_mid"
      end
    else
      parts[#parts + 1], labels[#labels + 1] = need(cache, fn, site(model, n - 1, "block_output")), "final_post"
    end
  end
  return stacked(cache, model, opts, parts, labels)
end

--- The residual entering `layer` (default: the final one) as its parts: embed, pos_embed, then
--- each layer's mixer output and MLP output; (n, B, L, D) and labels. The parts sum to it.
function A.decompose_resid(cache, model, tokens, options)
  local fn = "cache:decompose_resid"
  local opts, _, layer = layer_opts(fn, model, options, { "layer", "apply_ln" })
  local B, L = tokens:size(0), tokens:size(1)
  local parts = { model:weight("W_E"):embedding(tokens) }
  local labels = { "embed" }
  if model:config().pos_emb then
    parts[2], labels[2] = model:weight("W_pos")[{ { 0, L } }]:unsqueeze(0):expand(B, L, model:config().d_model), "pos_embed"
  end
  for i = 0, layer - 1 do
    parts[#parts + 1], labels[#labels + 1] = need(cache, fn, site(model, i, "attention_output")), i .. "_" .. mixer_label(model, i)
    local mlp = site(model, i, "mlp_output")
    if mlp and cache:has(mlp) then
      parts[#parts + 1], labels[#labels + 1] = cache[mlp], i .. "_mlp_out"
    end
  end
  return stacked(cache, model, opts, parts, labels)
end

--- Every head's output (its z through its slice of W_O, without the bias) of the layers below
--- `layer` (default all): (layers·H, B, L, D) and labels "L0H0", ...; incl_remainder adds the
--- final residual minus their sum.
function A.stack_head_results(cache, model, _, options)
  local fn = "cache:stack_head_results"
  local opts, n, layer = layer_opts(fn, model, options, { "layer", "incl_remainder", "apply_ln" })
  local parts, labels = {}, {}
  for l = 0, layer - 1 do
    local key = site(model, l, "mixer.head_result")
    if key and cache:has(key) then
      local r = cache[key]:permute(2, 0, 1, 3) -- (H, B, L, D)
      for h = 0, r:size(0) - 1 do parts[#parts + 1], labels[#labels + 1] = r[h], "L" .. l .. "H" .. h end
    end
  end
  if #parts == 0 then fail(fn, "the cache holds no mixer.head_result (attention layers, cached with names = nil or 'result')") end
  local stack = mech.stack(parts, 0)
  if opts.incl_remainder then
    local final = need(cache, fn, site(model, n - 1, "block_output"))
    stack = mech.cat({ stack, (final - stack:sum(0)):unsqueeze(0) }, 0)
    labels[#labels + 1] = "remainder"
  end
  if opts.apply_ln then stack = A.apply_ln_to_stack(cache, model, nil, stack) end
  return stack, labels
end

--- The final LayerNorm applied to each part of a decomposition (n, ..., D) of the final
--- residual: each part centred, divided by the final residual's cached scale and multiplied by
--- ln_final.w. The parts then sum to LN_f(residual) − ln_final.b.
function A.apply_ln_to_stack(cache, model, _, stack)
  local fn = "cache:apply_ln_to_stack"
  local D = model:config().d_model
  if not mech.is_tensor(stack) or stack:dim() < 2 or stack:size(-1) ~= D then
    fail(fn, string.format("argument 1 expected a stack of residual parts (n, ..., %d), got %s", D,
      mech.is_tensor(stack) and ("shape " .. table.concat(stack:shape(), "x")) or type(stack)))
  end
  local final = need(cache, fn, site(model, model:config().n_layers - 1, "block_output"))
  local centred = final - final:mean(-1, true)
  local scale = ((centred * centred):mean(-1, true) + 1e-5):sqrt()
  local parts = stack - stack:mean(-1, true)
  return parts / scale * model:param("ln_final.w")
end

-- Per-example integers: an integer, a list or an int32 tensor of B.
local function per_example(fn, key, v, B)
  local out = {}
  if math.type(v) == "integer" then
    for b = 1, B do out[b] = v end
  elseif mech.is_tensor(v) and v:numel() == B then
    for b = 1, B do out[b] = math.tointeger(v:reshape(B)[b - 1]) end
  elseif type(v) == "table" and #v == B then
    for b = 1, B do out[b] = math.tointeger(v[b]) end
  end
  if #out ~= B then fail(fn, string.format("option '%s': expected an integer, a list of %d or an int32 tensor of %d", key, B, B)) end
  return out
end

--- Direct logit attribution: each part of a stack (n, B, L, D) of the final residual, through
--- the final LayerNorm (cached scale) and the unembedding, read along the direction
--- W_U[:, answer] − W_U[:, wrong] at each example's row: (n, B), and the bias's share (B).
--- attrs:sum(0) + bias is the logit difference.
function A.logit_attrs(cache, model, tokens, stack, opts)
  local fn = "cache:logit_attrs"
  opts = opt_keys(fn, opts, { "answers", "wrong", "rows" })
  local B, L = tokens:size(0), tokens:size(1)
  if opts.answers == nil then fail(fn, "option 'answers' (the tokens whose logit is read) is required") end
  local ans = per_example(fn, "answers", opts.answers, B)
  local wrong = opts.wrong ~= nil and per_example(fn, "wrong", opts.wrong, B) or nil
  local rows = per_example(fn, "rows", opts.rows == nil and L - 1 or opts.rows, B)
  local V = model:config().vocab
  for b = 1, B do
    if rows[b] < 0 or rows[b] >= L then fail(fn, string.format("option 'rows': expected rows in [0, %d), got %d", L, rows[b])) end
    for _, t in ipairs { ans[b], wrong and wrong[b] or 0 } do
      if t < 0 or t >= V then fail(fn, string.format("token id %d out of range for vocabulary size %d", t, V)) end
    end
  end
  if not mech.is_tensor(stack) or stack:dim() ~= 4 or stack:size(1) ~= B or stack:size(2) ~= L then
    fail(fn, string.format("argument 1 expected a stack (n, %d, %d, D) of the cache's run", B, L))
  end
  local normed = A.apply_ln_to_stack(cache, model, nil, stack)
  local W_U, bias = model:weight("W_U"), model:param("ln_final.b")
  local cols, bcols = {}, {}
  for b = 1, B do
    local dir = W_U[{ ":", ans[b] }]
    if wrong then dir = dir - W_U[{ ":", wrong[b] }] end
    cols[b] = mech.matmul(normed[{ ":", b - 1, rows[b] }], dir) -- (n)
    bcols[b] = mech.matmul(bias, dir)
  end
  return mech.stack(cols, 1), mech.stack(bcols, 0)
end

--- A line over layers: values (n) or (k, n) with one label per series, x = 0..n−1 or xlabels.
function A.plot_layers(values, opts)
  local fn = "mech.plot.layers"
  opts = opt_keys(fn, opts, { "out", "title", "labels", "xlabel", "ylabel" })
  if not mech.is_tensor(values) or values:dim() < 1 or values:dim() > 2 then
    fail(fn, "argument 1 expected a tensor (n) or (series, n)")
  end
  if values:dim() == 1 then values = values:unsqueeze(0) end
  local series = {}
  for s = 0, values:size(0) - 1 do
    local x, y = {}, {}
    for i = 0, values:size(1) - 1 do x[i + 1], y[i + 1] = i, values[{ s, i }] end
    series[s + 1] = { label = opts.labels and opts.labels[s + 1] or ("series " .. s), x = x, y = y }
  end
  mech.plot.lines { series = series, out = opts.out, title = opts.title, xlabel = opts.xlabel or "layer",
    ylabel = opts.ylabel or "value" }
end

--- A bar per component: values (n) and labels (n strings), e.g. logit_attrs averaged over examples.
function A.plot_components(values, labels, opts)
  local fn = "mech.plot.components"
  opts = opt_keys(fn, opts, { "out", "title", "ylabel", "series" })
  if not mech.is_tensor(values) or values:dim() ~= 1 then fail(fn, "argument 1 expected a tensor (n)") end
  if type(labels) ~= "table" or #labels ~= values:size(0) then
    fail(fn, string.format("argument 2 expected %d labels", values:size(0)))
  end
  local cats, vals = {}, {}
  for i = 1, #labels do cats[i], vals[i] = tostring(labels[i]), values[i - 1] end
  mech.plot.bar { categories = cats, series = { { label = opts.series or "value", values = vals } }, out = opts.out,
    title = opts.title, ylabel = opts.ylabel }
end

-- The model and tokens each cache came from (weak keys: the cache stays a plain table of activations).
local origins = setmetatable({}, { __mode = "k" })

--- Records the model and tokens of a cache of model:run_with_cache (src/lua/cache.c calls it).
function A.set_origin(cache, model, tokens) origins[cache] = { model, tokens } end

-- cache:NAME(...) is NAME(cache, model, tokens, ...) (a tail call: errors name the caller's line).
for _, name in ipairs({ "accumulated_resid", "decompose_resid", "stack_head_results", "apply_ln_to_stack", "logit_attrs" }) do
  A["cache_" .. name] = function(cache, ...)
    local fn = "cache:" .. name
    local mt = type(cache) == "table" and getmetatable(cache)
    if not (mt and mt.__name == "mech.Cache") then error(fn .. ": argument 1 expected a mech.Cache, got " .. show.value(cache), 0) end
    local o = origins[cache]
    if not o then error(fn .. ": this cache has no model (caches of model:run_with_cache have one)", 0) end
    if not pcall(o[1].n_params, o[1]) then error(fn .. ": the model was closed", 0) end
    return A[name](cache, o[1], o[2], ...)
  end
end

return A
