-- A mixer written in Lua inside the paper's language model (src/lua/mixer.c, docs/nn.md "Your own
-- mixer"): the model runs the module, its sites are the model's, it trains, saves, loads (in a
-- fresh process too, by its recorded module), resumes exactly, is patched and swept.
local T = require "check"
local Gate = require "mixer_gate" -- tests/lua/mixer_gate.lua, registered as "mixer_gate"
local train = require "mech.train"
local sweep = require "mech.sweep"
local ic = require "mech.interchange"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)
local exe = arg[-1]
local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  return p:close(), out
end

local task = mech.task.ar { num_kv = 8, min_length = 8, max_length = 8 } -- 13 tokens
local V = task:vocab_size()
local ds = task:dataset(8, { seed = 1, split = "test" })
local tok = ds:batch(0, 4)

local function tiny(extra)
  local o = { mixer = Gate, d_model = 16, n_layers = 2, vocab = V, seed = 3, scale = 0.5 }
  for k, v in pairs(extra or {}) do o[k] = v end
  return mech.model(o)
end

local function max_diff(a, b) return (a - b):abs():max():item() end

T.test("the model runs the module: its output at a block is the module's on the block's input", function()
  local m = tiny()
  T.eq(m:config().arch, "mixer_gate")
  T.eq(m:config().mixer_module, "mixer_gate")
  T.eq(m:config().mixer_options, '{"scale":0.5}')
  local _, cache = m:run_with_cache(tok)
  for l = 0, 1 do
    local g = Gate { d_model = 16 }
    g:set_parameter("W", m:param("blocks." .. l .. ".mixer.W"))
    g:set_parameter("g", m:param("blocks." .. l .. ".mixer.g"))
    local y = g(cache["blocks." .. l .. ".attention_input"])
    T.eq(max_diff(y, cache["blocks." .. l .. ".attention_output"]), 0, "layer " .. l)
  end
  -- the parameters live in the model (state-dict names under sequence_mixer), initialised from the seed
  T.eq(m:param("backbone.layers.1.sequence_mixer.g"):shape(), { 16 })
  T.eq(m:n_params(), tiny():n_params())
  T.eq(max_diff(m:param("blocks.1.mixer.W"), tiny():param("blocks.1.mixer.W")), 0)
  T.truthy(max_diff(m:param("blocks.1.mixer.W"), tiny { seed = 4 }:param("blocks.1.mixer.W")) > 0)
end)

T.test("custom inits run from the model's seed: {uniform}, {normal} and a function(t, gen)", function()
  local Init = mech.nn.Module:extend("InitKinds")
  function Init:init(o)
    self.u = self:param("u", { 4 }, { init = { uniform = { 2, 3 } } })
    self.f = self:param("f", { 4 }, { init = function(t, gen) t:copy_(mech.rand({ 4 }, { generator = gen }) + 10) end })
  end
  function Init:forward(x) return x * (self.u:mean() + self.f:mean()) end
  local a = mech.model { mixer = Init, d_model = 4, n_layers = 1, vocab = V, seed = 7 }
  local u, f = a:param("blocks.0.mixer.u"), a:param("blocks.0.mixer.f")
  T.truthy(u:min():item() >= 2 and u:max():item() <= 3, "uniform in [2, 3]")
  T.truthy(f:min():item() >= 10 and f:max():item() <= 11, "the function filled it")
  local b = mech.model { mixer = Init, d_model = 4, n_layers = 1, vocab = V, seed = 7 }
  T.eq(max_diff(b:param("blocks.0.mixer.f"), f), 0)
  local c = mech.model { mixer = Init, d_model = 4, n_layers = 1, vocab = V, seed = 8 }
  T.truthy(max_diff(c:param("blocks.0.mixer.f"), f) > 0)
  local Fails = mech.nn.Module:extend("InitFails")
  -- fails in the model's init only (the module's own construction passes the default generator)
  function Fails:init(o)
    self.w = self:param("w", { 2 }, { init = function(t, gen) if gen ~= mech.default_generator then error("no init") end end })
  end
  function Fails:forward(x) return x end
  T.raises(function() mech.model { mixer = Fails, d_model = 4, n_layers = 1, vocab = V } end,
    "model: mixer 'init_fails' layer 0: init: ")
end)

T.test("short-conv surgery finds a Lua mixer's nn.Conv1d (a parameter of kind conv_weight)", function()
  local Conv = mech.nn.Module:extend("ConvMixer")
  function Conv:init(o) self.conv = mech.nn.Conv1d(o.d_model, 3) end
  function Conv:forward(x) return self.conv(x) end
  local m = mech.model { mixer = Conv, d_model = 8, n_layers = 2, vocab = V, seed = 1 }
  T.eq(mech.interp.short_conv_edit(m, "identity"), 2)
  -- identity: the mixer passes its input through
  local _, c = m:run_with_cache(tok)
  T.near(max_diff(c["blocks.1.attention_output"], c["blocks.1.attention_input"]), 0, 1e-6)
end)

T.test("internal sites: hook_names, run_with_cache, and a replacing hook changes the output", function()
  local m = tiny()
  local names = {}
  for _, s in ipairs(m:hook_names("mixer")) do names[#names + 1] = s.name end
  T.eq(names, { "blocks.0.mixer.hook_gate", "blocks.0.mixer.hook_mix", "blocks.1.mixer.hook_gate",
    "blocks.1.mixer.hook_mix" })
  T.eq(m:hook_names("blocks.0.mixer.hook_gate")[1].shape, { "B", "L", 16 })
  local _, cache = m:run_with_cache(tok, { names = "hook_mix" })
  T.eq(cache["blocks.1.mixer.hook_mix"]:shape(), { 4, 13, 16 })
  -- hook_mix is the module's output: the block's attention_output
  local _, full = m:run_with_cache(tok)
  T.eq(max_diff(full["blocks.1.mixer.hook_mix"], full["blocks.1.attention_output"]), 0)
  local base = m:forward(tok)
  local seen = 0
  local same = m:forward(tok, { ["blocks.0.mixer.hook_gate"] = function(a) seen = seen + 1 end })
  T.eq(seen, 1)
  T.eq(max_diff(same, base), 0)
  local zeroed = m:forward(tok, { ["blocks.0.mixer.hook_gate"] = function(a) return a * 0 end })
  T.truthy(max_diff(zeroed, base) > 1e-4)
  -- persistent hooks too
  local h = m:add_hook("blocks.1.mixer.hook_gate", function(a) return a * 0 end)
  T.truthy(max_diff(m:forward(tok), base) > 1e-4)
  h:remove()
  T.eq(max_diff(m:forward(tok), base), 0)
  T.raises(function() m:forward(tok, { ["blocks.0.mixer.hook_gate"] = function(a) return a:narrow(2, 0, 3) end }) end,
    "blocks.0.mixer.hook_gate")
  T.raises(function() m:forward(tok, { ["blocks.0.mixer.hook_gat"] = function() end }) end,
    "did you mean 'blocks.0.mixer.hook_gate'")
end)

T.test("gradients through the Lua mixer: gradcheck and the parameters' .grad", function()
  local m = mech.model { mixer = Gate, d_model = 4, n_layers = 1, vocab = V, seed = 1 }
  local t = tok:narrow(0, 0, 1):narrow(1, 0, 5)
  local x0 = select(2, m:run_with_cache(t))["blocks.0.attention_input"]
  local x = x0:detach():clone():requires_grad_()
  local ok = mech.gradcheck(function(a)
    return m:forward(t, { ["blocks.0.attention_input"] = function() return a end })
  end, { x }, { eps = 1e-3, atol = 3e-3, rtol = 2e-2 })
  T.eq(ok, true)
  m:zero_grad()
  m:loss(t, t):backward()
  T.truthy(m:param("blocks.0.mixer.g").grad:abs():sum():item() > 0)
end)

T.test("a forward of the wrong shape, an error inside the module, a name taken: errors naming them", function()
  local nn = mech.nn
  local Bad = nn.Module:extend("BadWidth")
  function Bad:init(o) self.d = o.d_model end
  function Bad:forward(x) return x:narrow(2, 0, self.d - 1) end
  T.raises(function() mech.model { mixer = Bad, d_model = 8, n_layers = 1, vocab = V } end,
    "mixer 'bad_width' layer 0: forward returned a float32 tensor of shape [2,7,7], expected a float32 tensor of shape [2,7,8]")
  -- a module whose shape goes wrong only at run time: the error names the block and the shape
  local Late = nn.Module:extend("LateWidth")
  function Late:forward(x) return x:shape()[2] > 12 and x:narrow(1, 0, 1) or x end
  local m = mech.model { mixer = Late, d_model = 8, n_layers = 2, vocab = V }
  T.raises(function() m:forward(tok) end, "blocks.0.mixer (mixer 'late_width'): forward returned a float32 tensor of "
    .. "shape [4,1,8], expected a float32 tensor of shape [4,13,8] (the block input's)")
  local Err = nn.Module:extend("Throws")
  function Err:forward(x) if x:shape()[2] > 12 then error("boom") end return x end
  local e = mech.model { mixer = Err, d_model = 8, n_layers = 1, vocab = V }
  T.raises(function() e:forward(tok) end, "boom")
  T.eq(e:forward(tok:narrow(1, 0, 4)):shape(), { 4, 4, V }) -- and the model still runs
  local Att = nn.Module:extend("Attention")
  function Att:forward(x) return x end
  T.raises(function() mech.model { mixer = Att, d_model = 8, vocab = V } end, "'attention' is a built-in mixer")
  T.raises(function() mech.register_mixer(Att, { name = "mamba_without_conv" }) end, "alias of the built-in mixer")
  T.raises(function() mech.model { mixer = "no_such_mixer_module", d_model = 8, vocab = V } end,
    "'no_such_mixer_module' is no built-in or registered mixer")
  T.raises(function() mech.model { mixer = Gate, arch = "attention" } end, "give 'arch' or 'mixer', not both")
  T.raises(function() mech.model { mixer = Gate, d_model = 8, vocab = V, act = print } end, "mixer option 'act'")
  T.raises(function() mech.model { arch = "attention", scale = 2 } end, "unknown")
end)

T.test("mech.model{mixer = name or module} and built-in names give the same models", function()
  T.eq(mech.model { mixer = "mixer_gate", d_model = 16, n_layers = 2, vocab = V, seed = 3, scale = 0.5 }:forward(tok)
    :sub(tiny():forward(tok)):abs():max():item(), 0)
  local a = mech.model { mixer = "mamba", d_model = 16, n_layers = 1, vocab = V, seed = 2 }
  local b = mech.model { arch = "mamba", d_model = 16, n_layers = 1, vocab = V, seed = 2 }
  T.eq(a:config().arch, "mamba")
  T.eq(max_diff(a:forward(tok), b:forward(tok)), 0)
  T.eq(mech.model { mixer = "mamba_without_conv", d_model = 16, n_layers = 1, vocab = V }:config().no_conv, true)
  -- a built-in mixer's layer class is that mixer
  local c = mech.model { mixer = mech.nn.Mamba, d_model = 16, n_layers = 1, vocab = V, seed = 2 }
  T.eq(c:config().arch, "mamba")
  -- nn.LM is that model too
  local lm = mech.nn.LM { mixer = mech.nn.Mamba, d_model = 16, n_layers = 1, vocab = V, seed = 2 }
  T.eq(max_diff(lm:forward(tok), b:forward(tok)), 0)
  T.eq(max_diff(mech.nn.LM { mixer = Gate, d_model = 16, n_layers = 2, vocab = V, seed = 3, scale = 0.5 }:forward(tok),
    tiny():forward(tok)), 0)
  T.raises(function() mech.nn.LM { mixer = Gate, d_model = 0 } end, "mech.nn.LM: ")
  T.eq(max_diff(c:forward(tok), b:forward(tok)), 0)
end)

T.test("save and mech.load round-trip it; a fresh process loads it by its recorded module, when allowed", function()
  local m = tiny()
  local p = tmp .. "/gate.safetensors"
  m:save(p)
  local back = mech.load(p)
  T.eq(back:config().arch, "mixer_gate")
  T.eq(mech.load(p, { mixer = Gate }):config().arch, "mixer_gate")
  T.raises(function() mech.load(p, { mixer = "mamba" }) end, "option 'arch' is 'mamba' but the file's config has 'mixer_gate'")
  T.eq(max_diff(back:forward(tok), m:forward(tok)), 0)
  local ok, out = run(string.format("%q -e %q", exe,
    "local m = mech.load('" .. p .. "', {modules = {'mixer_gate'}}); print(m:config().arch, m:config().mixer_options, m:n_params())"))
  T.truthy(ok, out)
  T.eq(out, "mixer_gate\t{\"scale\":0.5}\t" .. m:n_params() .. "\n")
  -- the file alone never allows its module (docs/security.md); mech.allow_module does, as requiring it
  ok, out = run(string.format("%q -e %q", exe, "mech.load('" .. p .. "')"))
  T.truthy(not ok and out:find("names module 'mixer_gate', which this process has not loaded", 1, true), out)
  ok, out = run(string.format("%q -e %q", exe, "mech.allow_module('mixer_gate'); print(mech.load('" .. p
    .. "'):config().arch)"))
  T.truthy(ok and out == "mixer_gate\n", out)
  -- a module that cannot be required, a class never registered: errors naming them
  local Ghost = mech.nn.Module:extend("GhostMixer")
  function Ghost:forward(x) return x end
  mech.register_mixer(Ghost, { module = "no_such_module_xyz" })
  local g = mech.model { mixer = Ghost, d_model = 8, n_layers = 1, vocab = V }
  -- a module require cannot find is an error at save time, naming the fix
  T.raises(function() g:save(tmp .. "/ghost.safetensors") end,
    "save: mixer 'ghost_mixer' records module 'no_such_module_xyz', which require cannot find")
  T.falsy(mech.sys.exists(tmp .. "/ghost.safetensors"))
  local Anon = mech.nn.Module:extend("AnonMixer")
  function Anon:forward(x) return x end
  local anon = mech.model { mixer = Anon, d_model = 8, n_layers = 1, vocab = V }
  -- a class without a module (defined in a script): no other process could load it, so saving
  -- it is an error naming the fix, and no file is left
  T.raises(function() anon:save(tmp .. "/anon.safetensors") end,
    "save: mixer 'anon_mixer' was registered without a module (a class defined in a script)")
  T.falsy(mech.sys.exists(tmp .. "/anon.safetensors"))
  -- its parameters as a plain state dict (what a PyTorch user's file is), loaded with its config
  local sd = {}
  for _, np in ipairs(anon:named_parameters()) do sd[np[1]] = np[2] end
  mech.save_tensors(tmp .. "/anon.safetensors", sd)
  T.truthy(mech.load(tmp .. "/anon.safetensors", { arch = "anon_mixer", d_model = 8, n_layers = 1, vocab = V }))
  -- the class of that name changed: refused while a model uses the old one, then a file of the
  -- old shape is an error naming the parameter
  local Wide = mech.nn.Module:extend("AnonMixer")
  function Wide:init(o) self.extra = self:param("extra", { 3 }) end
  function Wide:forward(x) return x * 1 end
  T.raises(function() mech.register_mixer(Wide) end, "another class is registered as mixer 'anon_mixer' and models built")
  anon = nil
  T.eq(mech.register_mixer(Wide), "anon_mixer")
  T.raises(function() mech.load(tmp .. "/anon.safetensors", { arch = "anon_mixer", d_model = 8, n_layers = 1, vocab = V }) end,
    "parameter 'backbone.layers.0.sequence_mixer.extra' is missing")
end)

T.test("mech.train trains it and resumes exactly; interp patching at an internal site", function()
  local cfg = { model = { mixer = "mixer_gate", d_model = 16, n_layers = 2, scale = 0.5 }, task = task:spec(),
    train_docs = 64, eval_docs = 16, batch_size = 16, steps = 6, eval_every = 3, lr = 3e-3, quiet = true }
  local straight = train.run(cfg)
  local c1 = {}
  for k, v in pairs(cfg) do c1[k] = v end
  c1.out, c1.stop_at = tmp .. "/run", 3
  train.run(c1)
  local c2 = {}
  for k, v in pairs(cfg) do c2[k] = v end
  c2.out, c2.resume = tmp .. "/run", true
  local resumed = train.run(c2)
  T.eq(resumed.status, "done")
  T.eq(max_diff(resumed.model:forward(tok), straight.model:forward(tok)), 0)
  T.eq(straight.manifest.config.model.mixer, "mixer_gate")
  local m = straight.model
  local clean, corrupted = ic.corrupt(ds, 0, 4)
  local rows, targets = ic.readout(ds, 0, 4)
  local map = mech.interp.patching_map(m, clean, corrupted,
    { layers = { 1 }, components = { "block_input", "mixer.hook_gate" }, rows = rows, targets = targets, chance = 0 })
  T.eq(map.sites, { "blocks.1.block_input", "blocks.1.mixer.hook_gate" })
  local _, cc = m:run_with_cache(clean)
  local lg = mech.interp.patch(m, corrupted, { site = "blocks.1.mixer.hook_gate", source = cc["blocks.1.mixer.hook_gate"],
    pos = 2, reference = true })
  local lp, s = mech.log_softmax(lg, 2), 0
  for b = 0, 3 do s = s + math.exp(lp:get(b, rows:get(b), targets:get(b))) end
  T.near(map.patched:get(1, 2), s / 4, 1e-5)
  -- the paper's interchange evaluation, at the block sites and the mixer's own
  local res = ic.evaluate(m, ds, { mixer_sites = true })
  T.truthy(res.n_combos > 0)
  local keys = 0
  for k in pairs(res.by_name) do keys = keys + (k:find("mixer.hook_gate", 1, true) and 1 or 0) end
  T.truthy(keys > 0, "interchange metrics at the mixer's sites")
end)

T.test("the interchange evaluation of a Lua mixer has the same numbers for 1 and 3 workers", function()
  -- wide enough (48 documents x 13 positions x D = 64) that its ops split over the workers' threads
  local m = tiny { d_model = 64 }
  local big = task:dataset(48, { seed = 2, split = "test" })
  local ref = ic.evaluate(m, big, { workers = 1, mixer_sites = true })
  for _, w in ipairs { 3 } do
    local res = ic.evaluate(m, big, { workers = w, mixer_sites = true })
    T.eq(#res.metrics, #ref.metrics)
    for i, kv in ipairs(res.metrics) do
      T.eq(kv[1], ref.metrics[i][1])
      T.truthy(kv[2] == ref.metrics[i][2] or (kv[2] ~= kv[2] and ref.metrics[i][2] ~= ref.metrics[i][2]),
        kv[1] .. " with " .. w .. " workers")
    end
  end
  T.eq(mech.threads(), 1, "the evaluation gives the caller's thread count back")
end)

T.test("a sweep names the mixer by its module: ids stable from sweep.load to sweep.json, a worker trains it", function()
  local def = { name = "lua_mixer", base = { task = "ar_32", model = { mixer = "mixer_gate", n_layers = 1, d_model = 16,
    scale = 0.5 }, train_docs = 32, eval_docs = 16, batch_size = 16, steps = 2, eval_every = 2 },
    grid = { lr = { 1e-3, 3e-3 } } }
  local a = sweep.load(def)
  local dir = tmp .. "/sweep"
  sweep.run(def, { dir = dir, executor = "print" })
  local rec = require("mech.json").decode(mech.sys.read_file(dir .. "/sweep.json"))
  local ids = {}
  for _, r in ipairs(rec.runs) do ids[#ids + 1] = r.id end
  T.eq(ids, { a.runs[1].id, a.runs[2].id })
  T.eq(sweep.load(def).runs[2].id, a.runs[2].id)
  local ok, out = run(string.format("%q sweep exec %q %q --hash %s", exe, dir, a.runs[1].id,
    require("mech.sweep.store").definition_hash(a))) -- the definition vouches for the module it names
  T.truthy(ok, out)
  local man = require("mech.json").decode(mech.sys.read_file(dir .. "/runs/" .. a.runs[1].id .. "/manifest.json"))
  T.eq(man.status, "done")
  T.eq(man.model.arch, "mixer_gate")
end)

T.test("tie_embeddings = false: lm_head.weight of its own, counted, saved and loaded", function()
  local tied = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = V }
  local untied = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = V, tie_embeddings = false }
  T.eq(untied:n_params(), tied:n_params() + V * 16)
  T.eq(untied:config().tie_embeddings, false)
  local names = untied:named_parameters()
  T.eq(names[#names][1], "lm_head.weight")
  T.eq(untied:param("lm_head.weight"):shape(), { V, 16 })
  -- the head is that matrix: changing it changes the logits, not the embedding's
  local before = untied:forward(tok)
  local head = untied:param("lm_head.weight")
  mech.no_grad(function() head:copy_(head * 2) end)
  T.truthy(max_diff(untied:forward(tok), before) > 1e-4)
  local p = tmp .. "/untied.safetensors"
  untied:save(p)
  local back = mech.load(p)
  T.eq(back:config().tie_embeddings, false)
  T.eq(max_diff(back:forward(tok), untied:forward(tok)), 0)
  tied:save(tmp .. "/tied.safetensors")
  T.eq(mech.load(tmp .. "/tied.safetensors"):config().tie_embeddings, true)
  T.raises(function() mech.load(p, { arch = "attention", tie_embeddings = true }) end, "tie_embeddings")
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
