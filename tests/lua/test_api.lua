-- The researcher's API: caches (errors with did-you-mean, get, names filters, TransformerLens
-- names), reset_hooks, parameters by hook-style name, the logit lens, to_str_tokens, the patching
-- map and its plot, the chance warning, and help.
local T = require "check"

local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 } -- V = 68, 13 tokens
local ds = task:dataset(8, { seed = 1, split = "test" })
local tok = ds:batch(0, 4)

local function tiny(arch)
  return mech.model { arch = arch or "attention", d_model = 16, n_layers = 2, vocab = task:vocab_size(), seed = 5 }
end

T.test("cache: an unknown key is an error naming the closest cached name", function()
  local m = tiny()
  local _, cache = m:run_with_cache(tok, { names = { "blocks.0.attention_output", "blocks.1.block_input" } })
  T.raises(function() return cache["blocks.0.atention_output"] end, "did you mean 'blocks.0.attention_output'")
  T.raises(function() return cache["blocks.1.mlp_output"] end, "is not in this cache")
  T.raises(function() return cache[3] end, "keys are site names")
  T.eq(cache["blocks.0.attention_output"]:shape(), { 4, 13, 16 })
  local n = 0
  for name, t in pairs(cache) do
    n = n + 1
    T.eq(t:shape(), { 4, 13, 16 }, name)
  end
  T.eq(n, 2)
  T.truthy(cache:has("blocks.1.block_input"))
  T.falsy(cache:has("blocks.1.mlp_output"))
  T.eq(cache:names(), { "blocks.0.attention_output", "blocks.1.block_input" })
  -- the gradients table is a cache too
  local _, _, grads = m:run_with_cache(tok, { names = "blocks.1.block_input", grads = true,
    targets = mech.tensor({ 1, 2, 3, 4 }, { dtype = "int32" }) })
  T.raises(function() return grads["blocks.1.block_inpt"] end, "did you mean 'blocks.1.block_input'")
  -- its scalar options are read by mlL_options, in the rule's words
  T.raises(function() m:run_with_cache(tok, { grads = true, objective = "logit" }) end,
    "bad argument #2 to 'model:run_with_cache' (option 'objective': expected one of 'logprob', 'prob', got 'logit')")
  T.raises(function() m:run_with_cache(tok, { grads = 1 }) end,
    "bad argument #2 to 'model:run_with_cache' (option 'grads': expected a boolean, got 1)")
end)

T.test("cache:get(component, layer) with mechlab and TransformerLens names", function()
  local m = tiny()
  local _, cache = m:run_with_cache(tok)
  local bi = cache["blocks.1.block_input"]
  T.truthy(rawequal(cache:get("block_input", 1), bi))
  T.truthy(rawequal(cache:get("resid_pre", 1), bi))
  T.truthy(rawequal(cache:get("hook_resid_pre", 1), bi))
  T.truthy(rawequal(cache["blocks.1.hook_resid_pre"], bi))
  T.truthy(rawequal(cache:get("blocks.1.hook_resid_pre"), bi))
  T.truthy(rawequal(cache:get("resid_post", 0), cache["blocks.0.block_output"]))
  T.truthy(rawequal(cache:get("attn_out", 0), cache["blocks.0.attention_output"]))
  T.truthy(rawequal(cache:get("mlp_out", 1), cache["blocks.1.mlp_output"]))
  T.truthy(rawequal(cache:get("pattern", 0), cache["blocks.0.mixer.pattern"]))
  T.truthy(rawequal(cache["blocks.0.attn.hook_q"], cache["blocks.0.mixer.head_q"])) -- per head, as TransformerLens
  T.truthy(rawequal(cache:get("z", 1), cache["blocks.1.mixer.head_z"]))
  T.truthy(rawequal(cache["blocks.0.ln1.hook_normalized"], cache["blocks.0.attention_input"]))
  T.truthy(rawequal(cache["blocks.0.mlp.hook_post"], cache["blocks.0.mlp.hidden_post"]))
  T.raises(function() cache:get("resid_pre", 7) end, "'blocks.7.block_input' is not in this cache")
  T.raises(function() cache:get("block_inptu", 0) end, "did you mean 'blocks.0.block_input'")
  T.raises(function() cache.get({}, "x") end, "calling 'cache:get' on bad self (a mech.Cache expected, got table)")
end)

T.test("names: literal names, {pattern =}, functions and TransformerLens names select sites", function()
  local m = tiny()
  local _, c = m:run_with_cache(tok, { names = "mlp_output" })
  T.eq(c:names(), { "blocks.0.mlp_output", "blocks.1.mlp_output" })
  _, c = m:run_with_cache(tok, { names = { pattern = "^blocks%.1%.mixer%.[qk]$" } })
  T.eq(c:names(), { "blocks.1.mixer.k", "blocks.1.mixer.q" })
  _, c = m:run_with_cache(tok, { names = function(name) return name:match("pattern$") ~= nil end })
  T.eq(c:names(), { "blocks.0.mixer.pattern", "blocks.1.mixer.pattern" })
  _, c = m:run_with_cache(tok, { names = { "blocks.0.hook_resid_pre", "blocks.1.attn.hook_pattern" } })
  T.eq(c:names(), { "blocks.0.block_input", "blocks.1.mixer.pattern" })
  T.eq(c:names("pattern"), { "blocks.1.mixer.pattern" })
  T.eq(c:names("hook_resid_pre"), { "blocks.0.block_input" }) -- names match TransformerLens spellings too
  local _, post = m:run_with_cache(tok, { names = "resid_post" })
  T.eq(post:names(), { "blocks.0.block_output", "blocks.1.block_output" })
  T.eq(c:names(function(n) return n:find("blocks.0", 1, true) end), { "blocks.0.block_input" })
  T.raises(function() m:run_with_cache(tok, { names = "blocks.0.atention_output" }) end,
    "did you mean 'blocks.0.attention_output'")
  T.raises(function() m:run_with_cache(tok, { names = { pattern = "blocks[" } }) end, "bad Lua pattern")
  T.raises(function() m:run_with_cache(tok, { names = 3 }) end, "option 'names': expected a site name, {pattern = a Lua pattern} or a function(name), got number")
end)

T.test("hooks take TransformerLens names; reset_hooks removes every added hook", function()
  local m = tiny()
  local base = m:forward(tok)
  local seen = {}
  m:add_hook("blocks.0.hook_resid_pre", function(_, ctx) seen[#seen + 1] = ctx.site end)
  local h = m:add_hook("blocks.1.hook_mlp_out", function(a) return a * 0 end)
  T.falsy(m:forward(tok):equal(base))
  T.eq(seen, { "blocks.0.block_input" })
  m:reset_hooks()
  T.truthy(m:forward(tok):equal(base))
  T.eq(#seen, 1)
  h:remove() -- a handle of a reset hook is a no-op
  local zeroed = m:run_with_hooks(tok, { ["blocks.1.hook_mlp_out"] = function(a) return a * 0 end })
  T.truthy(zeroed:equal(m:run_with_hooks(tok, { ["blocks.1.mlp_output"] = function(a) return a * 0 end })))
  T.raises(function()
    m:run_with_hooks(tok, { ["blocks.1.hook_mlp_out"] = print, ["blocks.1.mlp_output"] = print })
  end, "two hooks for site 'blocks.1.mlp_output'")
end)

T.test("hook_names and caches print one site a line with its shape", function()
  local m = tiny()
  local s = tostring(m:hook_names())
  T.truthy(s:find("40 hook sites:", 1, true), s)
  T.truthy(s:find("\n  blocks.0.mixer.pattern%s+%(B, 1, L, L%)"), s)
  local _, c = m:run_with_cache(tok, { names = "blocks.1.mixer.pattern" })
  T.eq(tostring(c), "mech.Cache with 1 activations:\n  blocks.1.mixer.pattern           (4, 1, 13, 13)")
  T.eq(require("mech.pp").format(c), tostring(c))
  T.eq(m:hook_names()[1].name, "blocks.0.block_input") -- still a list of {name, shape}
  local sel = m:hook_names({ pattern = "^blocks%.1%.mixer%.[qk]$" })
  T.eq({ #sel, sel[1].name, sel[2].name }, { 2, "blocks.1.mixer.q", "blocks.1.mixer.k" })
  T.eq(sel[1].shape, { "B", "L", 16 })
  T.eq(#m:hook_names(function(n) return n:find("attn_out", 1, true) end), 0) -- functions see mechlab names
  T.eq(#m:hook_names("hook_attn_out"), 2)
  T.raises(function() m:hook_names(3) end, "bad argument #1 to 'model:hook_names' (expected a site name, {pattern = a Lua pattern} or a function(name), got number)")
end)

T.test("param: state-dict names and hook-style names reach the same tensor", function()
  local mamba = tiny("mamba")
  local a = mamba:param("blocks.1.mixer.A_log")
  T.eq(a:shape(), mamba:param("backbone.layers.1.sequence_mixer.A_log"):shape())
  mech.no_grad(function() a:fill_(0.5) end) -- shares storage with the model
  T.eq(mamba:param("backbone.layers.1.sequence_mixer.A_log"):get(0, 0), 0.5)
  local m = tiny()
  T.eq(m:param("blocks.0.mlp.fc1.weight"):shape(), { 64, 16 })
  T.eq(m:param("blocks.0.norm1.weight"):shape(), { 16 })
  T.eq(m:param("embed.W_E"):shape(), { task:vocab_size(), 16 })
  T.raises(function() mamba:param("blocks.1.mixer.A_lg") end, "did you mean 'backbone.layers.1.sequence_mixer.A_log'")
end)

T.test("unembed: the logit lens on the last residual gives forward's logits", function()
  for _, arch in ipairs { "attention", "mamba" } do
    local m = tiny(arch)
    local _, cache = m:run_with_cache(tok, { names = "blocks.1.block_output" })
    local r = cache:get("resid_post", 1)
    T.truthy(m:unembed(r):equal(m:forward(tok)), arch)
    local one = m:unembed(r:select(0, 2)) -- (L, D) -> (L, V)
    T.eq(one:shape(), { 13, task:vocab_size() })
    T.truthy(one:allclose(m:forward(tok):select(0, 2), 1e-5, 1e-6), arch)
  end
  local m = tiny()
  T.raises(function() m:unembed(mech.zeros(4, 13, 8)) end, "expected a float32 residual of shape (B, L, 16) or (L, 16)")
end)

T.test("to_str_tokens: a tensor (L) or (B, L), or a table of ids", function()
  local names = task:to_str_tokens(tok)
  T.eq(#names, 4)
  T.eq(#names[1], 13)
  T.eq(names[1][1], task:token_name(tok:get(0, 0)))
  T.eq(names[2][5], task:token_name(tok:get(1, 4)))
  T.eq(task:to_str_tokens(tok:select(0, 1)), names[2])
  T.eq(task:to_str_tokens({ tok:get(0, 0), tok:get(0, 1) }), { names[1][1], names[1][2] })
  T.raises(function() task:to_str_tokens({ 1, 999 }) end, "token id 999 out of range for vocabulary size 68")
  T.raises(function() task:to_str_tokens("x") end, "bad argument #1 to 'task:to_str_tokens' (token ids (an int32 tensor or a list of integers) expected, got 'x')")
  T.raises(function() task:to_str_tokens(mech.zeros(3)) end, "int32 token ids")
end)

local ic = require "mech.interchange"

-- documents 0..3 with the first key (position 1) replaced by another key
local function corrupt_first_key()
  local clean = ds:batch(0, 4)
  local corrupted = clean:clone()
  for b = 0, 3 do corrupted:set(clean:get(b, 1) == 5 and 6 or 5, b, 1) end
  return clean, corrupted
end

-- p(target) at each example's readout row, averaged (the map's "prob" metric, from logits)
local function mean_prob(logits, rows, targets)
  local lp, s = mech.log_softmax(logits, 2), 0
  for b = 0, rows:size(0) - 1 do s = s + math.exp(lp:get(b, rows:get(b), targets:get(b))) end
  return s / rows:size(0)
end

T.test("patching_map: every cell is a patch of the clean activation into the corrupted run", function()
  for _, arch in ipairs { "attention", "mamba" } do
    local m = tiny(arch)
    local clean, corrupted = corrupt_first_key()
    local rows, targets = ic.readout(ds, 0, 4)
    local map = mech.interp.patching_map(m, clean, corrupted, { rows = rows, targets = targets, chance = 0 })
    local comps = arch == "mamba" and 4 or 6
    T.eq(map.values:shape(), { 2 * comps, 13 }, arch)
    T.eq(#map.row_labels, 2 * comps)
    T.eq(map.row_labels[comps + 1], "layer 1 block_input")
    T.eq(map.sites[comps + 1], "blocks.1.block_input")
    T.eq(map.col_labels[4], "3")
    T.eq(map.positions[4], 3)
    local p_clean = mean_prob(m:forward(clean), rows, targets)
    local p_corr = mean_prob(m:forward(corrupted), rows, targets)
    T.near(map.clean, p_clean, 1e-6)
    T.near(map.corrupted, p_corr, 1e-6)
    T.near(map.den, p_clean - p_corr, 1e-6)
    T.eq(map.passes, map.den > 0.01)
    local _, cc = m:run_with_cache(clean)
    for r, site in ipairs(map.sites) do
      for _, pos in ipairs { 1, 5, 10 } do
        local lg = mech.interp.patch(m, corrupted, { site = site, source = cc[site], pos = pos, reference = true })
        local v = mean_prob(lg, rows, targets)
        T.near(map.patched:get(r - 1, pos), v, 1e-5, arch .. " " .. site .. " at " .. pos)
      end
    end
    -- the corrupted key sits at position 1: at layer 0 nothing before it can change the readout,
    -- and restoring the whole residual there restores the clean run
    T.eq(map.values:get(0, 0), 0)
    T.near(map.values:get(0, 1), 1, 1e-3)
    T.eq(map.warning, nil)
  end
end)

T.test("patching_map: layers, components (TransformerLens names too), positions, metrics, errors", function()
  local m = tiny()
  local clean, corrupted = corrupt_first_key()
  local map = mech.interp.patching_map(m, clean, corrupted,
    { layers = { 1 }, components = { "resid_pre", "mixer.q", "attn_out" }, positions = { 1, -2 }, metric = "logit",
      dataset = ds })
  T.eq(map.sites, { "blocks.1.block_input", "blocks.1.mixer.q", "blocks.1.attention_output" })
  T.eq(map.positions, { 1, 11 })
  T.eq(map.metric, "logit")
  local seen
  local fmap = mech.interp.patching_map(m, clean, corrupted, { layers = { 0 }, components = { "block_input" },
    positions = { 1 }, dataset = ds, metric = function(logits) seen = logits:shape(); return logits:get(0, 11, 3) end })
  T.eq(seen, { 4, 13, task:vocab_size() })
  T.eq(fmap.metric, "function")
  T.near(fmap.values:get(0, 0), 1, 1e-4)
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { components = { "mlp_outptu" }, dataset = ds }) end,
    "did you mean 'blocks.0.mlp_output'")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { layers = { 2 } }) end, "layers in [0, 2)")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { positions = { 13 } }) end, "integers in [-13, 13)")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { metric = "kl", dataset = ds }) end, "expected 'prob', 'logprob', 'logit'")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { rows = { 1, 2 } }) end, "a list of 4 integers")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { rows = 3, targets = 999 }) end, "token ids in [0, 68)")
  T.raises(function() mech.interp.patching_map(m, clean, (ds:batch(0, 3))) end, "of the clean tokens' shape")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { posiitons = {} }) end, "did you mean 'positions'")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { dataset = ds, metric = function() return "x" end }) end,
    "returned string, expected a number")
end)

T.test("patching_map: the readout comes from the dataset's answers, or the map refuses", function()
  local m = tiny()
  local clean, corrupted = corrupt_first_key()
  local rows, targets = ic.readout(ds, 0, 4)
  local a = mech.interp.patching_map(m, clean, corrupted, { layers = { 1 }, positions = { 1 }, dataset = ds, chance = 0 })
  local b = mech.interp.patching_map(m, clean, corrupted, { layers = { 1 }, positions = { 1 }, rows = rows,
    targets = targets, chance = 0 })
  T.near(a.clean, b.clean, 1e-7)
  T.eq((a.values - b.values):abs():max():item(), 0)
  local c = mech.interp.patching_map(m, clean, corrupted, { layers = { 1 }, positions = { 1 }, rows = rows, chance = 0 })
  T.near(c.clean, b.clean, 1e-7) -- targets default to the token after each row
  T.raises(function() mech.interp.patching_map(m, clean, corrupted) end, "say where the answer is read: option 'dataset'")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { dataset = ds, first = 1 }) end,
    "clean example 0 is not document 1")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { dataset = ds, first = ds:size() }) end,
    "option 'first': expected documents")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { dataset = ds, rows = rows }) end, "not both")
  T.raises(function() mech.interp.patching_map(m, clean, corrupted, { dataset = 3 }) end, "a mech.Dataset")
end)

T.test("a model at chance: the map and ic.evaluate say its attributions are noise", function()
  local m = tiny() -- untrained: 0 % accuracy
  local clean, corrupted = ic.corrupt(ds, 0, 4)
  local map = mech.interp.patching_map(m, clean, corrupted, { layers = { 0 }, positions = { 1 }, dataset = ds })
  T.eq(map.accuracy, 0)
  T.truthy(map.warning and map.warning:find("attributions are noise", 1, true), map.warning)
  local res = ic.evaluate(m, ds, { layers = { 1 }, components = { "block_input" } })
  T.eq(res.accuracy, 0)
  T.truthy(res.chance > 0)
  T.truthy(res.warning and res.warning:find("attributions are noise", 1, true), res.warning)
  local label = "1.KEY.query_item_orig.target_item_orig.block_input"
  T.eq(res.passes[label], select(2, ic.attrib(res, label)))
end)

T.test("map:plot and plots/attribution_map.lua draw through mech.interp.plot_map", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local m = tiny()
  local clean, corrupted = ic.corrupt(ds, 0, 4)
  local map = mech.interp.patching_map(m, clean, corrupted, { chance = 0, dataset = ds })
  map:plot { out = dir .. "/map.png" }
  T.truthy(io.open(dir .. "/map.png"), "map.png")
  local csv = io.open(dir .. "/map.csv"):read("a") -- the plotted numbers
  T.truthy(csv:find("layer 1 block_output", 1, true), csv:sub(1, 200))
  T.raises(function() mech.interp.plot_map({ values = map.values }, { out = dir .. "/x.png" }) end, "field 'col_labels'")
  T.raises(function() map:plot { out = dir .. "/x.png", colour = "red" } end, "unknown option 'colour'")
  local xl = {}
  for j = 1, #map.col_labels do xl[j] = "tok" .. j end
  map:plot { out = dir .. "/lab.png", xlabels = xl, ylabels = map.sites }
  local lab = io.open(dir .. "/lab.csv"):read("a")
  T.truthy(lab:find("tok13", 1, true) and lab:find("blocks.1.block_output", 1, true), lab:sub(1, 300))
  T.eq(map.col_labels[1], "0", "the map keeps its own labels")
  T.raises(function() map:plot { out = dir .. "/x.png", xlabels = { "a" } } end, "option 'xlabels': expected a list of 13 labels")
  -- the paper's attribution figure from an evaluator CSV
  local res = ic.evaluate(m, ds, { layers = { 0, 1 } })
  ic.write_csv(res, dir .. "/ic.csv", 0, "test")
  arg = { dir .. "/attr.png", dir .. "/ic.csv" }
  dofile("plots/attribution_map.lua")
  T.truthy(io.open(dir .. "/attr.png"), "attr.png")
  local rows = io.open(dir .. "/attr.csv"):read("a")
  T.truthy(rows:find("layer 0 attention_output", 1, true), rows:sub(1, 200))
  os.execute("rm -rf " .. dir)
end)

local help = require "mech.help"

T.test("help: docs/api.md is the registry's text (regenerate: mechlab tools/gen_api_docs.lua)", function()
  local f = assert(io.open("docs/api.md", "rb"))
  local page = f:read("a")
  f:close()
  T.truthy(page == help.markdown(), "docs/api.md differs from lua/mech/help.lua: run mechlab tools/gen_api_docs.lua")
end)

T.test("help: every function of mech, method of its classes and function of mech.interchange has an entry", function()
  local missing = {}
  local function walk(t, prefix, seen)
    for k, v in pairs(t) do
      if type(v) == "function" and not help.by_name[prefix .. k] then missing[#missing + 1] = prefix .. k
      elseif type(v) == "table" and not seen[v] then
        seen[v] = true
        walk(v, prefix .. k .. ".", seen)
      end
    end
  end
  walk(mech, "mech.", { [mech] = true })
  for prefix, class in pairs(help.method_class) do
    local n = 0
    for name, v in pairs(help.methods(class)) do
      n = n + 1
      if type(v) == "function" and not help.by_name[prefix .. ":" .. name] then missing[#missing + 1] = prefix .. ":" .. name end
    end
    T.truthy(n > 0, class .. " has methods")
  end
  for name, v in pairs(ic) do
    if type(v) == "function" and not help.by_name["ic." .. name] then missing[#missing + 1] = "ic." .. name end
  end
  table.sort(missing)
  T.eq(missing, {}, "functions without an entry in lua/mech/help.lua")
  for _, e in ipairs(help.entries) do -- and every entry documents something that exists
    T.truthy(help.value_of(e), "entry " .. e.name .. " names nothing")
    T.truthy(e.signature ~= "" and e.description ~= "" and e.example ~= "", e.name)
  end
end)

T.test("help: every key of train.run's config has an entry with its default", function()
  local train = require "mech.train"
  local topic = help.text("mech.train")
  T.truthy(help.text("mech.train.run"):find("^train%.run%(config%)"), help.text("mech.train.run"))
  T.truthy(help.text(train.run):find("^train%.run%(config%)"))
  for key in pairs(train.config_keys()) do
    local e = help.by_name["mech.train.run." .. key]
    T.truthy(e, "train.run config key " .. key .. " has no entry")
    local default = train.default(key)
    if type(default) == "number" or type(default) == "boolean" then
      T.truthy(e.signature:find("(default " .. tostring(default) .. ")", 1, true), e.signature)
    elseif default == nil then
      T.truthy(e.signature:find("(no default)", 1, true), e.signature)
    end
    T.truthy(topic:find("train.run{" .. key .. " = ...}", 1, true), key .. " missing from help(\"mech.train\")")
    T.truthy(help.text("mech.train.run"):find(key, 1, true), key .. " missing from help(\"mech.train.run\")")
  end
  T.truthy(help.text("mech.train.run.learning_rate"):find("did you mean 'mech.train.run.lr'", 1, true),
    help.text("mech.train.run.learning_rate"))
end)

T.test("help(x): by value, by name, by topic, for a model or a cache, with did-you-mean", function()
  local m = tiny()
  local _, cache = m:run_with_cache(tok, { names = "block_input" })
  T.truthy(help.text(mech.zeros):find("^mech%.zeros%(shape"), help.text(mech.zeros))
  T.truthy(help.text(m.forward):find("^model:forward"), help.text(m.forward))
  T.truthy(help.text(cache.get):find("^cache:get"))
  T.truthy(help.text(mech.interp.patching_map):find("Example: local map = mech.interp.patching_map", 1, true))
  T.truthy(help.text(ic.evaluate):find("^ic%.evaluate"))
  T.truthy(help.text("model:unembed"):find("logit lens", 1, true))
  T.truthy(help.text("zeros"):find("^mech%.zeros"))
  T.truthy(help.text(m):find("model:run_with_cache", 1, true))
  T.truthy(help.text(cache):find("cache:names", 1, true))
  T.truthy(help.text(tok):find("mech.matmul", 1, true))
  T.truthy(help.text("mech.interp"):find("mech.interp.patching_map", 1, true))
  T.truthy(help.text():find("mech.interp", 1, true))
  T.eq(help.text("modle"), "help: no entry 'modle' (did you mean 'model'?)")
  T.eq(help.text(print), "help: no entry for this function (help() lists the topics)")
end)

T.test("did-you-mean: bounded, ranked by component then layer, a wrong layer named, arguments cut to 80 characters", function()
  local t0 = os.clock()
  local text = help.text(string.rep("x", 1 << 20))
  T.truthy(os.clock() - t0 < 2, "help with a 1 MiB string took " .. (os.clock() - t0) .. " s")
  T.truthy(#text < 300 and text:find("(1048576 characters)", 1, true), text:sub(1, 300))
  local m = tiny()
  local function err(f) local ok, e = pcall(f); T.falsy(ok); return e end
  local function patch_err(site) return err(function() mech.interp.patch(m, tok, { site = site, source = mech.zeros(1) }) end) end
  T.truthy(patch_err("blocks.2.hook_resid_pre"):find("blocks.2.hook_resid_pre': the model has 2 layers (0–1)", 1, true))
  T.truthy(patch_err("blocks.0.hook_attn"):find("did you mean 'blocks.0.hook_attn_out'", 1, true))
  T.truthy(patch_err("blocks.1.mlp_outptu"):find("did you mean 'blocks.1.mlp_output'", 1, true), "the layer given is kept")
  T.truthy(patch_err("blocks.1.mixer.pattren"):find("did you mean 'blocks.1.mixer.pattern'", 1, true))
  local long = patch_err(string.rep("y", 65536))
  T.truthy(#long < 400 and long:find("(65536 characters)", 1, true), long:sub(1, 400))
  local opt = err(function() mech.interp.patch(m, tok, { [string.rep("z", 5000)] = 1 }) end)
  T.truthy(#opt < 300, opt:sub(1, 300))
  local _, cache = m:run_with_cache(tok, { names = "block_input" })
  local miss = err(function() return cache[string.rep("w", 5000)] end)
  T.truthy(#miss < 400, miss:sub(1, 400))
end)

T.test("token ids as tables of integers everywhere; what would be silent is an error", function()
  local m = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = 20, seed = 1 }
  local tok, tg = { { 1, 2, 3, 4 } }, { { 2, 3, 4, 5 } }
  local ref = m:train_step(mech.adamw(m), mech.tensor(tok, { dtype = "int32" }), mech.tensor(tg, { dtype = "int32" }), 1e-3)
  local m2 = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = 20, seed = 1 }
  T.eq(m2:train_step(mech.adamw(m2), tok, tg, 1e-3).loss, ref.loss)
  T.eq(m2:evaluate(tok, tg).n, m2:evaluate(mech.tensor(tok, { dtype = "int32" }), mech.tensor(tg, { dtype = "int32" })).n)
  T.raises(function() m:forward({ { 1, 2.5, 3 } }) end, "bad argument #1 to 'model:forward' (expected integers in int32 range, got 2.5 at a leaf)")
  T.raises(function() m:train_step(mech.adamw(m), { { 1, 2 } }, "x", 1e-3) end, "bad argument #3 to 'model:train_step' (expected an int32 tensor or a table of integers, got 'x')")
  T.raises(function() mech.interp.short_conv_edit(m, "identity") end,
    "short_conv_edit: the model %(arch 'attention'%) has no short convolution")
end)

T.done()
