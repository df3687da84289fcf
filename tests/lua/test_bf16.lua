-- precision = "bf16" (docs/kernels.md, "bf16 training"): every architecture's loss and parameter
-- gradients against the same model in fp32, determinism, the option's checks, checkpoints, the
-- interchange evaluation in fp32, and the path of a CPU without AVX512_BF16 (MECHLAB_NO_BF16 in a
-- child process). Where this CPU lacks the instruction, only that path runs.
local T = require "check"
local ic = require "mech.interchange"

local V = 40

local function tiny(arch, precision, extra)
  local cfg = { arch = arch, d_model = 32, n_layers = 2, vocab = V, max_pos = 64, seed = 3, precision = precision }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return mech.model(cfg)
end

local gen = mech.Generator(5)
local tokens = mech.randint(0, V, { 4, 24 }, { generator = gen, dtype = "int32" })
local targets = mech.randint(0, V, { 4, 24 }, { generator = gen, dtype = "int32" })

-- The loss and every parameter's gradient of one step (on tokens and targets unless given).
local function step(m, tok, tgt)
  m:zero_grad()
  local loss = m:loss(tok or tokens, tgt or targets)
  loss:backward()
  local grads = {}
  for _, p in ipairs(m:named_parameters()) do grads[#grads + 1] = { p[1], p[2].grad:clone() } end
  return loss:item(), grads
end

-- A fresh empty directory.
local function new_dir()
  local dir = os.tmpname()
  os.remove(dir)
  mech.sys.mkdir(dir)
  return dir
end

-- Does this CPU run bf16? (mech.model refuses a bf16 model where it cannot.)
local have_bf16 = pcall(mech.model, { arch = "attention", d_model = 16, vocab = 8, precision = "bf16" })

-- Tolerances. bf16 keeps 8 significant bits: rounding an operand to it errs by at most 2^-9
-- relative, a product of two rounded operands by 2^-8 ≈ 0.0039; sums stay fp32. A parameter's
-- gradient in these 2-layer models comes through about ten products in series (forward: the
-- block's projections and the head; backward: their dX, then the dW of its own layer), so the
-- worst case is ≈ 10 · 2^-8 ≈ 0.04 of its norm; the rounding errors are independent and mostly
-- cancel, and the largest measured here was 0.016 (DeltaNet). The loss (a mean over 96 rows of a
-- log-softmax) moved by at most 2.5e-5 relative; 1e-3 leaves room and would still catch a
-- product in the wrong precision or order (fp32 gives 0).
local GRAD_RTOL, LOSS_RTOL = 0.04, 1e-3

T.test("every architecture: bf16 loss and every parameter gradient within the stated tolerance of fp32", function()
  if not have_bf16 then return print("skipped: this CPU has no AVX512_BF16") end
  for _, arch in ipairs(mech.architectures) do
    local l32, g32 = step(tiny(arch, "fp32"))
    local l16, g16 = step(tiny(arch, "bf16"))
    T.truthy(l16 ~= l32, arch .. ": the bf16 loss is fp32's bits (did bf16 run?)")
    T.truthy(math.abs(l16 - l32) <= LOSS_RTOL * math.abs(l32), string.format("%s: loss %.9g vs fp32 %.9g", arch, l16, l32))
    local moved = 0
    for i, pg in ipairs(g32) do
      local name, a, b = pg[1], pg[2], g16[i][2]
      T.eq(g16[i][1], name)
      local err, ref = (b - a):norm():item(), a:norm():item()
      T.truthy(err <= GRAD_RTOL * ref + 1e-12,
        string.format("%s %s: |g_bf16 - g_fp32| = %.3g, %.3g of |g_fp32| = %.3g", arch, name, err, err / ref, ref))
      if err > 0 then moved = moved + 1 end
    end
    T.truthy(moved > 0, arch .. ": no gradient differs from fp32")
  end
end)

T.test("bf16 is deterministic: the same bits twice and at 1 and 2 threads", function()
  if not have_bf16 then return end
  local old = mech.threads()
  for _, arch in ipairs { "attention", "mamba", "hyena" } do
    mech.threads(1)
    local la, ga = step(tiny(arch, "bf16"))
    local lb, gb = step(tiny(arch, "bf16"))
    mech.threads(2)
    local lc, gc = step(tiny(arch, "bf16"))
    T.eq(la, lb, arch)
    T.eq(la, lc, arch)
    for i = 1, #ga do
      T.truthy(ga[i][2]:equal(gb[i][2]), arch .. " " .. ga[i][1])
      T.truthy(ga[i][2]:equal(gc[i][2]), arch .. " 2 threads " .. ga[i][1])
    end
  end
  mech.threads(old)
end)

-- Attention's per-sequence products (QKᵀ, PV and their gradients) run in bf16 too, on each head's
-- strided columns of qkv: with two heads of 16, 37 positions (the AR length), the gradients within
-- the tolerance above (measured 0.007 at one head of 32, 24 positions) and the same bits at 1 and
-- 2 threads (tests/c/test_bf16_linear.c checks that they are the bf16 kernel's bits).
T.test("attention with 2 heads at L = 37: bf16 within tolerance of fp32, deterministic at 1 and 2 threads", function()
  if not have_bf16 then return end
  local gen2 = mech.Generator(9)
  local tok = mech.randint(0, V, { 3, 37 }, { generator = gen2, dtype = "int32" })
  local tgt = mech.randint(0, V, { 3, 37 }, { generator = gen2, dtype = "int32" })
  local function grads_of(m) return step(m, tok, tgt) end
  local old = mech.threads()
  mech.threads(1)
  local l32, g32 = grads_of(tiny("attention", "fp32", { n_heads = 2 }))
  local l16, g16 = grads_of(tiny("attention", "bf16", { n_heads = 2 }))
  mech.threads(2)
  local l2, g2 = grads_of(tiny("attention", "bf16", { n_heads = 2 }))
  mech.threads(old)
  T.truthy(math.abs(l16 - l32) <= LOSS_RTOL * math.abs(l32), string.format("loss %.9g vs fp32 %.9g", l16, l32))
  T.eq(l2, l16)
  for i, pg in ipairs(g32) do
    local err, ref = (g16[i][2] - pg[2]):norm():item(), pg[2]:norm():item()
    T.truthy(err <= GRAD_RTOL * ref + 1e-12, string.format("%s: %.3g of |g_fp32| = %.3g", pg[1], err / ref, ref))
    T.truthy(g2[i][2]:equal(g16[i][2]), "2 threads " .. pg[1])
  end
end)

T.test("the option: default fp32, not shown; bad values refused by name", function()
  T.eq(tiny("attention"):config().precision, nil)
  T.eq(tiny("attention", "fp32"):config().precision, nil)
  if have_bf16 then T.eq(tiny("mamba", "bf16"):config().precision, "bf16") end
  T.raises(function() tiny("attention", "bf17") end, "option 'precision': expected 'fp32' or 'bf16', got 'bf17'")
  T.raises(function() tiny("attention", 16) end, "option 'precision': expected a string, got 16")
  T.raises(function() tiny("attention", true) end, "option 'precision': expected a string, got boolean")
  T.raises(function() tiny("attention", "") end, "option 'precision': expected 'fp32' or 'bf16', got ''")
end)

T.test("checkpoints: bf16 recorded and read back; fp32 files carry no precision key", function()
  local dir = new_dir()
  local p32 = dir .. "/fp32.safetensors"
  tiny("hyena", "fp32"):save(p32)
  local f = io.open(p32, "rb")
  local bytes = f:read("a")
  f:close()
  T.falsy(bytes:find("precision", 1, true), "an fp32 checkpoint names the precision")
  if have_bf16 then
    local m = tiny("hyena", "bf16")
    local p16 = dir .. "/bf16.safetensors"
    m:save(p16)
    local back = mech.load(p16)
    T.eq(back:config().precision, "bf16")
    local l1, g1 = step(m)
    local l2, g2 = step(back)
    T.eq(l1, l2)
    for i = 1, #g1 do T.truthy(g1[i][2]:equal(g2[i][2]), g1[i][1]) end
    T.raises(function() mech.load(p16, { precision = "fp32" }) end, "option 'precision' is 'fp32' but the file's config has 'bf16'")
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("train.run's precision reaches the model and the records; bad and conflicting values refused", function()
  local train = require "mech.train"
  local base = { model = { arch = "mamba", d_model = 16 }, task = "ar_32", train_docs = 64, eval_docs = 16, eval_every = 2,
    steps = 2, quiet = true }
  local function cfg(extra)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(extra) do c[k] = v end
    return c
  end
  T.raises(function() train.run(cfg { precision = "bf17" }) end, "train.run: 'precision' expected \"fp32\" or \"bf16\", got bf17")
  T.raises(function() train.run(cfg { precision = "bf16", model = { arch = "mamba", d_model = 16, precision = "fp32" } }) end,
    "train.run: 'precision' (bf16) and model.precision (fp32) differ")
  if not have_bf16 then return end
  local dir = os.tmpname()
  os.remove(dir)
  local run = train.run(cfg { precision = "bf16", out = dir })
  T.eq(run.model:config().precision, "bf16")
  local manifest = mech.json_decode(mech.sys.read_file(dir .. "/manifest.json"))
  T.eq(manifest.config.precision, "bf16")
  T.raises(function() train.run(cfg { precision = "fp32", out = dir, resume = true, steps = 4 }) end,
    "'precision' is fp32 but checkpoint")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("the interchange evaluation runs in fp32: a bf16 model gives its fp32 twin's bits", function()
  if not have_bf16 then return end
  local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
  local ds = task:dataset(8, { seed = 1, split = "test" })
  local function model(p) return tiny("attention", p, { vocab = task:vocab_size(), d_model = 16 }) end
  local m32, m16 = model("fp32"), model("bf16")
  local tok = ds:batch(0, 4)
  T.falsy(m32:forward(tok):equal(m16:forward(tok)), "the bf16 forward is fp32's bits")
  for _, workers in ipairs { 1, 2 } do
    local opts = { layers = { 1 }, workers = workers }
    local a, b = ic.evaluate(m32, ds, opts), ic.evaluate(m16, ds, opts)
    for _, k in ipairs { "restored_prob", "corrupted_prob", "restored_logit", "corrupted_logit", "kl_div" } do
      T.truthy(a[k]:equal(b[k]), k .. " with " .. workers .. " workers")
    end
    T.eq(a.accuracy, b.accuracy, "the accuracy check is fp32 too")
  end
  -- model:evaluate in fp32 for one call: the fp32 twin's numbers; bad values refused by name
  local ttok, ttg = ds:batch(0, 8)
  local s32, s16 = m32:evaluate(ttok, ttg), m16:evaluate(ttok, ttg, { precision = "fp32" })
  T.eq(s16.loss, s32.loss)
  T.eq(s16.correct, s32.correct)
  T.raises(function() m16:evaluate(ttok, ttg, { precision = "bf16" }) end,
    "bad argument #3 to 'model:evaluate' (option 'precision': expected 'fp32'")
  T.raises(function() m16:evaluate(ttok, ttg, { precison = "fp32" }) end, "unknown option 'precison'")
  -- and the model's own forward is bf16 again afterwards
  T.falsy(m32:forward(tok):equal(m16:forward(tok)))
end)

T.test("a CPU without AVX512_BF16: mech.model refuses, a bf16 checkpoint loads but its forward is refused", function()
  local dir = new_dir()
  local ckpt = dir .. "/bf16.safetensors"
  if have_bf16 then
    tiny("attention", "bf16"):save(ckpt)
    local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
    tiny("attention", "bf16", { vocab = task:vocab_size(), d_model = 16 }):save(ckpt .. ".ar")
  end
  local script = dir .. "/child.lua"
  local f = io.open(script, "w")
  f:write([[
local ckpt = ...
local ok, err = pcall(function() return mech.model { arch = "attention", d_model = 16, vocab = 8, precision = "bf16" } end)
assert(not ok, "mech.model made a bf16 model")
print("MODEL " .. tostring(err))
local ok2, err2 = pcall(require("mech.train").run, { model = { arch = "attention", d_model = 16, precision = "bf16" },
  task = "ar_32", steps = 1, quiet = true })
print("TRAIN " .. tostring(ok2) .. " " .. tostring(err2))
if ckpt ~= "" then
  local m = mech.load(ckpt)
  local tok = mech.zeros({ 1, 4 }, { dtype = "int32" })
  local ok3, err3 = pcall(function() return m:forward(tok) end)
  print("FORWARD " .. tostring(ok3) .. " " .. tostring(err3))
  local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
  local mt = mech.load(ckpt .. ".ar")
  local ok4, res = pcall(require("mech.interchange").evaluate, mt, task:dataset(4, { seed = 1, split = "test" }), { layers = { 1 } })
  print("INTERCHANGE " .. tostring(ok4) .. " " .. (ok4 and tostring(res.accuracy) or tostring(res)))
end
]])
  f:close()
  local p = io.popen(string.format("MECHLAB_NO_BF16=1 %q %q %q 2>&1", arg[-1], script, have_bf16 and ckpt or ""))
  local out = p:read("a")
  T.truthy(p:close(), out)
  T.truthy(out:find("MODEL mech.model: option 'precision' is 'bf16', but this CPU has no AVX512_BF16", 1, true), out)
  T.truthy(out:find("TRAIN false [^\n]*option 'precision' is 'bf16', but this CPU has no AVX512_BF16"), out)
  if have_bf16 then
    T.truthy(out:find("FORWARD false [^\n]*model:forward: the model's option precision = 'bf16' needs AVX512_BF16, but this CPU has no AVX512_BF16"), out)
    -- the interchange evaluation, its accuracy check included, is fp32: it runs there
    T.truthy(out:find("INTERCHANGE true [%d.]+"), out)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
