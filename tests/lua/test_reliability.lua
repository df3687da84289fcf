-- Regression tests for the defects of issue 16: each call here crashed, read out of bounds or
-- silently did the wrong thing before.
local T = require "check"

T.test("shapes whose sizes or strides overflow are refused as too large", function()
  local huge = 2 ^ 40
  T.raises(function() return mech.zeros(0):view(huge, huge) end, "size too large")
  T.raises(function() return mech.zeros(0):reshape(huge, huge) end, "size too large")
  T.raises(function() return mech.zeros(0, huge, huge) end, "size too large")
  T.raises(function() return mech.zeros(1):expand(huge, huge) end, "size too large")
  -- still fine: an empty view of a size that fits, and a legal -1
  T.eq(mech.zeros(0):view(0, 4):shape(), { 0, 4 })
  T.eq(mech.zeros(12):view(-1, 4):shape(), { 3, 4 })
end)

T.test("slices and splits with huge steps and sizes stay in bounds", function()
  local t = mech.arange(10)
  local v = t:slice(0, 2, 10, math.maxinteger)
  T.eq(v:shape(), { 1 })
  T.eq(v:item(), 2)
  T.eq(t:slice(0, 0, 10, 3):shape(), { 4 })
  local pieces = { t:split(math.maxinteger) }
  T.eq(#pieces, 1)
  T.eq(pieces[1]:shape(), { 10 })
  T.eq(select("#", t:split(3)), 4)
end)

T.test("integer options beyond the int range are errors, not wrapped", function()
  T.raises(function() return mech.model { arch = "attention", d_model = 2 ^ 32 + 8, vocab = 16 } end,
    "bad argument #1 to 'mech.model' (option 'd_model': expected an integer in [-2^31, 2^31), got 4294967304.0)")
  T.raises(function() return mech.model { arch = "attention", d_model = 16, vocab = 2 ^ 32 + 16 } end,
    "bad argument #1 to 'mech.model' (option 'vocab': expected an integer in [-2^31, 2^31), got 4294967312.0)")
  local g = mech.Generator(1)
  T.raises(function() return mech.interp.corrupt(0, 2 ^ 32 + 5, 1, g) end, "bad argument #2 to 'mech.interp.corrupt' (an integer in [-2^31, 2^31) expected, got 4294967301.0)")
  T.raises(function() return mech.interp.corrupt(-1, 2 ^ 31 - 1, 1, g) end, "hi - lo < 2^31")
  local r = mech.interp.corrupt(0, 5, 2, g)
  T.truthy(r >= 0 and r <= 5 and r ~= 2, r)
end)

T.test("hook handles are opaque: tampering cannot reach the C side", function()
  local m = mech.model { arch = "attention", d_model = 16, vocab = 16 }
  local calls = 0
  local h = m:add_hook("blocks.0.block_input", function() calls = calls + 1 end)
  T.raises(function() h[1] = 0 end, "attempt to index")
  T.eq(type(h), "userdata")
  local tok = mech.tensor({ { 1, 2, 3 } }):int()
  m:forward(tok)
  T.eq(calls, 1)
  h:remove()
  h:remove() -- twice is fine
  m:forward(tok)
  T.eq(calls, 1)
end)

T.test("a model closed or collected inside its own hook finishes the call, then is closed", function()
  local tok = mech.tensor({ { 1, 2, 3, 4, 5 } }):int()
  for _, arch in ipairs { "attention", "mamba", "hyena", "delta_net" } do
    local ref = mech.model { arch = arch, d_model = 16, vocab = 16, n_layers = 2, seed = 3 }:forward(tok)
    local m = mech.model { arch = arch, d_model = 16, vocab = 16, n_layers = 2, seed = 3 }
    local out = m:forward(tok, { ["blocks.0.block_output"] = function()
      getmetatable(m).__close(m)
      collectgarbage()
    end })
    T.eq((out - ref):abs():max():item(), 0, arch)
    T.raises(function() return m:forward(tok) end, "the model was closed")
    -- from a persistent hook, through loss
    local m2 = mech.model { arch = arch, d_model = 16, vocab = 16, n_layers = 2 }
    m2:add_hook("blocks.1.block_input", function() getmetatable(m2).__close(m2) end)
    m2:loss(tok, tok)
    T.raises(function() return m2:loss(tok, tok) end, "the model was closed")
  end
end)

-- Live tensor storage after a full collection, in bytes.
local function live()
  collectgarbage()
  collectgarbage()
  return mech.memory_bytes()
end

T.test("an index that raises midway frees what it held", function()
  local base = live()
  for _ = 1, 20 do
    local t = mech.zeros(1024, 1024) -- 4 MiB
    T.raises(function() return t[{ { "a" } }] end, "number expected")
    T.raises(function() return t[{ 0, setmetatable({}, { __index = function() error("from __index") end }) }] end,
      "from __index")
    T.raises(function() return t[setmetatable({}, { __len = function() error("from __len") end })] end, "from __len")
    T.raises(function() t[{ "0:1", { "x" } }] = 1 end, "number expected")
  end
  T.eq(live(), base)
  -- and indexing still works
  local t = mech.arange(12):reshape(3, 4)
  T.eq(t[{ 1, "1:3" }]:tolist(), { 5, 6 })
  T.eq(t[{ -1, -1 }], 11)
end)

T.test("a grad that requires grad is stored detached: no cycle through the graph", function()
  local base = live()
  do
    local x = mech.randn(1024, 1024):requires_grad_(true)
    x.grad = x * 2
    T.eq(x.grad.requires_grad, false)
    T.eq(x.grad.grad_fn, nil)
    T.eq((x.grad - x:detach() * 2):abs():max():item(), 0)
  end
  T.eq(live(), base)
end)

T.test("loops of small tensors stay bounded: every tensor is reported to the collector", function()
  local a, w = mech.randn(4, 4), mech.randn(4, 4):requires_grad_(true)
  collectgarbage()
  local lua_kb = collectgarbage("count")
  local most = 0
  for i = 1, 200000 do
    local _ = a + a
    local _ = (w * 2):sum()
    if i % 1000 == 0 then most = math.max(most, mech.memory_bytes()) end
  end
  -- unaccounted, 200,000 finalised userdata piled up (tens of MiB) before the collector caught up
  T.truthy(collectgarbage("count") - lua_kb < 4096, collectgarbage("count") - lua_kb)
  T.truthy(most < 2 ^ 20, most)
end)

T.test("a NaN weight stops train_step naming the step and the parameter; the model is left as it was", function()
  local task = mech.task.ar { num_kv = 8, length = 8 }
  local tokens, targets = task:dataset(16):batch(0, 16)
  local m = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = task:vocab_size(), seed = 1 }
  local opt = mech.adamw(m)
  T.eq(m:nonfinite(), nil)
  for _ = 1, 2 do T.truthy(m:train_step(opt, tokens, targets, 1e-3).nonfinite == nil) end
  local name = "backbone.layers.0.norm1.weight"
  mech.no_grad(function() m:param(name)[{ 3 }] = 0 / 0 end)
  T.eq(m:nonfinite(), name)
  local emb = m:param("backbone.embeddings.word_embeddings.weight"):clone()
  T.raises(function() m:train_step(opt, tokens, targets, 1e-3) end,
    "train_step: the loss became nan at step 2; first non-finite parameter: " .. name)
  T.eq((m:param("backbone.embeddings.word_embeddings.weight") - emb):abs():max():item(), 0)
  -- "record" updates as usual and says which parameter
  local st = m:train_step(opt, tokens, targets, 1e-3, "record")
  T.truthy(st.loss ~= st.loss)
  T.eq(st.nonfinite, name)
  T.raises(function() m:train_step(opt, tokens, targets, 1e-3, "ignore") end,
    "bad argument #5 to 'model:train_step' (\"stop\" or \"record\" expected, got 'ignore')")
  T.raises(function() m:train_step(opt, tokens, targets, 1e-3, 1) end, "bad argument #5 to 'model:train_step' (\"stop\" or \"record\" expected, got 1)")
end)

T.test("train.run writes no checkpoint holding a non-finite parameter", function()
  local train = require "mech.train"
  local dir = os.tmpname()
  os.remove(dir)
  local cfg = { model = { arch = "attention", d_model = 16, n_layers = 1 }, task = "ar_32", train_docs = 320,
    eval_docs = 32, batch_size = 16, steps = 40, eval_every = 20, checkpoint_every = 20, quiet = true, out = dir,
    -- breaks a parameter after the last update, where no loss would see it
    evaluators = { { every = 40, fn = function(step, model)
      if step == 40 then mech.no_grad(function() model:param("backbone.layers.0.norm1.weight")[{ 0 }] = 1 / 0 end) end
    end } } }
  T.raises(function() train.run(cfg) end,
    "train.run: parameter backbone.layers.0.norm1.weight is not finite at step 40; the checkpoint was not written")
  local saved = mech.load(dir .. "/checkpoint.safetensors") -- the last good one (step 40, before the break) stays
  T.eq(saved:nonfinite(), nil)
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("mech.sys.read_file: whole files, binary too; nil and a message when it cannot read", function()
  local path = os.tmpname()
  local bytes = {}
  for i = 0, 20000 do bytes[#bytes + 1] = string.char(i % 256) end -- NULs, past one buffer
  mech.sys.write_atomic(path, table.concat(bytes))
  T.eq(mech.sys.read_file(path), table.concat(bytes))
  os.remove(path)
  local text, msg = mech.sys.read_file(path)
  T.eq(text, nil)
  T.truthy(msg:find("mech.sys.read_file: cannot open '" .. path .. "'", 1, true), msg)
  text, msg = mech.sys.read_file("/")
  T.eq(text, nil)
  T.truthy(msg:find("cannot read '/'", 1, true), msg)
  T.raises(function() mech.sys.read_file({}) end, "string expected")
end)

T.test("mech.sys's own checks speak the one error format", function()
  T.raises(function() mech.sys.read_file("x", -1) end,
    "bad argument #2 to 'mech.sys.read_file' (a byte count in [0, 2^31] expected, got -1)")
  T.raises(function() mech.sys.sleep(-1) end, "bad argument #1 to 'mech.sys.sleep' (seconds in [0, 86400] expected, got -1)")
  T.raises(function() mech.sys.spawn({}) end,
    "bad argument #1 to 'mech.sys.spawn' (expected a list of 1..1000 strings, got 0 entries)")
  T.raises(function() mech.sys.spawn({ "true", {} }) end,
    "bad argument #1 to 'mech.sys.spawn' (item 2 expected a string, got table)")
  T.raises(function() mech.sys.kill(0) end, "bad argument #1 to 'mech.sys.kill' (a process id > 0 expected, got 0)")
  T.raises(function() mech.sys.kill(mech.sys.getpid(), "SIGFOO") end,
    "bad argument #2 to 'mech.sys.kill' (SIGINT, SIGTERM, SIGKILL, SIGSTOP or SIGCONT expected, got 'SIGFOO')")
end)

T.test("absurd sizes are refused up front", function()
  T.raises(function() return mech.zeros(2 ^ 20, 2 ^ 20) end,
    "a tensor of shape [1048576,1048576] (4096.0 GiB) is too large: at most 2^30 elements (4 GiB)")
  T.raises(function() return mech.randn(2 ^ 31 + 1) end, "is too large")
  local wide = mech.ones(1):expand(2 ^ 20, 2 ^ 20) -- a view of that shape is fine; a copy is not
  T.eq(wide:shape(), { 2 ^ 20, 2 ^ 20 })
  T.raises(function() return wide * 2 end, "is too large")
  T.raises(function() return wide:contiguous() end, "is too large")
end)

T.test("an ATR config that can never produce a document fails after a bounded number of tries", function()
  local t0 = mech.sys.time()
  T.raises(function() return mech.task.atr { min_yield = 1000, max_yield = 1024, max_depth = 2 }:dataset(4) end,
    "task:sample: 200000 consecutive atr documents rejected")
  T.truthy(mech.sys.time() - t0 < 20, mech.sys.time() - t0)
end)

T.test("Ctrl-C reaches a long C loop", function()
  local log = os.tmpname()
  -- 200,000 rejections of long yields take seconds; SIGINT ends them at the next check
  local pid = mech.sys.spawn({ arg[-1], "-e",
    "io.stderr:write('started\\n'); mech.task.atr { max_depth = 0, min_yield = 900, max_yield = 1024 }:dataset(4)" }, log)
  local t0 = mech.sys.time()
  repeat
    mech.sys.sleep(0.02)
    local f = io.open(log)
    local text = f and f:read("a") or ""
    if f then f:close() end
  until text:find("started", 1, true) or mech.sys.time() - t0 > 20
  mech.sys.sleep(0.3)
  local t1 = mech.sys.time()
  mech.sys.kill(pid, "SIGINT")
  local _, code = mech.sys.wait(pid)
  T.truthy(mech.sys.time() - t1 < 5, mech.sys.time() - t1)
  T.truthy(code ~= 0, code)
  local f = assert(io.open(log))
  local text = f:read("a")
  f:close()
  os.remove(log)
  T.truthy(text:find("task:sample: interrupted", 1, true), text)
end)

-- The kill test: SIGKILL (no chance to save or clean up) at random points of a run that writes a
-- checkpoint every step, and once while a checkpoint is being written (stopped with SIGSTOP at
-- random moments until one falls inside a write); then resume.
-- (test_train_records.lua covers SIGTERM, test_sweep.lua a killed sweep worker.)
T.test("SIGKILL at random points, during checkpoint writes too: whole files, same bits, every step once", function()
  local train = require "mech.train"
  local json = require "mech.json"
  local root = os.tmpname()
  os.remove(root)
  mech.sys.mkdir(root)
  local dir = root .. "/run"
  local read = mech.sys.read_file
  local function temp_files()
    local n, p = 0, io.popen("ls -A '" .. dir .. "' 2>/dev/null")
    for name in p:lines() do if name:find(".tmp.", 1, true) then n = n + 1 end end
    p:close()
    return n
  end
  local cfg = string.format([[{ model = { arch = "mamba", d_model = 16, n_layers = 1 }, task = "ar_32",
    train_docs = 320, eval_docs = 32, batch_size = 16, steps = 120, eval_every = 10, log_every = 1, lr = 3e-3,
    checkpoint_every = 1, quiet = true, threads = 1, seed = 5, out = %q, resume = true }]], dir)
  local script = root .. "/train.lua"
  local f = assert(io.open(script, "w"))
  f:write("require('mech.train').run(" .. cfg .. ")\n")
  f:close()

  math.randomseed(16)
  local kills, in_write, last_step = 0, 0, -1
  for round = 1, 6 do
    local pid = mech.sys.spawn({ arg[-1], script }, root .. "/log.txt")
    local t0 = mech.sys.time()
    if round == 6 then -- freeze it at random moments until one falls inside a checkpoint write
      repeat
        mech.sys.sleep(math.random() * 0.02)
        mech.sys.kill(pid, "SIGSTOP")
        local writing = temp_files() > 0
        if not writing then mech.sys.kill(pid, "SIGCONT") end
      until writing or mech.sys.time() - t0 > 120
    else -- once it has saved past the last kill's checkpoint (a slow machine still progresses), at random
      repeat
        mech.sys.sleep(0.02)
        local m = read(dir .. "/manifest.json")
        local step = m and json.decode(m).step or -1
      until step > math.max(last_step, 0) or mech.sys.time() - t0 > 30
      mech.sys.sleep(math.random() * 0.05)
    end
    mech.sys.kill(pid, "SIGKILL")
    local _, _, signame = mech.sys.wait(pid)
    if signame == "SIGKILL" then kills = kills + 1 end
    if temp_files() > 0 then in_write = in_write + 1 end
    T.truthy(temp_files() <= 1, "temp files pile up: " .. temp_files())
    -- the checkpoint on disk is whole: it loads, with its optimiser, at a step that only grows
    if mech.sys.exists(dir .. "/checkpoint.safetensors") then
      local model, opt, meta = mech.load(dir .. "/checkpoint.safetensors")
      T.truthy(model and opt, "checkpoint without optimiser state")
      local step = tonumber(meta["train.step"])
      T.truthy(step >= last_step, string.format("checkpoint went back from step %d to %d", last_step, step))
      last_step = step
    end
  end
  T.truthy(kills >= 5, "kills: " .. kills)
  io.stderr:write(string.format("      %d kills, %d inside a checkpoint write, last checkpoint at step %d\n", kills,
    in_write, last_step))
  T.truthy(in_write >= 1, "no kill landed inside a checkpoint write")
  T.truthy(last_step > 0 and last_step < 120, "last checkpoint at step " .. last_step)

  local resumed = train.run(load("return " .. cfg)())
  T.eq(resumed.status, "done")
  T.eq(temp_files(), 0)
  local straight_cfg = load("return " .. cfg)()
  straight_cfg.out, straight_cfg.resume, straight_cfg.checkpoint_every = root .. "/straight", nil, nil
  train.run(straight_cfg)
  local a, b = mech.load(dir .. "/checkpoint.safetensors"), mech.load(root .. "/straight/checkpoint.safetensors")
  for _, np in ipairs(a:named_parameters()) do
    T.eq((np[2] - b:param(np[1])):abs():max():item(), 0, np[1])
  end
  -- metrics.csv: every (step, split, metric) once, and the same rows as the straight run's
  local seen = {}
  for line in read(dir .. "/metrics.csv"):gmatch("[^\n]+") do
    local key = line:match("^[^,]*,[^,]*,[^,]*")
    T.truthy(not seen[key], "duplicated row " .. line)
    seen[key] = true
  end
  T.eq(read(dir .. "/metrics.csv"), read(root .. "/straight/metrics.csv"))
  T.eq(json.decode(read(dir .. "/manifest.json")).status, "done")
  os.execute("rm -rf '" .. root .. "'")
end)

T.test("a names filter that closes the model is a clean error, not a read of freed memory", function()
  local function fresh() return mech.model { arch = "hyena", d_model = 8, n_layers = 2, vocab = 36, seed = 1 } end
  local m = fresh()
  local names = m:hook_names(function(n) getmetatable(m).__close(m) return n:find("mixer") ~= nil end)
  T.truthy(#names > 0)
  T.raises(function() m:hook_names() end, "closed")
  local m2 = fresh()
  T.raises(function() m2:run_with_cache({ { 1, 2, 3 } }, { names = function() getmetatable(m2).__close(m2) return true end }) end,
    "run_with_cache: the model was closed")
end)

T.done()
