--- The API fuzzer: calls every function of `mech` and every method of its objects with random
--- and adversarial arguments. A call may raise a Lua error (that is the expected answer to bad
--- input); the fuzzer fails on anything else: a crash or a sanitizer report (the process dies;
--- the log's last line names the call), a call taking more than `slow` seconds of CPU time (not
--- wall time, which a busy machine stretches), or a leak
--- (LeakSanitizer at exit, under the sanitizer build). tests/fuzz/api_fuzz_run.lua runs it in
--- child processes and judges them (that is how CTest and a campaign run it).
---
---   mechlab tests/fuzz/api_fuzz.lua [seed=1] [calls=20000] [seconds=30] [slow=5] [dir=DIR] [log=FILE]
---
--- reach=FILE writes every function and method with the number of calls it got and how many of
--- them returned without an error ("name calls returned", one a line), so a campaign can show
--- what it reached.
---
--- Every call is written to the log (flushed) before it runs, so `tail -1 FILE` reproduces a
--- crash. Paths the fuzzer builds are under DIR (default: a fresh directory under /tmp); but any
--- string it passes may be taken as a relative path (`mech.sys.mkdir("nan")`), so run it from an
--- empty scratch directory: it refuses to start where it finds a CMakeLists.txt or a .git.
local opts = { seed = 1, calls = 20000, seconds = 30, slow = 5, dir = false, log = false, avoid = "",
  reach = false }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then error("api_fuzz.lua: unknown argument '" .. a .. "' (seed= calls= seconds= slow= dir= log= avoid= reach=)") end
  opts[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
end
for _, marker in ipairs { "CMakeLists.txt", ".git" } do
  local f = io.open(marker)
  if f then
    f:close()
    error("api_fuzz.lua: the current directory holds " .. marker .. "; run from an empty scratch directory "
      .. "(relative strings the fuzzer passes become files there)")
  end
end
local dir = opts.dir or string.format("/tmp/mechlab-fuzz-%d-%d", opts.seed, math.floor(mech.sys.time() * 1000) % 1000000)
mech.sys.mkdir(dir)
local logf = assert(io.open(opts.log or (dir .. "/calls.log"), "w"))

-- A generator of our own (Lua's, seeded) so that a seed replays the same calls.
math.randomseed(opts.seed)
local R = math.random
local function pick(list) return list[R(#list)] end

------------------------------------------------------------------------------------------------
-- Values

local huge_ints = { 0, 1, -1, 2, 3, 7, 8, 16, 31, 32, 33, 255, 2 ^ 31 - 1, 2 ^ 31, 2 ^ 32 + 5, 2 ^ 40, 2 ^ 53,
  math.maxinteger, math.mininteger, -2 ^ 40, -(2 ^ 31) }
for i, v in ipairs(huge_ints) do huge_ints[i] = math.tointeger(v) or v end
local odd_numbers = { 0.5, -0.0, 0 / 0, math.huge, -math.huge, 1e300, -1e-300, 1e-3, 3e-3, 0.01, 2.5 }

local names = {}        -- strings the API knows, collected below: sites, options, presets, archs
local function add_names(list) for _, n in ipairs(list) do names[#names + 1] = n end end
add_names { "attention", "mamba", "based", "h3", "hyena", "base_conv", "delta_net", "mamba_without_conv", "ar_32",
  "pcfg_5_20", "pcfg_tts", "sibling", "test", "train", "dev", "float32", "int32", "cosine", "linear", "key", "value",
  "query_item", "query_item_orig", "target_item", "target_item_orig", "divider", "next_key", "block_input",
  "attention_output", "mixer.q", "d_model", "n_layers", "vocab", "seed", "pos_emb", "d_conv", "lr", "steps",
  "out", "names", "rows", "targets", "grads", "objective", "prob", "sites", "layers", "components", "mean",
  "zero", "scale", "cell", "data", "values", "title", "series", "x", "y", "label", "categories", "1:3", "::2", ":",
  "mech.task_examples", "copy", "modular_addition", "<bos> k3 v7", "tokens", "sample",
  "-1:", "0:0", "optimizer", "meta", "label_types", "query", "key", "resid_pre", "hook_attn_out",
  "dataset", "first", "xlabels", "ylabels", "sci_mode", "auto", "blocks.0.hook_attn", "blocks.0.attn.W_Q",
  "max_new", "temperature", "top_k", "W_Q", "W_O", "W_U", "W_E", "b_O", "incl_mid", "incl_remainder", "apply_ln",
  "answers", "wrong", "z", "result", "hook_resid_mid", "blocks.1.hook_resid_mid", "mixer", "ablate", "resid_mid",
  "blocks.0.resid_mid",
  "tie_embeddings", "fuzz_mix", "mixer.hook_h", "module", "name", "precision", "bf16", "fp32", "bf17" }
local junk_strings = { "", "x", "\0", "\xff\xfe\xfd", string.rep("a", 5000), string.rep("\0\xff", 2 ^ 19), "blocks.",
  "blocks.99.block_input",
  "blocks.-1.block_input", "%s%s%n", "nan", "1e999", "  ", "a.b.c.d.e.f" }

local function path()
  local ext = pick { ".png", ".svg", ".pdf", ".csv", ".safetensors", ".json", "", ".txt" }
  local p = dir .. "/" .. pick { "a", "b", "sub/c", "sub/deeper/d", "ro" } .. ext
  return p
end

local function rand_string()
  local k = R(10)
  if k <= 5 then return pick(names) elseif k <= 7 then return path() else return pick(junk_strings) end
end

local pool = {}         -- objects by kind: tensor, model, task, dataset, generator, adamw, hook, metrics, optim
local function add(kind, obj) pool[kind] = pool[kind] or {}; local l = pool[kind]; l[#l + 1] = obj end
local value             -- forward declaration
local sites = {}

local function rand_number()
  local k = R(10)
  if k <= 5 then return R(0, 6) - 1 elseif k <= 8 then return pick(huge_ints) else return pick(odd_numbers) end
end

-- A metatable that makes t answer differently on every read: an __index that gives a value and
-- then nil (an option read twice once passed NULL to strcmp), one that raises, a __pairs that
-- raises, a __len that changes (shapes are read with luaL_len), or honest defaults behind __index.
local function hostile_meta(t)
  local answers = { pick(names), rand_number(), "float32", true, pick(names) }
  local reads = 0
  local k = R(5)
  if k == 1 then
    return setmetatable(t, { __index = function()
      reads = reads + 1
      if reads % 2 == 1 then return answers[(reads // 2) % #answers + 1] end
    end })
  elseif k == 2 then
    return setmetatable(t, { __index = function(_, key) error("error raised inside __index for " .. tostring(key)) end })
  elseif k == 3 then
    return setmetatable(t, { __pairs = function() error("error raised inside __pairs") end,
      __index = function(_, key) return key == "dtype" and "int32" or nil end })
  elseif k == 4 then
    return setmetatable(t, { __len = function() reads = reads + 1; return pick { 2, 9, -1, 2 ^ 40, 0, 3 } end,
      __index = function(_, i) return type(i) == "number" and (reads % 2 == 1 and 2 or nil) or nil end })
  end
  local defaults = {}
  for i = 1, 3 do defaults[pick(names)] = answers[i] end
  return setmetatable(t, { __index = defaults })
end

local function rand_table(depth)
  if R(6) == 1 then
    local t = {}
    for _ = 1, R(0, 2) do t[pick(names)] = rand_number() end
    return hostile_meta(t)
  end
  local k = R(8)
  if k == 1 then return {} end
  if k == 2 then return { R(0, 4), R(0, 4), R(0, 4) } end
  if k == 3 then return { { R(0, 3), R(0, 3) }, { R(0, 3), R(0, 3) } } end
  if k == 4 then
    local t = {}
    t[1] = t -- a cycle
    return t
  end
  if k == 5 and depth < 3 then
    local t = {}
    for _ = 1, R(0, 4) do t[#t + 1] = value(depth + 1) end
    return t
  end
  -- an options table: known keys, random values
  local t = {}
  for _ = 1, R(0, 4) do
    local key = pick(names)
    if depth < 3 then t[key] = value(depth + 1) else t[key] = rand_number() end
  end
  return t
end

local callbacks = {
  function() end,
  function() error("error raised inside a callback") end,
  function(x) return x end,
  function() return mech.zeros(1) end,
  function() collectgarbage() end,
  function() -- closes a model from inside its own hook or callback
    local m = pool.model and pick(pool.model)
    if m then pcall(function() local mt = getmetatable(m); if mt and mt.__close then mt.__close(m) end end) end
  end,
  function() return pick(pool.tensor or { 0 }) end,
}

function value(depth)
  depth = depth or 0
  local k = R(20)
  if k <= 1 then return nil end
  if k <= 2 then return R(2) == 1 end
  if k <= 7 then return rand_number() end
  if k <= 9 then return rand_string() end
  if k <= 11 then return rand_table(depth) end
  if k <= 12 then return pick(callbacks) end
  -- an object of any kind, tensors most often
  local kinds = { "tensor", "tensor", "tensor", "tensor", "model", "task", "dataset", "generator", "adamw", "hook",
    "metrics", "optim", "mixer" }
  local l = pool[pick(kinds)]
  if l and #l > 0 then return pick(l) end
  return rand_number()
end

------------------------------------------------------------------------------------------------
-- Issue 43's surfaces: module search (require, mech.load's modules, mech.allow_module, mech.find)
-- and the Lua-mixer contract. Made once per process.

-- Modules in the working directory (the child's scratch directory, on require's path): a mixer
-- registered with its module, one wrong at length 5, and modules that raise (a message, a table),
-- register nothing, register another name, or do not parse. Their names have one length, so a
-- checkpoint of the first becomes one naming each of the others by replacing the name.
local mixer_module = [[
local C = mech.nn.Module:extend("FzSearch_%s")
function C:init(o) self.w = self:param("w", { o.d_model }, { init = "ones" }) end
function C:forward(x)
  if %s and x:shape()[2] == 5 then return mech.zeros(1, 1) end
  return mech.cumsum(x * self.w, 1)
end
mech.nn.register_mixer(C, { name = "fzsearch_%s", module = "fuzzmod_%s" })
return C
]]
local search_modules = {
  ok = mixer_module:format("ok", "false", "ok", "ok"),
  bd = mixer_module:format("bd", "true", "bd", "bd"),
  wr = mixer_module:format("wr", "false", "other", "wr"),
  er = 'error("error raised while loading fuzzmod_er")',
  tb = "error({})",
  ni = "return nil",
  sy = "return function(",
}
local search_keys = { "ok", "bd", "wr", "er", "tb", "ni", "sy", "zz" } -- zz: no such file
for key, source in pairs(search_modules) do
  local f = assert(io.open("fuzzmod_" .. key .. ".lua", "w"))
  f:write(source)
  f:close()
end
local search_ckpts = {}
do
  require "fuzzmod_ok"
  local m = mech.model { mixer = "fzsearch_ok", d_model = 8, n_layers = 1, vocab = 16, seed = 1 }
  local good = dir .. "/search_ok.safetensors"
  m:save(good)
  local bytes = mech.sys.read_file(good)
  for _, key in ipairs(search_keys) do
    local p = dir .. "/search_" .. key .. ".safetensors"
    local f = assert(io.open(p, "wb"))
    f:write((bytes:gsub("fuzzmod_ok", "fuzzmod_" .. key):gsub("fzsearch_ok", "fzsearch_" .. key)))
    f:close()
    search_ckpts[#search_ckpts + 1] = p
  end
end
local odd_module_names = { "", ".", "..", "../fuzzmod_ok", "./fuzzmod_ok", "fuzzmod_ok.lua", "/etc/passwd", "fuzzmod_ok\0x",
  "%", "?", ";;", "a..b", ".fuzzmod_ok", "fuzzmod_ok.", string.rep("m.", 2000), "mech", "mech.trust", "mech.nn.block",
  "mech.no_such_module", "experiments.own_mixer", "experiments.own_mixer.extra", "experiments/own_mixer", "fuzzmod_ok",
  "fuzzmod_bd", "fuzzmod_wr", "fuzzmod_er", "fuzzmod_tb", "fuzzmod_ni", "fuzzmod_sy", "fuzzmod_zz" }
local odd_paths = { "experiments/own_mixer.lua", "fuzzmod_ok.lua", "", "/", ".", "..", "experiments",
  "experiments/../CMakeLists.txt", "/etc/passwd", "no/such/file.lua", string.rep("a/", 3000), "\0", "fuzzmod_ok.lua\0x",
  "plots/paper", "lua/mech/trust.lua" }

-- Lua mixers that break the contract at length 5 only (so that the model's probes pass): nil, a
-- table, a number, a string, a model, a closed tensor, another shape, another dtype, and errors
-- raised as a message, a table and nil. A call that raises must name the layer and the class.
local contract_wrongs = {
  function() return nil end,
  function() return {} end,
  function() return 3 end,
  function() return "y" end,
  function() return pool.model and pool.model[1] end,
  function() local t = mech.zeros(2, 5, 8); getmetatable(t).__close(t); return t end,
  function() return mech.full({ 1, 1 }, 0.5) end,
  function(x) return mech.zeros({ x:shape()[1], 1, 8 }):requires_grad_() end,
  function(x) return mech.zeros(x:shape(), { dtype = "int32" }) end,
  function() error("error raised inside a mixer", 0) end,
  function() error({}) end,
  function() error(nil) end,
}
local contract_classes = {}
for i, wrong in ipairs(contract_wrongs) do
  local C = mech.nn.Module:extend("FuzzContract" .. i)
  function C:init(o) self.w = self:param("w", { o.d_model }, { init = "ones" }) end
  function C:forward(x)
    if x:shape()[2] == 5 then return wrong(x) end
    return x * self.w
  end
  contract_classes[i] = C
end
local contract = {} -- models and mech.nn trees around them, rebuilt with the pool (out of the pool: no
                    -- random call hooks or closes them, so their errors can only be the contract's)

------------------------------------------------------------------------------------------------
-- The objects to start from (rebuilt when the pool runs dry; a call may close them)

local function build_pool()
  pool = {}
  local t = {
    mech.zeros(0), mech.zeros(3), mech.randn(2, 3), mech.arange(12):reshape(3, 4):float(),
    mech.arange(24):reshape(2, 3, 4):float():transpose(0, 2), mech.ones(1):expand(4, 5),
    mech.arange(10), mech.tensor(1.5), mech.randn(4, 4):requires_grad_(true), mech.full({ 2, 2 }, 0 / 0),
    mech.randn(2, 8, 16), mech.arange(6):reshape(2, 3),
  }
  for _, x in ipairs(t) do add("tensor", x) end
  add("tensor", t[4][{ "0:3:2", 1 }])
  local ar = mech.task.ar { num_kv = 32, length = 8 }
  add("task", ar)
  local ok, atr = pcall(mech.task.preset, "pcfg_5_20", 1)
  if ok then add("task", atr) end
  add("dataset", ar:dataset(8))
  if ok then add("dataset", atr:dataset(8)) end
  -- MQAR (several readouts per document), in both streams
  local mq = mech.task.mqar { vocab_size = 32, input_seq_len = 16, num_kv_pairs = 3, power_a = 0.5, seed = 2 }
  local mqn = mech.task.mqar { vocab_size = 32, input_seq_len = 16, num_kv_pairs = 3, rng = "numpy" }
  add("task", mq)
  add("task", mqn)
  add("dataset", mq:dataset(8))
  add("dataset", mqn:dataset(8, { seed = 1 }))
  -- tasks made outside C: written in Lua (a module's) and read from a JSON-lines file
  local lt = mech.task.load("mech.task_examples", { n_symbols = 4 }, 3, "copy")
  add("task", lt)
  add("dataset", lt:dataset(8))
  local bt = mech.task.load("mech.task_examples", { n_keys = 16, n_pairs = 3 }, 3, "associative_recall") -- sample_batch
  add("task", bt)
  add("dataset", bt:dataset(8))
  local jp = dir .. "/pool.jsonl"
  ar:dataset(4):write_jsonl(jp)
  local text = mech.sys.read_file(jp)
  local cut = R(#text)
  local f = assert(io.open(dir .. "/bad.jsonl", "wb"))
  f:write(text:sub(1, cut - 1), string.char(R(0, 255)), text:sub(cut + 1, R(cut, #text)))
  f:close()
  local jt = mech.task.from_jsonl(jp)
  add("task", jt)
  add("dataset", jt:dataset())
  -- a task with position names of its own (issue 43: `bridge`, `hop`), and its JSON-lines copy
  local th = mech.task.load("mech.task_examples", { n_keys = 4, n_pairs = 2 }, 5, "two_hop")
  add("task", th)
  add("dataset", th:dataset(8))
  local thp = dir .. "/two_hop.jsonl"
  th:dataset(4):write_jsonl(thp)
  local ok_th, tj = pcall(mech.task.from_jsonl, thp)
  if ok_th then add("task", tj); add("dataset", tj:dataset()) end
  for _, arch in ipairs { "attention", "mamba", "based", "h3", "hyena", "base_conv", "delta_net" } do
    local m = mech.model { arch = arch, d_model = 8, n_layers = 2, vocab = ar:vocab_size() }
    add("model", m)
    if arch == "attention" or arch == "mamba" then
      -- caches (their analysis methods), before a hook that may raise: full, and partial
      add("cache", select(2, m:run_with_cache(mech.tensor({ { 1, 2, 3 } }, { dtype = "int32" }),
        arch == "mamba" and { names = "block_input" } or nil)))
      add("adamw", mech.adamw(m))
      add("hook", m:add_hook("blocks.0.block_input", pick(callbacks)))
    end
  end
  -- a mixer written in Lua (src/lua/mixer.c) and a model around it; the class itself is a value too
  local FuzzMix = mech.nn.Module:extend("FuzzMix")
  function FuzzMix:init(o)
    self.w = self:param("w", { o.d_model }, { init = "ones" })
    self.hook_h = mech.nn.HookPoint()
  end
  function FuzzMix:forward(x) return mech.cumsum(self.hook_h(x * self.w), 1) end
  add("mixer", FuzzMix)
  local ok_mix, fm = pcall(mech.model, { mixer = FuzzMix, d_model = 8, n_layers = 2, vocab = ar:vocab_size() })
  -- a call may have stored an earlier pool's fuzz_mix model where it stays alive (module:_adopt),
  -- so that name cannot take the new class: build with the class registered under it
  add("model", ok_mix and fm or mech.model { mixer = "fuzz_mix", d_model = 8, n_layers = 2, vocab = ar:vocab_size() })
  add("model", mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = ar:vocab_size(),
    tie_embeddings = false })
  -- a bf16 model (where the CPU has AVX512_BF16): every method on it, its backward included
  local ok_bf, bf = pcall(mech.model, { arch = pick { "attention", "mamba", "hyena" }, d_model = 8, n_layers = 2,
    vocab = ar:vocab_size(), precision = "bf16" })
  if ok_bf then add("model", bf) end
  -- closed objects: every method must refuse them
  local closed_t, closed_m = mech.zeros(2, 2), mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 16 }
  getmetatable(closed_t).__close(closed_t)
  getmetatable(closed_m).__close(closed_m)
  add("tensor", closed_t)
  add("model", closed_m)
  add("generator", mech.Generator(1))
  -- mech.optim: over a model (AdamW), and over leaves with gradients (SGD with momentum, two groups)
  add("optim", mech.optim.adamw(pool.model[1], { lr = 1e-3 }))
  local w, b = mech.randn(3, 4):requires_grad_(true), mech.randn(4):requires_grad_(true)
  w.grad, b.grad = mech.randn(3, 4), mech.randn(4)
  add("tensor", w)
  add("optim", mech.optim.sgd({ { params = { w } }, { params = { b }, weight_decay = 0.1 } }, { lr = 0.1, momentum = 0.9 }))
  add("metrics", mech.sys.metrics(dir .. "/metrics.csv"))
  -- mech.nn: layers, a block around a built-in mixer, a tree (module methods are called on them)
  local nn = mech.nn
  add("module", nn.Linear(8, 8))
  add("module", nn.Block { d_model = 8, mixer = nn.Attention { d_model = 8 } })
  add("module", nn.Mamba { d_model = 8 })
  add("module", nn.Sequential(nn.Conv1d(8, 3), nn.RMSNorm(8), nn.MLP { d_model = 8, kind = "glu" }))
  add("tensor", mech.randn(2, 3, 8))
  -- a model of a mixer found by module search, reloaded from its checkpoint
  local ok_load, lm = pcall(mech.load, search_ckpts[1])
  if ok_load then add("model", lm) end
  contract = { models = {}, modules = {} }
  for _ = 1, 2 do
    local i, j = R(#contract_classes), R(#contract_classes)
    contract.models[#contract.models + 1] = mech.model { mixer = contract_classes[i], d_model = 8, n_layers = 2, vocab = 16 }
    contract.modules[#contract.modules + 1] = nn.Sequential(nn.Block { d_model = 8, mixer = contract_classes[i],
      state_mixer = contract_classes[j] })
  end
  sites = {} -- hook names of the pool's models and of a module tree (for shaped calls)
  for _, s in ipairs(pool.model[1]:hook_names()) do names[#names + 1] = s.name; sites[#sites + 1] = s.name end
  for _, s in ipairs(pool.model[2]:hook_names()) do names[#names + 1] = s.name; sites[#sites + 1] = s.name end
  for _, s in ipairs(pool.module[2]:hook_names()) do sites[#sites + 1] = s end
end

------------------------------------------------------------------------------------------------
-- The callables: every function reachable from `mech`, every method of every object kind

local callables = {}
-- Left out: calls that act on other processes or wait by design (a random pid may be the
-- runner's; sleep(255) is no defect). Paths are confined by path(), so mkdir and writers stay in.
local skip = { ["mech.sys.kill"] = true, ["mech.sys.spawn"] = true, ["mech.sys.wait"] = true,
  ["mech.sys.sleep"] = true }
local function collect(prefix, t, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  -- in sorted order: a table reached by two paths (mech.nn's classes share their base) gets the
  -- same name in every process, so the list, and what a seed calls, does not vary with the hash seed
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = t[k]
    local name = prefix .. "." .. tostring(k)
    if type(v) == "function" and not skip[name] then
      callables[#callables + 1] = { name = name, fn = v }
    elseif type(v) == "table" and type(k) == "string" then
      collect(name, v, seen)
    end
  end
end
collect("mech", mech)
collect("mech.nn", mech.nn) -- loaded on first use, so not among mech's own fields
callables[#callables + 1] = { name = "require", fn = require } -- module search (issue 43)

local methods = {}      -- kind -> {{name, fn}}
local function methods_of(kind, obj)
  local mt = getmetatable(obj)
  if type(mt) ~= "table" then return end
  local m = mt.methods or mt.__methods or (type(mt.__index) == "table" and mt.__index) or {}
  local list = {}
  for k, v in pairs(m) do if type(v) == "function" then list[#list + 1] = { name = kind .. ":" .. k, fn = v } end end
  for _, mm in ipairs { "__add", "__sub", "__mul", "__div", "__pow", "__mod", "__idiv", "__unm", "__index", "__newindex", "__len",
    "__tostring", "__close" } do
    if type(mt[mm]) == "function" then list[#list + 1] = { name = kind .. "." .. mm, fn = mt[mm] } end
  end
  table.sort(list, function(a, b) return a.name < b.name end)
  methods[kind] = list
end

build_pool()
table.sort(callables, function(a, b) return a.name < b.name end)
for kind, list in pairs(pool) do methods_of(kind, list[1]) end
-- a module's methods are its class's (the instance's __index is a function)
for k, v in pairs(mech.nn.Module) do
  if type(v) == "function" and not k:match("^__") then methods.module[#methods.module + 1] = { name = "module:" .. k, fn = v } end
end
methods.module[#methods.module + 1] = { name = "module()", fn = function(m, ...) return m(...) end } -- its forward
table.sort(methods.module, function(a, b) return a.name < b.name end)

------------------------------------------------------------------------------------------------
-- Shaped calls: arguments of the right kinds (one of them then replaced at random), so that the
-- deeper code of a function runs, not only its argument checks. Functions with many preconditions
-- otherwise almost never return.

local by_name = {}
for _, c in ipairs(callables) do by_name[c.name] = c end
for _, l in pairs(methods) do for _, c in ipairs(l) do by_name[c.name] = c end end

local function tokens(B, L)
  B, L = B or R(1, 2), L or R(1, 6)
  local rows = {}
  for b = 1, B do
    rows[b] = {}
    for t = 1, L do rows[b][t] = R(0, 7) end
  end
  return mech.tensor(rows, { dtype = "int32" })
end
local function site() return pick(sites) end
local samplers = {
  function(gen) return { tokens = { 1, 2 + gen:below(2) }, targets = { 1 } } end,
  function(gen) return { tokens = { 0, 1, 2, 3 }, targets = { gen:below(4) }, positions = { a = 0, b = 3 } } end,
  function() return { tokens = { 1, 99 }, targets = { 0 } } end,
  function() return { tokens = {}, targets = {} } end,
  function() error("error raised inside a sampler") end,
  function() return pick(pool.tensor) end,
}
local shaped = {
  { "mech.interp.implicit_attention", function() return { pick(pool.model), tokens(), R(0, 2) } end },
  { "mech.interp.path_patch", function()
    local B, L, m = R(1, 2), R(1, 6), pick(pool.model)
    local ok, hn = pcall(function() return m:hook_names() end) -- the model's own sites, a receiver mostly in layer 1
    local function from(prefix)
      if not ok then return site() end
      for _ = 1, 8 do
        local name = pick(hn).name
        if name:sub(1, #prefix) == prefix then return name end
      end
      return pick(hn).name
    end
    return { m, tokens(B, L), tokens(B, L), { sender = from("blocks.0."), receiver = from("blocks.1."),
      sender_head = R(3) == 1 and R(0, 1) or -1, receiver_head = R(3) == 1 and R(0, 1) or -1 } }
  end },
  { "model:weight", function()
    return { pick(pool.model), pick { "W_Q", "W_K", "W_V", "W_O", "b_O", "W_E", "W_pos", "W_U" }, R(0, 2) }
  end },
  { "model:generate", function()
    return { pick(pool.model), tokens(), { max_new = R(0, 4), temperature = pick { 0, 0.7, 1, 0 / 0, -1, 1e-30 },
      top_k = R(0, 5), seed = R(0, 9) } }
  end },
  { "task:to_tokens", function()
    local t = pick(pool.task)
    local ok, names = pcall(t.to_str_tokens, t, tokens())
    local text = ok and table.concat(names[1], " ") or "<bos> k3 v7"
    return { t, R(2) == 1 and text or { text, text .. " " .. text } }
  end },
  { "mech.task.new", function()
    return { { name = pick { "fz", "copy", "" }, vocab = R(0, 6), seed = R(0, 3), sample = pick(samplers),
      positions = R(2) == 1 and { "a", "b" } or nil, holdout = R(3) == 1 and value() or nil } }
  end },
  { "mech.task.from_jsonl", function()
    return { pick { dir .. "/pool.jsonl", dir .. "/bad.jsonl" }, R(2) == 1 and { vocab = R(0, 80) } or nil }
  end },
  { "dataset:write_jsonl", function() return { pick(pool.dataset), path() } end },
  { "mech.viz.attention", function()
    return { { pattern = pick { pick(pool.cache), mech.rand(2, 4, 4), mech.rand(1, 2, 3, 3) }, out = dir .. "/view.html",
      example = R(0, 2) - 1, tokens = R(2) == 1 and { "a", "b", "c", "d" } or nil } }
  end },
  { "mech.viz.attention_grid", function()
    return { { pattern = pick { pick(pool.cache), mech.rand(2, 4, 4) }, out = dir .. "/grid" .. pick { ".png", ".svg" } } }
  end },
  { "cache:logit_attrs", function()
    local c = pick(pool.cache)
    local ok, stack = pcall(c.decompose_resid, c)
    return { c, ok and stack or value(), { answers = R(0, 8) - 1, wrong = R(0, 8) - 1 } }
  end },
  { "mech.nn.LM", function()
    return { { mixer = pick { pool.mixer[1], "attention", mech.nn.Mamba, "no_such" }, d_model = pick { 8, 6, 0 },
      n_layers = R(0, 2), vocab = R(0, 40) } }
  end },
  { "module()", function() return { pick(pool.module), R(4) == 1 and pick(pool.tensor) or mech.randn(R(1, 2), R(1, 5), 8) } end },
  -- option tables whose metatables answer differently on each read (hostile_meta) in the calls
  -- that read options through mlL_options: the constructors
  { "mech.zeros", function() return { R(0, 3), R(0, 3), hostile_meta({}) } end },
  { "mech.randn", function() return { R(0, 3), hostile_meta(R(2) == 1 and {} or { dtype = "float32" }) } end },
  { "mech.full", function() return { { R(0, 3) }, rand_number(), hostile_meta({}) } end },
  { "module:run_with_cache", function() return { pick(pool.module), mech.randn(R(1, 2), R(1, 5), 8), { names = site() } } end },
  -- ... and every other option table read by mlL_options or by hand once a key (issue 45): the
  -- schedule, the optimisers (their groups too), generation, the interventions, the figures (their
  -- series and facets too)
  { "mech.lr_schedule", function() return { hostile_meta(R(2) == 1 and {} or { kind = "linear", total = R(0, 9) }) } end },
  { "mech.optim.sgd", function()
    return { { hostile_meta({ params = { mech.randn(2):requires_grad_() } }) }, R(2) == 1 and hostile_meta({}) or nil }
  end },
  { "mech.optim.adamw", function() return { { mech.randn(2):requires_grad_() }, hostile_meta({}) } end },
  { "model:generate", function() return { pick(pool.model), tokens(), hostile_meta({}) } end },
  { "mech.interp.path_patch", function()
    local B, L = R(1, 2), R(1, 6)
    return { pick(pool.model), tokens(B, L), tokens(B, L), hostile_meta({ sender = site(), receiver = site() }) }
  end },
  { "mech.interp.patch", function() return { pick(pool.model), tokens(), hostile_meta({ site = site(), source = pick(pool.tensor) }) } end },
  { "mech.interp.patching_map", function()
    local m, B, L = pick(pool.model), R(1, 2), R(1, 6)
    local o = hostile_meta(R(2) == 1 and { dataset = pick(pool.dataset) } or { rows = R(0, 5), layers = { 0 } })
    if R(2) == 1 then return { m, tokens(B, L), o } end
    return { m, tokens(B, L), tokens(B, L), o }
  end },
  { "mech.interp.interchange", function() -- huge first and count once overflowed first + count
    return { pick(pool.model), pick(pool.dataset), hostile_meta({ first = pick(huge_ints), count = pick { R(0, 2), pick(huge_ints) } }) }
  end },
  { "mech.interp.attention_mass", function() return { pick(pool.model), pick(pool.dataset), hostile_meta({}) } end },
  { "mech.interp.attribution_patching", function()
    return { pick(pool.model), pick(pool.dataset), hostile_meta({ sites = { site() }, positions = { "divider" }, n = R(0, 2) }) }
  end },
  { "mech.plot.lines", function()
    local series = { hostile_meta({ y = { 1, 2 } }) }
    if R(2) == 1 then return { hostile_meta({ out = dir .. "/h.png", series = series }) } end
    return { { out = dir .. "/h.png", facets = { hostile_meta({ series = series }), { blank = true } } } }
  end },
  { "mech.plot.heatmap", function() return { hostile_meta({ out = dir .. "/h.png", data = { { 1, 2 } } }) } end },
  { "model:evaluate", function()
    local t = tokens()
    return { pick(pool.model), t, t, hostile_meta(R(2) == 1 and {} or { precision = pick { "fp32", "bf16", 16, true } }) }
  end },
}

-- Issue 43: remainder and integer division on operands that divide badly (int32 zeros, INT32_MIN
-- by -1, NaN, ±inf, ±0, empty and broadcast shapes), and a backward through them.
local function divisor()
  local k = R(12)
  if k == 1 then return mech.tensor({ { 0, 3 }, { -2, 0 } }, { dtype = "int32" }) end
  if k == 2 then return mech.tensor({ -2147483648, 2147483647, -1, 1 }, { dtype = "int32" }) end
  if k == 3 then return mech.tensor({ { -1 }, { 2 }, { -2147483648 } }, { dtype = "int32" }) end
  if k == 4 then return mech.tensor({ 0, -0.0, 0 / 0, math.huge, -math.huge, 1e-45, 3.5, -2.25 }) end
  if k == 5 then return mech.randn(R(1, 3), R(1, 4)):requires_grad_() end
  if k == 6 then return pick { mech.zeros(0, 4), mech.zeros(0, 1, { dtype = "int32" }), mech.zeros(2 ^ 31 // 1, 0, 4) } end
  if k == 7 then return mech.arange(-3, 5):reshape(2, 4) end
  if k == 8 then return pick(pool.tensor) end
  return pick { 0, -1, 0.0, -0.0, 0 / 0, math.huge, 2 ^ 31, math.mininteger, 2.5, 7, -7 }
end
for _, name in ipairs { "mech.remainder", "mech.fmod", "mech.floor_divide", "tensor.__mod", "tensor.__idiv" } do
  shaped[#shaped + 1] = { name, function() return { divisor(), divisor() } end }
end
shaped[#shaped + 1] = { "tensor:backward", function()
  local a = mech.randn(R(1, 3), R(1, 4)):requires_grad_()
  local op = pick { mech.remainder, mech.fmod, mech.floor_divide }
  local ok, y = pcall(op, R(2) == 1 and a or divisor(), R(2) == 1 and a or divisor())
  local ok_sum, s = pcall(function() return y:sum() end)
  return { ok and ok_sum and s or a:sum() }
end }

-- Issue 43: module search, with odd names and the checkpoints that name each module. A module is
-- sometimes dropped from package.loaded first, so that require runs it again.
local function module_name()
  local name = pick(odd_module_names)
  if R(4) == 1 then package.loaded[name] = nil end
  return name
end
local function modules_option()
  local k = R(6)
  if k == 1 then return nil end
  if k == 2 then return { modules = { module_name() } } end
  if k == 3 then return { modules = { module_name(), module_name() }, d_model = pick { 8, 16 } } end
  if k == 4 then return { modules = pick { "fuzzmod_ok", 3, { 1 }, {}, hostile_meta({}) } } end
  return { modules = { "fuzzmod_" .. pick(search_keys) } }
end
shaped[#shaped + 1] = { "require", function() return { module_name() } end }
shaped[#shaped + 1] = { "mech.load", function() return { pick(search_ckpts), modules_option() } end }
shaped[#shaped + 1] = { "mech.allow_module", function()
  return { R(2) == 1 and module_name() or { module_name(), module_name() } }
end }
shaped[#shaped + 1] = { "mech.find", function() return { pick(odd_paths) } end }

-- Issue 43: the Lua-mixer contract, at the length where each class breaks it (and others). These
-- calls are checked: an error must name the layer and the class (contract_check).
local function contract_tokens() return tokens(R(1, 2), R(2) == 1 and 5 or R(1, 6)) end
local function names_model_layer(err) return err:find("blocks%.%d+%.mixer %(mixer 'fuzz_contract%d+'%)") end
local function names_module_layer(err)
  return err:find("0%.mixer %(FuzzContract%d+%)") or err:find("0%.mlp %(FuzzContract%d+%)")
end
shaped[#shaped + 1] = { "model:forward", function() return { pick(contract.models), contract_tokens() } end,
  check = names_model_layer }
shaped[#shaped + 1] = { "model:run_with_cache", function() return { pick(contract.models), contract_tokens() } end,
  check = names_model_layer }
shaped[#shaped + 1] = { "model:generate", function()
  return { pick(contract.models), tokens(1, R(1, 4)), { max_new = R(1, 4), temperature = 0 } }
end, check = names_model_layer }
shaped[#shaped + 1] = { "module()", function()
  return { pick(contract.modules), mech.randn(R(1, 2), R(2) == 1 and 5 or R(1, 6), 8) }
end, check = names_module_layer }
shaped[#shaped + 1] = { "mech.model", function()
  return { { mixer = pick(contract_classes), d_model = 8, n_layers = R(1, 2), vocab = 16 } }
end }
-- the precision option (issue 46): good and bad values, on built-in and Lua mixers
shaped[#shaped + 1] = { "mech.model", function()
  local cfg = { d_model = 8, n_layers = R(1, 2), vocab = 16,
    precision = pick { "bf16", "fp32", "bf17", "", "BF16", 16, true, {}, 0 / 0, hostile_meta({}) } }
  if R(3) == 1 then cfg.mixer = pick(contract_classes) else cfg.arch = pick { "attention", "mamba", "based", "h3" } end
  return { cfg }
end }
-- Issue 43: free position names. Declared lists that repeat, clash with the paper's eight, are
-- no identifiers or pass the cap; and names (the task's own, the paper's, unknown, numbers, odd
-- values) where the tools take positions.
local function position_list()
  local k, names = R(7), { "bos", "query_item_orig", "divider" }
  if k == 1 then names[#names + 1] = "bridge"; names[#names + 1] = "bridge" end
  if k == 2 then names[#names + 1] = pick { "the key", "", "1st", "a.b", ("x"):rep(40), "é" } end
  if k == 3 then for i = 1, 60 do names[#names + 1] = "p" .. i end end
  if k == 4 then names[#names + 1] = pick { 3, true, {}, hostile_meta({}) } end
  if k == 5 then names = hostile_meta({ "bos", "bridge" }) end
  if k >= 6 then names[#names + 1] = "bridge" end
  return names
end
local function position_name()
  return pick { "bridge", "hop", "query_item_orig", "next_key", "brigde", "", 0, 3, -1, 2 ^ 40, 0.5, true, {} }
end
shaped[#shaped + 1] = { "mech.task.new", function()
  return { { name = "fuzz_pos", vocab = 8, positions = position_list(),
    sample = function(gen) return { tokens = { 1, 2, 3, 4 }, targets = { 3 }, positions = { bos = 0, bridge = gen:below(4) } } end } }
end }
shaped[#shaped + 1] = { "mech.interp.patching_map", function()
  local ds = pick(pool.dataset)
  local ok_b, tok = pcall(function() return (ds:batch(0, 2)) end)
  local m = pick(pool.model)
  return { m, ok_b and tok or tokens(2, 5), ok_b and tok or tokens(2, 5),
    { dataset = ds, first = 0, layers = { 0 }, components = { "block_input" }, positions = { position_name(), position_name() } } }
end }
for _, name in ipairs { "dataset:show", "dataset:position_names", "task:positions" } do
  if by_name[name] then
    shaped[#shaped + 1] = { name, function()
      local kind = name:match("^(%a+):")
      return { pick(pool[kind]), R(0, 9) }
    end }
  end
end
for _, s in ipairs(shaped) do
  s.target = assert(by_name[s[1]], "api_fuzz.lua: a shaped call names no function: " .. s[1])
end

------------------------------------------------------------------------------------------------
-- Calls

local function show(v)
  local t = type(v)
  if t == "string" then return #v > 40 and string.format("string(%d bytes)", #v) or string.format("%q", v) end
  if t == "number" then return (math.type(v) == "integer" and "%d" or "%.17g"):format(v) end
  if t == "table" then return "table" end
  if t == "userdata" then
    local ok, s = pcall(tostring, v)
    return ok and s:sub(1, 60):gsub("%s+", " ") or "userdata"
  end
  return tostring(v)
end

local counts = { calls = 0, errors = 0 }
local per_fn, per_fn_ok = {}, {}
local t_start = mech.sys.time()
local slow = {}
local unnamed = {} -- checked calls whose error did not name the layer and the class

-- avoid=NAME,NAME: callables to leave out (to look past a known defect while it is open)
local avoid = {}
for n in tostring(opts.avoid):gmatch("[^,]+") do avoid[n] = true end

local kinds = {}
for kind in pairs(methods) do kinds[#kinds + 1] = kind end
table.sort(kinds)

for i = 1, opts.calls do
  if mech.sys.time() - t_start > opts.seconds then break end
  if i % 500 == 0 then build_pool() end -- fresh objects: calls close, mutate and exhaust them
  local target, args, n, check
  if R(4) == 1 then
    local s = pick(shaped)
    target = s.target
    args = s[2]()
    n = select("#", table.unpack(args))
    if R(3) == 1 then args[R(math.max(n, 1))] = value() -- one argument wrong
    else check = s.check end
  elseif R(2) == 1 then
    target = pick(callables)
    args = {}
  else
    local kind = pick(kinds)
    local list = methods[kind]
    target = pick(list)
    args = { R(10) <= 8 and pick(pool[kind]) or value() }
  end
  if not n then
    for _ = 1, R(0, 5) do args[#args + 1] = value() end
    n = #args
    for j = 1, R(0, 2) do if n + j <= 6 then args[n + j] = nil end end
  end
  if avoid[target.name] then goto continue end
  local shown = {}
  for j = 1, 6 do if args[j] ~= nil or j <= n then shown[#shown + 1] = show(args[j]) end end
  logf:write(string.format("%d %s(%s)\n", i, target.name, table.concat(shown, ", ")))
  logf:flush()
  local t0 = os.clock()
  local ok, err = pcall(target.fn, table.unpack(args, 1, math.max(n, 6)))
  local dt = os.clock() - t0
  if not ok and check and not (type(err) == "string" and check(err)) then
    unnamed[#unnamed + 1] = string.format("%d %s(%s): %s", i, target.name, table.concat(shown, ", "), tostring(err))
  end
  counts.calls = counts.calls + 1
  if not ok then counts.errors = counts.errors + 1 else per_fn_ok[target.name] = (per_fn_ok[target.name] or 0) + 1 end
  per_fn[target.name] = (per_fn[target.name] or 0) + 1
  if dt > opts.slow then slow[#slow + 1] = string.format("%.1f s of CPU: %d %s(%s)", dt, i, target.name, table.concat(shown, ", ")) end
  ::continue::
end

pool, contract = nil, nil
collectgarbage()
collectgarbage()
local n_fns = 0
for _ in pairs(per_fn) do n_fns = n_fns + 1 end
local total = #callables
for _, l in pairs(methods) do total = total + #l end
local summary = string.format("fuzz: seed %d, %d calls (%d raised a Lua error) over %d of %d functions and methods, %.1f s",
  opts.seed, counts.calls, counts.errors, n_fns, total, mech.sys.time() - t_start)
local complaints = {}
for _, s in ipairs(slow) do complaints[#complaints + 1] = "slow call: " .. s end
for _, s in ipairs(unnamed) do complaints[#complaints + 1] = "unnamed contract error: " .. s end
-- also at the end of the log: a call may have sent this process's output elsewhere
-- (mech.sys.redirect_output), and the runner reads the log too
logf:write("# ", summary, "\n")
for _, c in ipairs(complaints) do logf:write("# ", c, "\n") end
logf:close()
if opts.reach then
  local all = {}
  for _, c in ipairs(callables) do all[#all + 1] = c.name end
  for _, l in pairs(methods) do for _, c in ipairs(l) do all[#all + 1] = c.name end end
  table.sort(all)
  local f = assert(io.open(opts.reach, "w"))
  for _, name in ipairs(all) do f:write(name, " ", per_fn[name] or 0, " ", per_fn_ok[name] or 0, "\n") end
  f:close()
end
print(summary)
if #complaints > 0 then
  for _, c in ipairs(complaints) do print(c) end
  os.exit(1)
end
