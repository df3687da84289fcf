-- Interventions from Lua: run_with_cache (activations and gradients), run_with_hooks, patching,
-- the interchange evaluator (names, CSV, fast = reference, mixer-internal sites), the training
-- evaluator, surgery, and the metric helpers on hand-computed cases.
local T = require "check"
local ic = require "mech.interchange"
local train = require "mech.train"

local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 } -- V = 68, 13 tokens
local ds = task:dataset(12, { seed = 1, split = "test" })

local function tiny(arch)
  return mech.model { arch = arch or "attention", d_model = 16, n_layers = 2, vocab = task:vocab_size(), seed = 5,
    state_mixer = "mlp" }
end

T.test("run_with_cache: the logits of forward, bit for bit, and the asked sites", function()
  local m = tiny()
  local tok = ds:batch(0, 3)
  local logits, cache = m:run_with_cache(tok, { names = { "blocks.1.attention_output", "blocks.0.mixer.pattern" } })
  T.truthy(logits:equal(m:forward(tok)))
  T.eq(cache["blocks.1.attention_output"]:shape(), { 3, 13, 16 })
  T.eq(cache["blocks.0.mixer.pattern"]:shape(), { 3, 1, 13, 13 })
  T.falsy(cache:has("blocks.0.block_input"))
  T.raises(function() return cache["blocks.0.block_input"] end, "is not in this cache")
  local _, all = m:run_with_cache(tok)
  local n = 0
  for _ in pairs(all) do n = n + 1 end
  T.eq(n, #m:hook_names())
  T.raises(function() m:run_with_cache(tok, { names = { "blocks.0.atention_output" } }) end,
    "did you mean 'blocks.0.attention_output'")
  T.raises(function() m:run_with_cache(tok, { nmes = {} }) end, "names")
  T.raises(function() m:run_with_cache(tok, { grads = true }) end, "targets")
end)

T.test("run_with_cache: gradients at sites match finite differences", function()
  local m = tiny()
  local tok = ds:batch(0, 2)
  local rows = mech.tensor({ 11, 11 }, { dtype = "int32" })
  local tg = mech.tensor({ tok:get(0, 12), tok:get(1, 12) }, { dtype = "int32" })
  local _, acts, grads = m:run_with_cache(tok, { names = { "blocks.0.attention_output" }, grads = true, rows = rows,
    targets = tg })
  local g = grads["blocks.0.attention_output"]
  T.eq(g:shape(), { 2, 13, 16 })
  local function objective(delta)
    local lg = m:run_with_hooks(tok, { ["blocks.0.attention_output"] = function(a)
      local b = a:clone()
      b:set(b:get(1, 4, 3) + delta, 1, 4, 3)
      return b
    end })
    local lp = mech.log_softmax(lg, 2)
    return lp:get(0, 11, tg:get(0)) + lp:get(1, 11, tg:get(1))
  end
  local eps = 1e-2
  T.near(g:get(1, 4, 3), (objective(eps) - objective(-eps)) / (2 * eps), 2e-3)
  T.eq(g:get(0, 12, 0), 0) -- after the readout row: no gradient
end)

T.test("run_with_hooks: an observing hook changes no bit; a replacement is used", function()
  local m = tiny()
  local tok = ds:batch(0, 2)
  local base = m:forward(tok)
  local seen = 0
  T.truthy(m:run_with_hooks(tok, { ["blocks.1.mlp_output"] = function() seen = seen + 1 end }):equal(base))
  T.eq(seen, 1)
  local zeroed = m:run_with_hooks(tok, { ["blocks.1.mlp_output"] = function(a) return a * 0 end })
  T.falsy(zeroed:equal(base))
end)

T.test("patch: clean into clean, and block_input of layer 0 everywhere is the source", function()
  for _, arch in ipairs { "attention", "mamba", "based" } do
    local m = tiny(arch)
    local base, src = ds:batch(0, 2), ds:batch(2, 2)
    local _, bc = m:run_with_cache(base)
    local _, sc = m:run_with_cache(src)
    local l0 = m:forward(base)
    for site, act in pairs(bc) do
      local h = m:hook_names()
      local ok = true
      for _, d in ipairs(h) do if d.name == site and d.shape[1] ~= "B" then ok = false end end
      if ok then
        T.truthy(mech.interp.patch(m, base, { site = site, source = act, pos = { 3, 7 } }):equal(l0), arch .. " " .. site)
      end
    end
    local p = mech.interp.patch(m, base, { site = "blocks.0.block_input", source = sc["blocks.0.block_input"] })
    T.truthy(p:equal(m:forward(src)), arch)
    local r = mech.interp.patch(m, base, { site = "blocks.1.attention_input", source = sc["blocks.1.attention_input"],
      pos = 5, reference = true })
    T.truthy(r:equal(mech.interp.patch(m, base, { site = "blocks.1.attention_input", source = sc["blocks.1.attention_input"],
      pos = 5 })), arch .. ": fast = reference")
  end
  local m = tiny()
  T.raises(function() mech.interp.patch(m, ds:batch(0, 2), { site = "blocks.0.block_input", source = mech.zeros(3, 3) }) end,
    "does not fit")
  T.raises(function() mech.interp.patch(m, ds:batch(0, 2), { site = "blocks.9.block_input", source = mech.zeros(3) }) end,
    "unknown hook site")
  -- the options in the one format, each read once
  local tok = ds:batch(0, 2)
  T.raises(function() mech.interp.patch(m, tok, { site = "blocks.0.block_input", source = 3 }) end,
    "bad argument #3 to 'mech.interp.patch' (option 'source': expected a tensor, got 3)")
  T.raises(function() mech.interp.patch(m, tok, { site = "blocks.0.block_input", source = mech.zeros(3), pos = "x" }) end,
    "bad argument #3 to 'mech.interp.patch' (option 'pos': expected nil, an integer or a list of 2 positions, got 'x')")
  T.raises(function() mech.interp.patch(m, tok, { site = 4 }) end,
    "bad argument #3 to 'mech.interp.patch' (option 'site': expected a string, got 4)")
  T.raises(function() mech.interp.patching_map(m, tok, tok, { rows = { 1, 1 }, reference = 1 }) end, "did you mean")
  T.raises(function() mech.interp.patching_map(m, tok, tok, { rows = { 1, 1 }, threshold = "high" }) end,
    "bad argument #4 to 'mech.interp.patching_map' (option 'threshold': expected a number, got 'high')")
  T.raises(function() mech.interp.patching_map(m, tok, tok, { rows = { 1, 1 }, metric = 7 }) end,
    "bad argument #4 to 'mech.interp.patching_map' (option 'metric': expected 'prob', 'logprob', 'logit' or a "
    .. "function(logits), got 7)")
  T.raises(function() mech.interp.interchange(m, ds, { count = "all" }) end,
    "bad argument #3 to 'mech.interp.interchange' (option 'count': expected an integer, got 'all')")
  T.raises(function() mech.interp.interchange(m, ds, { first = 1, count = math.maxinteger }) end, -- first + count overflowed
    "documents [1, 1 + 9223372036854775807) outside the dataset's 12")
  T.raises(function() mech.interp.patching_map(m, tok, tok, { dataset = ds, first = math.maxinteger, positions = { "key" } }) end,
    "option 'first': expected documents")
  -- (model, clean, options): a table without a list part is the options
  T.raises(function() mech.interp.patching_map(m, tok, { ablate = "max" }) end, "(option 'ablate': expected 'zero' or 'mean'")
  -- an option whose __index answers once, then nil: read once, the one value is used throughout
  -- (the dataset gave both the readout and the chance; a second read made the chance 1/V)
  local function once(key, v) local given = false; return setmetatable({ layers = { 0 }, positions = { 0 } }, {
    __index = function(_, k) if k == key and not given then given = true; return v end end }) end
  local a = mech.interp.patching_map(m, tok, tok, { dataset = ds, layers = { 0 }, positions = { 0 } })
  local b = mech.interp.patching_map(m, tok, tok, once("dataset", ds))
  T.eq({ b.chance, b.clean, a.threshold }, { a.chance, a.clean, 0.01 }) -- 0.01: ml_pm_options_init's
  T.truthy(math.abs(a.chance - 1 / m:config().vocab) > 1e-3)
end)

T.test("interchange: the paper's names, fast = reference, mixer-internal sites", function()
  for _, arch in ipairs { "attention", "mamba" } do
    local m = tiny(arch)
    local fast = ic.evaluate(m, ds, { batch = 5 })
    local ref = ic.evaluate(m, ds, { reference = true })
    T.eq(fast.n_combos, arch == "mamba" and 96 or 144)
    T.truthy(fast.corrupt_token:equal(ref.corrupt_token))
    T.truthy(mech.allclose(fast.restored_prob, ref.restored_prob, 1e-4, 2e-5), arch)
    T.truthy(fast.patched_examples < ref.patched_examples)
    for _, name in ipairs { "0.KEY.query_item_orig.next_key.block_input.restored_prob",
      "1.KEY.target_item_orig.query_item.attention_output.logit_diff",
      "corrupted.KEY.target_item_orig.divider.block_output.restored_logit",
      "original.KEY.query_item_orig.query_item.attention_input.restored_prob",
      "nothing.KEY.query_item_orig.target_item_orig.block_input.max_perc_layer",
      "1.KEY.query_item_orig.nothing.block_output.max_perc", "0.KEY.query_item_orig.divider.block_output.kl_div" } do
      T.truthy(fast.by_name[name], name)
    end
    local a, pass = ic.attrib(fast, "1.KEY.query_item_orig.target_item_orig.block_input")
    T.near(a, fast.by_name["1.KEY.query_item_orig.target_item_orig.block_input.attrib"], 1e-9)
    T.eq(type(pass), "boolean")
    -- inside the mixer (Mamba's conv output and SSM state; attention's q and pattern)
    local sites = arch == "mamba" and { "blocks.0.mixer.conv", "blocks.0.mixer.ssm_state" }
      or { "blocks.0.mixer.q", "blocks.1.mixer.pattern" }
    local fi = ic.evaluate(m, ds, { sites = sites, positions = { "next_key", "query_item" }, batch = 4 })
    local ri = ic.evaluate(m, ds, { sites = sites, positions = { "next_key", "query_item" }, reference = true })
    T.truthy(mech.allclose(fi.restored_prob, ri.restored_prob, 1e-4, 2e-5), arch .. " internal")
    T.truthy(fi.by_name[string.format("0.KEY.query_item_orig.next_key.%s.prob_diff", sites[1]:match("blocks%.%d+%.(.+)"))])
    local all = ic.sites(m, { layers = { 0 }, components = {}, mixer_sites = true })
    T.truthy(#all >= 5)
  end
  local m = tiny()
  T.raises(function() ic.evaluate(m, ds, { label_types = { "divider" } }) end, "query_item_orig or target_item_orig")
  T.raises(function() ic.evaluate(m, ds, { positions = { "nowhere" } }) end, "expected a position name")
  T.raises(function() ic.evaluate(m, ds, { layer = { 0 } }) end, "unknown option 'layer'")
  local small = mech.model { arch = "attention", d_model = 16, vocab = 20, state_mixer = "mlp" }
  T.raises(function() ic.evaluate(small, ds, {}) end, "the task's vocabulary %(68%) is larger than the model's %(20%)")
  T.raises(function() mech.interp.interchange(m, "x") end, "bad argument #2 to 'mech.interp.interchange' (a mech.Dataset expected, got 'x')")
end)

T.test("interchange: combinations in parallel give the one-thread bits", function()
  local old = mech.threads()
  local tok, tg = ds:batch(0, 4)
  local function with(opts, extra)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    for k, v in pairs(extra) do o[k] = v end
    return o
  end
  for _, arch in ipairs { "attention", "mamba" } do
    local m = tiny(arch)
    m:train_step(mech.adamw(m), tok, tg, 1e-2) -- weights away from their initialisation (workers copy them)
    for _, opts in ipairs { { batch = 5 }, { batch = 7, swap = true } } do
      mech.threads(1)
      local one = ic.evaluate(m, ds, with(opts, { workers = 1 }))
      local runs = { workers3 = ic.evaluate(m, ds, with(opts, { workers = 3 })), cores = ic.evaluate(m, ds, opts) }
      mech.threads(2)
      runs.threads2 = ic.evaluate(m, ds, opts)
      runs.threads2_serial = ic.evaluate(m, ds, with(opts, { workers = 1 }))
      for name, two in pairs(runs) do
        for _, k in ipairs { "restored_prob", "corrupted_prob", "restored_logit", "corrupted_logit", "kl_div",
          "corrupt_token" } do
          T.truthy(one[k]:equal(two[k]), arch .. " " .. name .. " " .. k)
        end
        T.eq(one.patched_examples, two.patched_examples)
      end
    end
  end
  mech.threads(old)
  T.raises(function() ic.evaluate(tiny(), ds, { workers = -1 }) end, "option 'workers': expected a count in %[1, 64%]")
end)

T.test("interchange CSV and the training-loop evaluator", function()
  local dir = os.tmpname()
  os.remove(dir)
  mech.sys.mkdir(dir)
  local m = tiny()
  local res = ic.evaluate(m, ds, { layers = { 1 }, components = { "block_input" } })
  ic.write_csv(res, dir .. "/ic.csv", 7, "test")
  local f = io.open(dir .. "/ic.csv")
  local header = f:read("l")
  local first = f:read("l")
  f:close()
  T.eq(header, "step,split,metric,value")
  T.truthy(first:match("^7,test,1%.KEY%.query_item_orig%.[a-z_]+%.block_input%.restored_prob,"), first)
  local seen = 0
  local out = dir .. "/run"
  train.run { model = { arch = "attention", d_model = 16, state_mixer = "mlp" }, task = task, train_docs = 64, eval_docs = 8, batch_size = 8,
    steps = 2, eval_every = 1, quiet = true, out = out,
    evaluators = { ic.evaluator { every = 2, layers = { 1 }, components = { "block_input" },
      on_result = function() seen = seen + 1 end } } }
  T.eq(seen, 2) -- steps 0 and 2
  local n = 0
  for line in io.lines(out .. "/metrics.csv") do
    if line:find("block_input.max_perc", 1, true) then n = n + 1 end
  end
  T.truthy(n > 0)
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("surgery, site means, implicit attention, attention mass, attribution patching", function()
  local m = tiny("mamba")
  T.eq(mech.interp.short_conv_edit(m, "identity"), 2)
  local _, c = m:run_with_cache(ds:batch(0, 2), { names = { "blocks.0.mixer.x", "blocks.0.mixer.conv" } })
  T.truthy(mech.allclose(c["blocks.0.mixer.x"], c["blocks.0.mixer.conv"], 0, 1e-7))
  T.eq(mech.interp.short_conv_edit(m, "truncate", { layer = 1, keep = 2 }), 1)
  T.raises(function() mech.interp.short_conv_edit(m, "remove") end,
    "bad argument #2 to 'mech.interp.short_conv_edit' (expected 'identity', 'zero' or 'truncate', got 'remove')")
  T.raises(function() mech.interp.short_conv_edit(m, "zero", { layer = true }) end,
    "bad argument #3 to 'mech.interp.short_conv_edit' (option 'layer': expected an integer, got boolean)")
  T.raises(function() mech.interp.mamba_attention(m, ds:batch(0, 2), 2) end,
    "bad argument #3 to 'mech.interp.mamba_attention' (expected a layer in [0, 2), got 2")
  T.raises(function() mech.interp.site_mean(m, ds, "blocks.0.block_input", { batch = 0.5 }) end,
    "bad argument #4 to 'mech.interp.site_mean' (option 'batch': expected an integer, got 0.5)")
  local a = mech.interp.mamba_attention(m, ds:batch(0, 2), 0)
  T.eq(a:shape(), { 2, 32, 13, 13 })
  T.eq(a:get(0, 0, 2, 5), 0) -- causal
  local mean = mech.interp.site_mean(m, ds, "blocks.1.attention_output")
  T.eq(mean:shape(), { 13, 16 })
  local mass = ic.attention_mass(tiny(), ds, { query = "query_item", key = "target_item_orig" })
  T.truthy(mass[0] > 0 and mass[0] < 1)
  local mm = ic.attention_mass(m, ds, {})
  T.truthy(mm[1] >= 0 and mm[1] <= 1)
  local att = tiny()
  local real = ic.evaluate(att, ds, {})
  local ap = ic.attribution_patching(att, ds, { real = real })
  T.truthy(ap.n == 144 and ap.correlation == ap.correlation)
end)

T.test("metric helpers: kl_div / |V|, max_perc ties, the corruption rule", function()
  local c, x = mech.tensor { 0, 1, 2 }, mech.tensor { 2, 0, 1 }
  local function lsm(v)
    local z = 0
    for i = 1, #v do z = z + math.exp(v[i]) end
    local out = {}
    for i = 1, #v do out[i] = v[i] - math.log(z) end
    return out
  end
  local lc, lx = lsm { 0, 1, 2 }, lsm { 2, 0, 1 }
  local kl = 0
  for i = 1, 3 do kl = kl + math.exp(lc[i]) * (lc[i] - lx[i]) end
  T.near(mech.interp.kl_div(c, x), kl / 3, 1e-6)
  T.eq(mech.interp.argmax({ 0.2, 0.2 }, { "divider", "query_item" }), 2)
  T.eq(mech.interp.argmax({ 0, 0 }, { "divider", "next_key" }), 3) -- "nothing" wins ties below it
  T.eq(mech.interp.argmax({ -1 }, { "query_item" }), 2)
  T.raises(function() mech.interp.argmax({ 1, 2 }, { "divider", 3 }) end,
    "bad argument #2 to 'mech.interp.argmax' (entry 2 expected a name, got number)")
  local g = mech.Generator(42, 7)
  local counts = {}
  for _ = 1, 6000 do
    local r = mech.interp.corrupt(3, 6, 4, g)
    counts[r] = (counts[r] or 0) + 1
  end
  T.eq(counts[4], nil)
  for _, v in ipairs { 3, 5, 6 } do T.truthy(math.abs(counts[v] - 2000) < 200, tostring(counts[v])) end
end)

T.test("attention mass and attribution patching in C: the wrappers' numbers, options and errors", function()
  local att, mamba = tiny(), tiny("mamba")
  local mass = mech.interp.attention_mass(att, ds, { query = "query_item", key = "target_item_orig", n = 6 })
  T.eq(mass, ic.attention_mass(att, ds, { query = "query_item", key = "target_item_orig", n = 6 }))
  local _, cache = att:run_with_cache(ds:batch(0, 6), { names = "pattern" })
  local pos = ds:positions(0, 6)
  for l = 0, 1 do
    local P, want = cache:get("pattern", l), 0
    for b = 0, 5 do
      for h = 0, P:size(1) - 1 do want = want + P:get(b, h, pos:get(b, 4), pos:get(b, 2)) end
    end
    T.near(mass[l], want / 6, 1e-9, "layer " .. l)
  end
  T.eq(next(mech.interp.attention_mass(tiny("h3"), ds)), nil) -- no attention to read
  T.raises(function() mech.interp.attention_mass(att, ds, { key = "keyy" }) end,
    "mech.interp.attention_mass: option 'key': expected a position name")
  T.raises(function() mech.interp.attention_mass(att, ds, { n = 0 }) end, "bad argument #3 to 'mech.interp.attention_mass' (option 'n': expected a positive number of documents, got 0)")
  T.raises(function() mech.interp.attention_mass(att, ds, { quer = 1 }) end, "did you mean 'query'")
  T.raises(function() mech.interp.attention_mass(ds, att) end, "bad argument #1 to 'mech.interp.attention_mass' (a mech.Model expected, got userdata)")
  local est = mech.interp.attribution_patching(mamba, ds, { sites = { "blocks.0.block_input", "blocks.1.mixer.x" },
    positions = { "query_item_orig", "divider" }, label_types = { "query_item_orig" }, n = 4 })
  T.eq(#est, 4)
  T.eq({ est[3].site, est[3].layer, est[3].component, est[3].label_type, est[3].position },
    { "blocks.1.mixer.x", 1, "mixer.x", "query_item_orig", "query_item_orig" })
  T.eq(est[2].estimate, 0) -- the embedding at the divider: clean and corrupted agree
  T.truthy(est[1].estimate ~= 0)
  local ap = ic.attribution_patching(mamba, ds, { sites = { "blocks.0.block_input" }, label_types = { "query_item_orig" },
    positions = { "divider" }, n = 4 })
  T.eq(ap.estimates["0.KEY.query_item_orig.divider.block_input"], 0)
  T.raises(function() mech.interp.attribution_patching(att, ds, { sites = { "blocks.0.block_input" }, positions = { "divider" },
    seed = 0.5 }) end, "bad argument #3 to 'mech.interp.attribution_patching' (option 'seed': expected an integer, got 0.5)")
  T.raises(function() mech.interp.attribution_patching(att, ds, { positions = { "divider" } }) end, "option 'sites' is required")
  T.raises(function() mech.interp.attribution_patching(att, ds, { sites = {} }) end, "option 'positions' is required")
  T.raises(function() mech.interp.attribution_patching(att, ds, { sites = { "blocks.9.block_input" }, positions = {} }) end,
    "unknown hook site 'blocks.9.block_input'")
  T.raises(function() mech.interp.attribution_patching(att, ds, { sites = { "blocks.0.block_input" }, positions = { "divider" },
    label_types = { "divider" } }) end, "expected query_item_orig or target_item_orig, got divider")
end)

T.test("attrib_se: the delta method's standard error of Attrib, from the per-example probabilities", function()
  -- AR has one query type (KEY), so every example counts; a few training steps, so that the
  -- original and corrupted probabilities are not the initial model's
  local big = task:dataset(64, { seed = 3, split = "test" })
  local m = tiny("mamba")
  local opt = mech.optim.adamw(m:parameters(), { lr = 3e-3 })
  local train_ds = task:dataset(64, { seed = 9 })
  for _ = 1, 30 do
    local tok, tgt = train_ds:batch(0, 64)
    opt:zero_grad()
    m:loss(tok, tgt):backward()
    opt:step()
  end
  local res = ic.evaluate(m, big, { layers = { 0, 1 }, components = { "block_input" }, workers = 1 })
  local N = #big
  local orig, rp, cp = res.original_prob:tolist()[1], res.restored_prob:tolist(), res.corrupted_prob:tolist()
  local checked = 0
  for k, c in ipairs(res.combos) do
    local label = string.format("%d.KEY.%s.%s.%s", c.layer, c.label_type, c.position, c.component)
    -- the group: this label type, position and component at every layer (the denominator's corrupted mean)
    local group = {}
    for j, g in ipairs(res.combos) do
      if g.label_type == c.label_type and g.position == c.position and g.component == c.component then group[#group + 1] = j end
    end
    local sd, se = 0, 0
    local d, e = {}, {}
    for i = 1, N do
      local cbar = 0
      for _, j in ipairs(group) do cbar = cbar + cp[j][i] end
      cbar = cbar / #group
      d[i], e[i] = rp[k][i] - cp[k][i], orig[i] - cbar
      sd, se = sd + d[i], se + e[i]
    end
    local R = sd / se
    T.near(R, res.by_name[label .. ".attrib"], 1e-6 * math.max(1, math.abs(R)), label)
    local ss = 0
    for i = 1, N do ss = ss + (d[i] - R * e[i]) ^ 2 end
    local want = math.sqrt(ss / (N * (N - 1))) / math.abs(se / N)
    local got = res.by_name[label .. ".attrib_se"]
    T.truthy(got and got >= 0, label)
    T.eq(select(3, ic.attrib(res, label)), got)
    T.near(got, want, 1e-6 * want + 1e-12, label)
    if want > 0 then checked = checked + 1 end
  end
  T.truthy(checked >= 8, checked)
end)

T.done()
