--- The checkpoint fuzzer: mutates valid checkpoints and PyTorch state dicts and loads every mutant
--- with mech.load. Each must give a Lua error whose message starts with "load" (what the loader
--- says about bad files) or a model whose forward runs. The fuzzer fails on anything else: another
--- error, a forward that fails on a loaded model, a load slower than `slow` seconds, or a crash or
--- sanitizer report (the process dies; DIR/mutant.safetensors is then the input that did it, and
--- DIR/mutant.txt says how it was made).
---
---   mechlab tests/fuzz/checkpoint_fuzz.lua [seed=1] [mutants=0] [seconds=20] [slow=2] [dir=DIR]
---                                          [fixtures=tests/fixtures/torch]
---
--- mutants = 0 runs until `seconds` have passed. Mutations (docs/reliability.md, "Checkpoints"):
--- bit flips, truncation at every region (length field, header, each tensor's data), the header
--- length field, header text edits (dtype, shape, data_offsets, duplicate and missing entries,
--- deep nesting, non-UTF-8 bytes, huge numbers, spliced bytes), and structured edits made through
--- mech.load_tensors / mech.save_tensors (config fields out of range or of the wrong type, the
--- optimiser's metadata, missing, extra, renamed and reshaped tensors).
local json = require "mech.json"

local opts = { seed = 1, mutants = 0, seconds = 20, slow = 2, dir = false, fixtures = "tests/fixtures/torch" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then error("checkpoint_fuzz.lua: unknown argument '" .. a .. "'") end
  opts[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
end
math.randomseed(opts.seed)
local R = math.random
local function pick(list) return list[R(#list)] end

-- Under /dev/shm where there is one: the structured edits are written atomically (with fsync).
local shm = io.open("/dev/shm/.mechlab-ckfuzz-probe", "w")
if shm then shm:close() os.remove("/dev/shm/.mechlab-ckfuzz-probe") end
local dir = opts.dir or string.format("%s/mechlab-ckfuzz-%d-%d", shm and "/dev/shm" or "/tmp", opts.seed,
  math.floor(mech.sys.time() * 1000) % 1000000)
mech.sys.mkdir(dir)
local mutant_path, note_path = dir .. "/mutant.safetensors", dir .. "/mutant.txt"

local function read(path) return assert(mech.sys.read_file(path)) end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

------------------------------------------------------------------------------------------------
-- Valid inputs: mechlab checkpoints (with an optimiser and metadata, PyTorch-shaped, plain) and
-- the committed PyTorch state dicts (loaded with their options).

local bases = {}
local function add_base(name, path, options)
  local bytes = read(path)
  local hlen = string.unpack("<I8", bytes)
  bases[#bases + 1] = { name = name, bytes = bytes, hlen = hlen, options = options }
end

do
  local a = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 10, max_pos = 8, n_heads = 2 }
  local opt = mech.adamw(a)
  a:train_step(opt, mech.tensor({ { 1, 2, 3, 4 } }, { dtype = "int32" }), mech.tensor({ { 2, 3, 4, 5 } }, { dtype = "int32" }), 1e-2)
  a:save(dir .. "/attention.safetensors", { optimizer = opt, meta = { note = "base" } })
  add_base("attention+adamw", dir .. "/attention.safetensors")
  local h = mech.model { arch = "hyena", d_model = 8, n_layers = 1, vocab = 10, pos_emb = false }
  h:save(dir .. "/hyena_torch.safetensors", { torch = true })
  add_base("hyena torch=true", dir .. "/hyena_torch.safetensors")
  local m = mech.model { arch = "mamba_without_conv", d_model = 8, n_layers = 2, vocab = 10, pos_emb = false }
  m:save(dir .. "/mamba.safetensors")
  add_base("mamba_without_conv", dir .. "/mamba.safetensors")
  for _, arch in ipairs { "attention", "hyena", "mamba" } do
    local f = io.open(opts.fixtures .. "/" .. arch .. ".safetensors", "rb")
    if f then
      f:close()
      local _, meta = mech.load_tensors(opts.fixtures .. "/" .. arch .. "_expected.safetensors")
      add_base("torch " .. arch, opts.fixtures .. "/" .. arch .. ".safetensors", json.decode(meta.options))
    end
  end
end

------------------------------------------------------------------------------------------------
-- Mutations. Each takes a base and returns the mutant's bytes and a description.

local huge = { "-1", "0", "1", "7", "4294967296", "9007199254740993", "9223372036854775807", "9223372036854775808",
  "18446744073709551616", "123456789012345678901234567890", "1e400", "-1e400", "1.5", "1e-400", "-0", "NaN", "0x10" }
local dtypes = { '"F16"', '"BF16"', '"F64"', '"I64"', '"I32"', '"U8"', '"BOOL"', '""', '"F32 "', '"f32"', "32", "null",
  '["F32"]', '{"F32":1}' }

local function splice(s, i, j, with) return s:sub(1, i - 1) .. with .. s:sub(j + 1) end

-- The header text of a base, mutated by fn, put back with a correct length field.
local function with_header(b, fn)
  local header = b.bytes:sub(9, 8 + b.hlen)
  local new, what = fn(header)
  return string.pack("<I8", #new) .. new .. b.bytes:sub(9 + b.hlen), what
end

-- A random occurrence of pattern in s: start, end (or nil).
local function find_random(s, pattern)
  local hits = {}
  local i = 1
  while true do
    local a, e = s:find(pattern, i)
    if not a then break end
    hits[#hits + 1] = { a, e }
    i = e + 1
  end
  if #hits == 0 then return nil end
  local h = pick(hits)
  return h[1], h[2]
end

local function replace_random(header, pattern, with)
  local a, e = find_random(header, pattern)
  if not a then return header end
  return splice(header, a, e, with)
end

-- The data section's tensor boundaries (absolute byte offsets), from the header.
local function boundaries(b)
  local cuts = {}
  for x, y in b.bytes:sub(9, 8 + b.hlen):gmatch('"data_offsets":%[(%d+),(%d+)%]') do
    cuts[#cuts + 1] = 8 + b.hlen + tonumber(x)
    cuts[#cuts + 1] = 8 + b.hlen + tonumber(y)
  end
  return cuts
end

local structured -- below

local mutations = {
  function(b) -- bit flips, mostly in the header
    local s, flips = b.bytes, {}
    for _ = 1, R(4) do
      local i = R(10) <= 7 and R(8 + b.hlen) or R(#s)
      local bit = R(0, 7)
      s = splice(s, i, i, string.char(s:byte(i) ~ (1 << bit)))
      flips[#flips + 1] = i .. ":" .. bit
    end
    return s, "bit flips at " .. table.concat(flips, " ")
  end,
  function(b) -- truncation in every region
    local cuts = boundaries(b)
    local regions = { R(0, 7), 8 + R(0, b.hlen - 1), 8 + b.hlen }
    if #cuts > 0 then
      local c = pick(cuts)
      regions[#regions + 1] = math.max(0, math.min(#b.bytes - 1, c + R(-1, 1)))
    end
    regions[#regions + 1] = #b.bytes - R(1, 4)
    local n = pick(regions)
    return b.bytes:sub(1, n), "truncated to " .. n .. " bytes"
  end,
  function(b) -- the header length field
    local v = pick { b.hlen + 1, b.hlen - 1, b.hlen + 8, b.hlen - 8, 0, 1, #b.bytes, 100000001, -1, math.maxinteger,
      math.mininteger }
    return string.pack("<i8", v) .. b.bytes:sub(9), "header length " .. v
  end,
  function(b) -- dtype
    local d = pick(dtypes)
    return with_header(b, function(h) return replace_random(h, '"dtype":"[^"]*"', '"dtype":' .. d), "dtype " .. d end)
  end,
  function(b) -- shape
    local s = pick { "[]", "[0]", "[-1]", "[1.5]", '["3"]', "[1,1,1,1,1,1,1,1,1]", "[4611686018427387904,4]",
      "[" .. pick(huge) .. "]", "[" .. pick(huge) .. "," .. pick(huge) .. "]", "null", "{}", "[[2]]" }
    return with_header(b, function(h) return replace_random(h, '"shape":%[[^%]]*%]', '"shape":' .. s), "shape " .. s end)
  end,
  function(b) -- data offsets
    local o = pick { "[" .. pick(huge) .. "," .. pick(huge) .. "]", "[0]", "[0,0,0]", "[]", "null", '["0","4"]' }
    local h0 = b.bytes:sub(9, 8 + b.hlen)
    local a, e = find_random(h0, '"data_offsets":%[%d+,%d+%]')
    if a and R(2) == 1 then -- swap, shift or overlap the real numbers
      local x, y = h0:sub(a, e):match("(%d+),(%d+)")
      x, y = tonumber(x), tonumber(y)
      local d = pick { 1, 4, 8, -4 }
      o = pick { ("[%d,%d]"):format(y, x), ("[%d,%d]"):format(x + d, y + d), ("[%d,%d]"):format(x, y + d),
        ("[%d,%d]"):format(0, y - x) }
    end
    return with_header(b, function(h) return replace_random(h, '"data_offsets":%[[^%]]*%]', '"data_offsets":' .. o), "offsets " .. o end)
  end,
  function(b) -- duplicate or drop a tensor entry (text)
    return with_header(b, function(h)
      local a, e = find_random(h, '"[^"]+":{"dtype":"[^"]*","shape":%[[^%]]*%],"data_offsets":%[[^%]]*%]}')
      if not a then return h, "no entry" end
      local entry = h:sub(a, e)
      if R(2) == 1 then return splice(h, a, e, entry .. "," .. entry), "duplicated " .. entry:sub(1, 60) end
      local after = h:sub(e + 1, e + 1) == "," and 1 or 0
      return splice(h, a, e + after, ""), "dropped " .. entry:sub(1, 60)
    end)
  end,
  function(b) -- deep nesting
    local depth = pick { 100, 1000, 100000 }
    local nest = string.rep("[", depth) .. string.rep("]", depth)
    return with_header(b, function(h) return replace_random(h, '"shape":%[[^%]]*%]', '"shape":' .. nest), "nesting " .. depth end)
  end,
  function(b) -- non-UTF-8 bytes inside a string
    local bad = pick { "\xff", "\xfe\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\0", "\\u0000",
      "\\ud800", "\\uZZZZ" }
    return with_header(b, function(h)
      local a = find_random(h, '"[%w_.]+"')
      if not a then return h, "no string" end
      return splice(h, a + 1, a, bad), "bytes " .. bad:gsub("[^%w\\]", function(c) return ("\\x%02x"):format(c:byte()) end)
    end)
  end,
  function(b) -- huge numbers in place of any number
    local n = pick(huge)
    return with_header(b, function(h) return replace_random(h, "%d+", n), "number " .. n end)
  end,
  function(b) -- spliced bytes in the header
    local junk = pick { "{", "}", ",", ":", '"', "[", "]", " ", "\n", "null", "true", "1", '"__metadata__":{}' }
    return with_header(b, function(h)
      local i = R(#h)
      if R(2) == 1 then return splice(h, i, i, junk), "replaced byte " .. i .. " by " .. junk end
      return splice(h, i, i - 1, junk), "inserted " .. junk .. " at " .. i
    end)
  end,
  function(b) return structured(b) end,
}

-- Structured edits through mech.load_tensors / mech.save_tensors: a valid file with wrong contents.
local option_values = { -1, 0, 1, 2, 3, 7, 8, 16, 2 ^ 24, 2 ^ 24 + 1, 2 ^ 31, 2 ^ 53, math.mininteger, math.maxinteger,
  1.5, 1e308, "x", "", "mlp", "glu", "none", "mamba", "attention", true, false, {}, { 1 } }
function structured(b)
  write(dir .. "/base.safetensors", b.bytes)
  local t, meta = mech.load_tensors(dir .. "/base.safetensors")
  local names = {}
  for k in pairs(t) do names[#names + 1] = k end
  table.sort(names)
  local what
  local kind = R(6)
  if kind <= 2 and meta["mechlab.config"] then
    local c = json.decode(meta["mechlab.config"])
    local keys = { "arch", "d_model", "n_layers", "vocab", "n_heads", "max_pos", "pos_emb", "d_conv", "d_state", "expand",
      "feature_dim", "long_only", "no_conv", "state_mixer", "seed", "bogus" }
    local k = pick(keys)
    local v = R(8) == 1 and nil or pick(option_values)
    if type(v) == "number" and math.type(v) ~= "integer" and R(2) == 1 then v = math.tointeger(v) or v end
    c[k] = v
    meta["mechlab.config"] = R(10) == 1 and pick { "", "{", "[]", "null", '{"arch":"attention"}' } or json.encode(c)
    what = "config " .. k .. " = " .. tostring(v)
  elseif kind == 3 and meta["optimizer.step"] then
    local k = pick { "optimizer.step", "optimizer.beta1", "optimizer.beta2", "optimizer.eps", "optimizer.weight_decay" }
    local v = R(6) == 1 and nil or pick(huge)
    meta[k] = v
    what = "metadata " .. k .. " = " .. tostring(v)
  elseif kind == 4 then
    local k = pick(names)
    t[k] = nil
    what = "removed tensor " .. k
  elseif kind == 5 then
    local k = pick(names)
    local s = t[k]:shape()
    local shapes = { { 0 }, { 1 }, { t[k]:numel() } }
    local grown = {}
    for i, d in ipairs(s) do grown[i] = d end
    if #grown > 0 then grown[R(#grown)] = grown[R(#grown)] + 1 end
    shapes[#shapes + 1] = grown
    local shape = pick(shapes)
    t[k] = R(3) == 1 and mech.zeros(shape, { dtype = "int32" }) or mech.zeros(shape)
    what = "reshaped " .. k
  else
    local k = pick(names)
    local renamed = pick { k .. "x", (k:gsub("%d", "9")), "lm_head.weight", "optimizer.exp_avg", "", " " .. k }
    if renamed ~= "" then t[renamed] = t[k] end
    t[k] = nil
    what = "renamed " .. k .. " to " .. renamed
  end
  local ok, err = pcall(mech.save_tensors, dir .. "/structured.safetensors", t, meta)
  if not ok then return b.bytes, "unchanged (" .. tostring(err) .. ")" end
  return read(dir .. "/structured.safetensors"), what
end

------------------------------------------------------------------------------------------------
-- The campaign

local tokens = mech.tensor({ { 0, 1, 2, 1, 0 } }, { dtype = "int32" })
local start = mech.sys.time()
local count, loaded, refused, failures = 0, 0, 0, 0
local by_kind = {}
while (opts.mutants == 0 or count < opts.mutants) and mech.sys.time() - start < opts.seconds do
  local b = pick(bases)
  local k = R(#mutations)
  local bytes, what = mutations[k](b)
  count = count + 1
  write(note_path, ("%d %s mutation %d: %s\n"):format(count, b.name, k, what))
  write(mutant_path, bytes)
  local t0 = mech.sys.time()
  local ok, m = pcall(mech.load, mutant_path, b.options)
  local dt = mech.sys.time() - t0
  local problem
  if ok then
    loaded = loaded + 1
    local fine, err = pcall(m.forward, m, tokens)
    if not fine then problem = "loaded, but forward failed: " .. tostring(err) end
  else
    refused = refused + 1
    if type(m) ~= "string" or not m:find("^load") then problem = "unexpected error: " .. tostring(m) end
    local first = tostring(m):gsub("^load: ", ""):gsub("^[^ ]*mutant.safetensors: ", ""):match("^[^%d'(]+") or "?"
    by_kind[first] = (by_kind[first] or 0) + 1
  end
  if dt > opts.slow then problem = ("took %.1f s"):format(dt) end
  if problem then
    failures = failures + 1
    io.stderr:write(("FAIL mutant %d (%s, mutation %d: %s): %s\n"):format(count, b.name, k, what, problem))
    write(dir .. "/failure" .. failures .. ".safetensors", bytes)
  end
  if count % 200 == 0 then collectgarbage() end
end

local kinds = {}
for k, n in pairs(by_kind) do kinds[#kinds + 1] = { k, n } end
table.sort(kinds, function(x, y) return x[2] > y[2] end)
print(("checkpoint fuzz: seed %d, %d mutants of %d bases in %.1f s: %d loaded as valid models, %d refused, %d failures")
  :format(opts.seed, count, #bases, mech.sys.time() - start, loaded, refused, failures))
for i = 1, math.min(8, #kinds) do print(("  %6d  %s"):format(kinds[i][2], kinds[i][1])) end
if failures > 0 then
  print("failing inputs: " .. dir .. "/failure*.safetensors")
  os.exit(1)
end
