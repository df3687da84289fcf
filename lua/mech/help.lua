-- mech.help: the one registry of mechlab's Lua API. Each entry: name, signature, a short
-- description and an example. help(x) / mech.help(x) print from it, and docs/api.md is generated
-- from it (`mechlab tools/gen_api_docs.lua`; tests/lua/test_api.lua fails when they differ or
-- when a function of `mech` or a method of its classes has no entry).
--   help(mech.zeros)  help("model")  help("cache:get")  help(model)  help()
local H = {}

-- Topics, in the order of docs/api.md: key, title, what an entry's name starts with.
H.topics = {
  { key = "mech", title = "Tensors and autograd (`mech.*`)", prefix = "mech." },
  { key = "model", title = "Models (`mech.model`, `model:*`)", prefix = "model:" },
  { key = "mech.optim", title = "Optimizers (`mech.optim.*`)", prefix = "mech.optim." },
  { key = "opt", title = "Optimizer methods (`opt:*`)", prefix = "opt:" },
  { key = "mech.nn", title = "Layers and modules (`mech.nn.*`)", prefix = "mech.nn." },
  { key = "cache", title = "Caches (`cache:*`)", prefix = "cache:" },
  { key = "hook", title = "Hook handles (`handle:*`)", prefix = "handle:" },
  { key = "mech.interp", title = "Interventions (`mech.interp.*`)", prefix = "mech.interp." },
  { key = "map", title = "Patching maps (`map:*`)", prefix = "map:" },
  { key = "interchange", title = "The paper's evaluator (`require \"mech.interchange\"`)", prefix = "ic." },
  { key = "mech.task", title = "Tasks (`mech.task.*`, `task:*`)", prefix = "mech.task." },
  { key = "task", title = "Task methods (`task:*`)", prefix = "task:" },
  { key = "dataset", title = "Datasets (`dataset:*`)", prefix = "dataset:" },
  { key = "generator", title = "Random generators (`gen:*`)", prefix = "gen:" },
  { key = "mech.plot", title = "Figures (`mech.plot.*`)", prefix = "mech.plot." },
  { key = "mech.viz", title = "Viewers (`mech.viz.*`)", prefix = "mech.viz." },
  { key = "mech.sys", title = "System services (`mech.sys.*`)", prefix = "mech.sys." },
  { key = "mech.train", title = "Training (`require \"mech.train\"`, `train.run` and its config)", prefix = "mech.train." },
}

-- The class of a userdata or table (its metatable's __name) -> topic key.
H.classes = { ["mech.Model"] = "model", ["mech.Cache"] = "cache", ["mech.HookHandle"] = "hook",
  ["mech.PatchingMap"] = "map", ["mech.Task"] = "task", ["mech.Dataset"] = "dataset",
  ["mech.Generator"] = "generator", ["mech.Tensor"] = "mech", ["mech.Optimizer"] = "opt" }

H.entries = {}
local function E(name, signature, description, example)
  H.entries[#H.entries + 1] = { name = name, signature = signature, description = description, example = example }
end

-- An elementwise or reduction op: mech.NAME(t, ...) and t:NAME(...) (docs/tensors.md).
local function op(name, args, what, example)
  E("mech." .. name, "mech." .. name .. "(" .. args .. ") -> tensor", what ..
    " Also a method: `t:" .. name .. "(...)`; docs/tensors.md gives dtypes and gradients.", example)
end

-- ---------------------------------------------------------------- tensors
E("mech.tensor", "mech.tensor(values[, {dtype=, requires_grad=}]) -> tensor",
  "A tensor from a number or a nested table of numbers (float32 unless `dtype = \"int32\"`).",
  'local t = mech.tensor({{1, 2}, {3, 4}}, { dtype = "int32" })')
E("mech.zeros", "mech.zeros(shape...[, {dtype=, requires_grad=}]) -> tensor",
  "A tensor of zeros; the shape is numbers or one table.", "local z = mech.zeros(2, 3)")
E("mech.ones", "mech.ones(shape...[, {dtype=, requires_grad=}]) -> tensor", "A tensor of ones.",
  "local o = mech.ones({2, 3})")
E("mech.full", "mech.full(shape..., value[, {dtype=, requires_grad=}]) -> tensor",
  "A tensor filled with `value`.", 'local m = mech.full(2, 3, -100, { dtype = "int32" })')
E("mech.arange", "mech.arange([start,] stop[, step][, {dtype=}]) -> tensor",
  "The numbers start, start + step, ... below stop, as 1-D tensor.", "local r = mech.arange(5)")
E("mech.rand", "mech.rand(shape...[, {generator=, requires_grad=}]) -> tensor",
  "Uniform numbers in [0, 1) from the default generator (mech.manual_seed) or `generator`.",
  "local u = mech.rand(2, 3)")
E("mech.randn", "mech.randn(shape...[, {generator=, requires_grad=}]) -> tensor",
  "Standard normal numbers from the default generator or `generator`.",
  "local x = mech.randn(2, 3, { generator = mech.Generator(1) })")
E("mech.randint", "mech.randint(low, high, shape...[, {generator=}]) -> int32 tensor",
  "Integers uniform in [low, high) (high excluded, as torch.randint) from the default generator or `generator`: one `gen:below` draw each, so a seeded generator gives the same tensor on every machine.",
  "local k = mech.randint(0, 10, 2, 3, { generator = mech.Generator(1) })")
E("mech.Generator", "mech.Generator(seed[, stream]) -> gen",
  "A Philox random stream: the same numbers on every machine and thread count.",
  "local g = mech.Generator(42); print(g:uniform())")
E("mech.manual_seed", "mech.manual_seed(seed)", "Reseeds the default generator of mech.rand, mech.randn and mech.randint.",
  "mech.manual_seed(0)")
E("mech.no_grad", "mech.no_grad(fn, ...) -> fn's results",
  "Calls fn(...) with gradient recording off (as torch.no_grad); needed to edit parameters in place.",
  "mech.no_grad(function() model:param('embed.W_E'):fill_(0) end)")
E("mech.grad_enabled", "mech.grad_enabled() -> boolean", "Whether operations record gradients now.",
  "print(mech.grad_enabled())")
E("mech.gradcheck", "mech.gradcheck(fn, {inputs...}[, {eps=, atol=, rtol=}]) -> true or message",
  "Compares fn's autograd gradients with central differences (double-precision accumulation).",
  "print(mech.gradcheck(function(x) return (x * x):sum() end, { mech.randn(3, { requires_grad = true }) }))")
E("mech.threads", "mech.threads([n]) -> n", "Sets (with n, in [1, 64], OpenBLAS's ceiling) and returns the thread count of OpenBLAS and the loops. "
  .. "mechlab starts at one, for the same bits on every machine; the interchange evaluator's results are the same at any count "
  .. "(its combinations run side by side), so an analysis in the REPL can take every core.",
  "mech.threads(1)")
E("mech.is_tensor", "mech.is_tensor(x) -> boolean", "Whether x is a live mech.Tensor.", "print(mech.is_tensor(mech.zeros(1)))")
E("mech.memory_bytes", "mech.memory_bytes() -> bytes", "Bytes held by live tensor storages.", "print(mech.memory_bytes())")
for _, o in ipairs {
  { "add", "a, b", "a + b, broadcasting.", "local c = mech.add(mech.ones(2), 1)" },
  { "sub", "a, b", "a − b, broadcasting.", "local c = mech.sub(mech.ones(2), 1)" },
  { "mul", "a, b", "a · b, broadcasting.", "local c = mech.mul(mech.ones(2), 3)" },
  { "div", "a, b", "a / b, broadcasting; always float32.", "local c = mech.div(mech.ones(2), 4)" },
  { "pow", "a, b", "aᵇ, broadcasting.", "local c = mech.pow(mech.arange(3), 2)" },
  { "remainder", "a, b", "a − floor(a/b)·b, broadcasting: the divisor's sign (Python's and PyTorch's %, also `a % b`); int32 stays int32.",
    "local r = mech.remainder(mech.tensor({-7, 7}), 3)" },
  { "fmod", "a, b", "C's fmod, broadcasting: the dividend's sign (torch.fmod); int32 stays int32.",
    "local r = mech.fmod(mech.tensor({-7, 7}), 3)" },
  { "floor_divide", "a, b", "floor(a/b), broadcasting (PyTorch's //, also `a // b`); int32 stays int32, int32 by 0 is an error; zero gradient.",
    "local q = mech.floor_divide(mech.tensor({-7, 7}), 2)" },
  { "maximum", "a, b", "Elementwise maximum.", "local c = mech.maximum(mech.randn(3), 0)" },
  { "minimum", "a, b", "Elementwise minimum.", "local c = mech.minimum(mech.randn(3), 0)" },
  { "eq", "a, b", "int32 0/1 mask of a == b.", "local m = mech.eq(mech.arange(3), 1)" },
  { "ne", "a, b", "int32 0/1 mask of a ~= b.", "local m = mech.ne(mech.arange(3), 1)" },
  { "lt", "a, b", "int32 0/1 mask of a < b.", "local m = mech.lt(mech.arange(3), 1)" },
  { "le", "a, b", "int32 0/1 mask of a <= b.", "local m = mech.le(mech.arange(3), 1)" },
  { "gt", "a, b", "int32 0/1 mask of a > b.", "local m = mech.gt(mech.arange(3), 1)" },
  { "ge", "a, b", "int32 0/1 mask of a >= b.", "local m = mech.ge(mech.arange(3), 1)" },
  { "neg", "a", "−a.", "local c = mech.neg(mech.ones(2))" },
  { "exp", "a", "eˣ elementwise.", "local c = mech.exp(mech.zeros(2))" },
  { "log", "a", "ln x elementwise.", "local c = mech.log(mech.ones(2))" },
  { "sqrt", "a", "√x elementwise.", "local c = mech.sqrt(mech.ones(2))" },
  { "abs", "a", "|x| elementwise.", "local c = mech.abs(mech.randn(2))" },
  { "tanh", "a", "tanh x elementwise.", "local c = mech.tanh(mech.randn(2))" },
  { "sigmoid", "a", "1 / (1 + e⁻ˣ) elementwise.", "local c = mech.sigmoid(mech.randn(2))" },
  { "relu", "a", "max(x, 0) elementwise.", "local c = mech.relu(mech.randn(2))" },
  { "gelu", "a", "GELU (exact erf form) elementwise.", "local c = mech.gelu(mech.randn(2))" },
  { "silu", "a", "x · σ(x) elementwise.", "local c = mech.silu(mech.randn(2))" },
  { "softplus", "a", "ln(1 + eˣ) elementwise.", "local c = mech.softplus(mech.randn(2))" },
  { "sin", "a", "sin x elementwise.", "local c = mech.sin(mech.randn(2))" },
  { "cos", "a", "cos x elementwise.", "local c = mech.cos(mech.randn(2))" },
  { "clamp", "a, lo, hi", "min(max(x, lo), hi); nil leaves a side unbounded.", "local c = mech.clamp(mech.randn(3), -1, 1)" },
  { "where", "cond, a, b", "a where cond ≠ 0, else b (broadcasting).", "local c = mech.where(mech.gt(mech.randn(3), 0), 1, -1)" },
  { "allclose", "a, b[, rtol, atol]", "Whether a and b have one shape and are close everywhere (returns a boolean).",
    "print(mech.allclose(mech.ones(2), mech.ones(2)))" },
  { "sum", "a[, dim[, keepdim]]", "Sum of all elements, or along dim.", "local s = mech.sum(mech.ones(2, 3), 1)" },
  { "mean", "a[, dim[, keepdim]]", "Mean of all elements, or along dim.", "local s = mech.mean(mech.ones(2, 3), 0)" },
  { "var", "a[, dim[, keepdim]]", "Variance (unbiased) of all elements, or along dim.", "local v = mech.var(mech.randn(10))" },
  { "max", "a[, dim[, keepdim]]", "Maximum; along dim also the int32 indices (values, indices).",
    "local v, i = mech.max(mech.randn(2, 3), 1)" },
  { "min", "a[, dim[, keepdim]]", "Minimum; along dim also the int32 indices.", "local v, i = mech.min(mech.randn(2, 3), 1)" },
  { "argmax", "a[, dim[, keepdim]]", "int32 indices of the maxima.", "local i = mech.argmax(mech.randn(2, 3), 1)" },
  { "argmin", "a[, dim[, keepdim]]", "int32 indices of the minima.", "local i = mech.argmin(mech.randn(2, 3), 1)" },
  { "matmul", "a, b", "Matrix product with batch broadcasting (PyTorch's rules).", "local c = mech.matmul(mech.randn(2, 3), mech.randn(3, 4))" },
  { "linear", "x, w[, bias]", "x · wᵀ + bias (w is (out, in), as nn.Linear).", "local y = mech.linear(mech.randn(2, 3), mech.randn(4, 3))" },
  { "softmax", "a, dim", "Softmax along dim.", "local p = mech.softmax(mech.randn(2, 5), 1)" },
  { "log_softmax", "a, dim", "Log-softmax along dim.", "local lp = mech.log_softmax(mech.randn(2, 5), 1)" },
  { "gather", "a, dim, index", "Elements of a at int32 `index` along dim (torch.gather).", "local g = mech.gather(mech.randn(2, 3), 1, {{0}, {2}})" },
  { "index_select", "a, dim, index", "The slices of a at the int32 indices along dim.", "local r = mech.index_select(mech.randn(4, 3), 0, {0, 2})" },
  { "scatter_add", "a, dim, index, src", "a with src added at index along dim (torch.scatter_add).",
    "local s = mech.scatter_add(mech.zeros(3), 0, {0, 0, 2}, mech.ones(3))" },
  { "embedding", "weight, ids", "Rows of weight (V, D) at the int32 ids.", "local e = mech.embedding(mech.randn(10, 4), {1, 2})" },
  { "cat", "{a, b, ...}[, dim]", "Concatenation along dim (default 0).", "local c = mech.cat({ mech.ones(2), mech.zeros(3) })" },
  { "stack", "{a, b, ...}[, dim]", "Stacks tensors of one shape along a new dim.", "local s = mech.stack({ mech.ones(2), mech.zeros(2) })" },
  { "split", "a, size[, dim]", "Views of a in pieces of `size` along dim (a table).", "local parts = mech.split(mech.arange(6), 2)" },
  { "std", "a[, dim[, keepdim[, correction]]]", "Standard deviation of all elements, or along dim.", "local s = mech.std(mech.randn(10))" },
  { "norm", "a[, p[, dim[, keepdim]]]", "Vector p-norm (default 2; math.huge: max |x|; 0: count of nonzeros).",
    "local n = mech.norm(mech.randn(2, 3), 2, 1)" },
  { "cumsum", "a, dim", "Running sum along dim.", "local c = mech.cumsum(mech.arange(5), 0)" },
  { "sort", "a[, dim[, descending]]", "Sorted values along dim and their int32 indices (two results; stable).",
    "local v, i = mech.sort(mech.randn(5))" },
  { "argsort", "a[, dim[, descending]]", "The int32 indices that sort a along dim.", "local i = mech.argsort(mech.randn(5))" },
  { "topk", "a, k[, dim[, largest]]", "The k largest (or smallest) values along dim and their int32 indices.",
    "local v, i = mech.topk(mech.randn(10), 3)" },
  { "flatten", "a[, start_dim[, end_dim]]", "Dims start_dim..end_dim merged into one.", "local f = mech.flatten(mech.randn(2, 3, 4), 1)" },
} do op(o[1], o[2], o[3], o[4]) end
E("mech.einsum", "mech.einsum(spec, a, b, ...) -> tensor", "Einstein summation as torch.einsum (docs/tensors.md).",
  'local c = mech.einsum("ij,jk->ik", mech.randn(2, 3), mech.randn(3, 4))')
E("mech.layer_norm", "mech.layer_norm(x, weight[, bias[, eps]]) -> tensor",
  "LayerNorm over the last dim (biased variance, eps 1e-5 inside the sqrt), the models' own kernel, with gradients (docs/nn.md).",
  "local y = mech.layer_norm(mech.randn(2, 5, 4), mech.ones(4), mech.zeros(4))")
E("mech.rms_norm", "mech.rms_norm(x, weight[, eps]) -> tensor",
  "RMSNorm over the last dim: weight ⊙ x / sqrt(mean(x²) + eps), eps 1e-5 (Mamba's), with gradients.",
  "local y = mech.rms_norm(mech.randn(2, 5, 4), mech.ones(4))")
E("mech.causal_conv1d", "mech.causal_conv1d(x, weight[, bias]) -> tensor",
  "The mixers' short conv: depthwise and causal over x (B, L, D) with weight (D, K) or PyTorch's (D, 1, K); out[t] = bias + Σ_k w[k]·x[t-K+1+k]. With gradients.",
  "local y = mech.causal_conv1d(mech.randn(2, 6, 4), mech.randn(4, 3))")
E("mech.set_printoptions", "mech.set_printoptions{threshold=, edgeitems=, precision=, linewidth=, sci_mode=, profile=}",
  "How tensors print (PyTorch's options; profile \"default\", \"short\" or \"full\"; sci_mode true, false or \"auto\": scientific when magnitudes span 10³, except probabilities).",
  "mech.set_printoptions { precision = 2, sci_mode = false }")
E("t[index]", "t[i], t[{i, \"a:b\", {a, b, step}, ...}] -> view | number; t[index] = x",
  "Indexing (docs/tensors.md, \"Indexing\"): an integer selects along a dim (negative from the end), a slice string \"a:b:step\" or table {a, b[, step]} keeps it; the result is a view, a 0-dim one a number. Assigning writes a number or a tensor (broadcast) into the selection in place.",
  't[{0, ":", 1}] = 0')
H.entries[#H.entries].topic = "mech"
E("mech.get_printoptions", "mech.get_printoptions() -> table", "The current print options (set_printoptions takes the table back).",
  "local saved = mech.get_printoptions()")

-- ---------------------------------------------------------------- models
E("mech.model", "mech.model{arch= or mixer=, d_model=, n_layers=, vocab=, seed=, tie_embeddings=, ...} -> model",
  "Builds a language model; `mech.architectures` lists the archs and docs/mixers.md the options. An option the arch does not read is an error. `mixer` instead of `arch` takes a mech.nn Module class (a mixer written in Lua: every other key is one of its options), a mixer's name, or a module returning the class (docs/nn.md, \"Your own mixer\"). tie_embeddings = false gives the head its own lm_head.weight. precision = \"bf16\" runs the linear layers' products (the head's too) in bf16 with fp32 sums on AVX512_BF16, everything else in fp32 (docs/kernels.md, \"bf16 training\"; a CPU without it refuses); the default is \"fp32\".",
  'local model = mech.model { arch = "mamba", d_model = 16, n_layers = 2, vocab = 68, seed = 1 }')
E("mech.register_mixer", "mech.register_mixer(Class[, {name=, module=}]) -> name",
  "Registers a mech.nn Module class as a mixer of the language model (mech.model{mixer = Class} does it on first use). The name defaults to the class name in snake_case; `module` is what a fresh process requires to get the class back (mech.load, sweeps, resumed runs). A name taken by a built-in mixer, or by another class while models built with it are alive, is an error.",
  'local Id = mech.nn.Module:extend("HelpIdentity"); function Id:forward(x) return x * 1 end; print(mech.register_mixer(Id))')
E("mech.load", "mech.load(path[, {arch=, d_model=, ..., modules=}]) -> model, optimiser or nil, metadata",
  "Loads a checkpoint written by model:save (safetensors with the config in the metadata), or with the options table a plain PyTorch state dict (docs/interop.md). meta.task is the task the checkpoint records (meta.task_error: why it cannot be rebuilt). `modules`: the modules the file may name (its Lua mixer's, its Lua task's) beyond those loaded already or mechlab's own; the file alone never runs code (docs/security.md).",
  'local model, opt, meta = mech.load("run/checkpoint.safetensors", { modules = { "experiments.own_mixer" } })')
E("mech.allow_module", "mech.allow_module(name | {name, ...})",
  "Lets files loaded later in this process name these modules (a Lua mixer's or task's module in a checkpoint); as the `modules` option of mech.load, for every call (docs/security.md).",
  'mech.allow_module("experiments.own_mixer")')
E("mech.save_tensors", "mech.save_tensors(path, {name = tensor, ...}[, {key = string}])",
  "Writes float32/int32 tensors (and string metadata) to safetensors, atomically.",
  'mech.save_tensors(os.tmpname(), { x = mech.randn(2, 3) })')
E("mech.load_tensors", "mech.load_tensors(path) -> {name = tensor}, metadata",
  "Reads the float32/int32 tensors of a safetensors file (int64 and float16 are refused: convert in PyTorch).",
  'local p = os.tmpname(); mech.save_tensors(p, { x = mech.ones(2) }); local t = mech.load_tensors(p)')
E("mech.json_decode", "mech.json_decode(text[, name]) -> value",
  "Reads JSON text (strict RFC 8259, the reader of checkpoints) as Lua data: objects and arrays as tables, null as nil, whole numbers as integers; malformed text raises an error naming `name` and the byte offset. An object that repeats a key is refused (\"duplicate key\"), as I-JSON (RFC 7493) requires: a repeated key in a checkpoint or manifest is an error, never a choice between values. Held to JSONTestSuite (docs/ARCHITECTURE.md, JSON). require('mech.json').decode is this function.",
  'local t = mech.json_decode(\'{"steps": 20, "lr": 0.001, "tags": ["a", "b"]}\')')
E("mech.adamw", "mech.adamw(model[, {beta1=, beta2=, eps=, weight_decay=}]) -> optimiser",
  "An AdamW optimiser over every parameter of the model, the one model:train_step, mech.train and checkpoints use; mech.optim.adamw is the same update over any tensors, in groups.", "local opt = mech.adamw(model, { weight_decay = 0.1 })")
E("mech.optim.adamw", "mech.optim.adamw(params[, {lr=, betas=, eps=, weight_decay=}]) -> opt",
  "AdamW (torch.optim.AdamW, same update kernel as mech.adamw) over a list of leaf tensors that require grad, a mech.Model, a module with :parameters() / :named_parameters(), or a list of groups {params = ..., lr = ..., ...} whose missing options come from the second argument. Defaults lr 1e-3, betas {0.9, 0.999}, eps 1e-8, weight_decay 0.01 (docs/nn.md).",
  "local opt = mech.optim.adamw({ mech.randn(3, { requires_grad = true }) }, { lr = 1e-2 })")
E("mech.optim.sgd", "mech.optim.sgd(params[, {lr=, momentum=, dampening=, nesterov=, weight_decay=}]) -> opt",
  "SGD as torch.optim.SGD (momentum buffer, dampening, Nesterov, L2 weight decay), over the same kinds of params and groups as mech.optim.adamw. Defaults lr 1e-3, the rest 0 / false.",
  "local opt = mech.optim.sgd({ mech.randn(3, { requires_grad = true }) }, { lr = 0.1, momentum = 0.9 })")
E("mech.optim.clip_grad_norm", "mech.optim.clip_grad_norm(params, max_norm) -> total_norm",
  "Scales the gradients of params (tensors, a model, a module or an optimizer) so their global L2 norm is at most max_norm, as torch.nn.utils.clip_grad_norm_; returns the norm before clipping.",
  "local norm = mech.optim.clip_grad_norm(opt, 1.0)")
E("opt:step", "opt:step()", "One update of every parameter that has a .grad (the others are skipped, as PyTorch).", "opt:step()")
E("opt:zero_grad", "opt:zero_grad([set_to_none = true])",
  "Drops every parameter's .grad (or zeroes it with false).", "opt:zero_grad()")
E("opt:set_lr", "opt:set_lr(lr[, group])", "Sets the learning rate of every group, or of one (0-based); with mech.lr_schedule: opt:set_lr(sched(step)).",
  "opt:set_lr(1e-4)")
E("opt:get_lr", "opt:get_lr([group = 0]) -> lr", "The learning rate of a group (also `opt.lr` for group 0; `opt.lr = x` sets every group's).", "print(opt:get_lr())")
E("opt:param_groups", "opt:param_groups() -> {{lr=, weight_decay=, ..., params = {tensor, ...}}, ...}",
  "The groups: copies of their options and their tensors.", "for _, g in ipairs(opt:param_groups()) do print(g.lr, #g.params) end")
E("opt:parameters", "opt:parameters() -> {tensor, ...}", "Every tensor the optimizer updates, in order.",
  "print(#opt:parameters())")
E("opt:state_dict", "opt:state_dict() -> {kind=, state=, param_groups=}",
  "A snapshot of the state, PyTorch's layout: state[i] (0-based) = {step=, exp_avg=, exp_avg_sq=} or {step=, momentum_buffer=}, param_groups with 0-based params indices.",
  "local sd = opt:state_dict()")
E("opt:load_state_dict", "opt:load_state_dict(sd)",
  "Restores a state_dict of an optimizer of the same kind, groups and shapes (checked before anything changes): training resumes exactly.",
  "opt:load_state_dict(sd)")
-- ---------------------------------------------------------------- layers and modules (docs/nn.md, "Layers")
E("mech.nn.LM", "mech.nn.LM{mixer=, d_model=, n_layers=, vocab=, tie_embeddings=, ...} -> model",
  "The paper's language model around a mixer (a Module class written in Lua, a built-in mixer's layer class such as mech.nn.Mamba, or a name): the mech.Model mech.model{mixer = ...} builds (docs/nn.md, \"Your own mixer\").",
  'local lm = mech.nn.LM { mixer = mech.nn.Mamba, d_model = 16, n_layers = 2, vocab = 20 }')
E("mech.nn.register_mixer", "mech.nn.register_mixer(Class[, {name=, module=}]) -> name",
  "mech.register_mixer: a Module class as a mixer of the paper's language model (docs/nn.md, \"Your own mixer\").",
  'local Id = mech.nn.Module:extend("HelpIdentity2"); function Id:forward(x) return x * 1 end; print(mech.nn.register_mixer(Id))')
E("mech.nn.Module", "mech.nn.Module:extend(name) -> Class; Class{...} or Class(...) -> module",
  "The base class of layers and of modules written in Lua: a class with init (parameters with self:param, children assigned to fields) and forward; calling a module runs forward and fires its output as the hook site at its path.",
  'local Gate = mech.nn.Module:extend("Gate"); function Gate:init(d) self.proj = mech.nn.Linear(d, d) end; function Gate:forward(x) return mech.sigmoid(self.proj(x)) * x end')
E("mech.nn.Module.param", "module:param(name, shape[, {init=, fan=, generator=}]) -> tensor",
  "Registers a parameter (a leaf that requires grad). init: \"linear_weight\", \"linear_bias\", \"embedding\", \"conv_weight\", \"conv_bias\" (PyTorch's defaults; fan = in_features or K), \"ones\", \"zeros\" (default), {normal = std}, {uniform = {a, b}} or a function(t, gen). Registering a name twice is an error naming the module.",
  'self.w = self:param("w", { 64 }, { init = "ones" })')
E("mech.nn.Module.add_module", "module:add_module(name, child[, state_prefix])",
  "Adds a child (as assigning it to a field does) whose parameters' state-dict names start with state_prefix instead of name (\"\" puts them at the module's own level); its hook path stays name.",
  'self:add_module("blocks", mech.nn.ModuleList(), "backbone.layers")')
E("mech.nn.Module.named_parameters", "module:named_parameters() -> {{name, tensor}, ...}",
  "Every parameter with its state-dict name, in registration order (own parameters and children interleaved as registered).",
  "for _, np in ipairs(layer:named_parameters()) do print(np[1]) end")
E("mech.nn.Module.parameters", "module:parameters() -> {tensor, ...}", "Every parameter, in the order of named_parameters; what mech.optim takes.",
  "local opt = mech.optim.adamw(layer:parameters())")
E("mech.nn.Module.param_specs", "module:param_specs() -> {{name=, shape=, init=, fan=}, ...}",
  "Each parameter's state-dict name, shape and init kind, in state order.", "print(mech.nn.Linear(4, 2):param_specs()[1].init)")
E("mech.nn.Module.set_parameter", "module:set_parameter(name, tensor)", "Replaces a parameter's tensor by another of the same shape.",
  'layer:set_parameter("weight", mech.zeros(2, 4):requires_grad_())')
E("mech.nn.Module.get_parameter", "module:get_parameter(name) -> tensor", "A parameter by its state-dict name.",
  'local w = layer:get_parameter("weight")')
E("mech.nn.Module.children", "module:children() -> {module, ...}", "The direct children in assignment order.", "print(#block:children())")
E("mech.nn.Module.named_children", "module:named_children() -> {{name, module}, ...}", "The direct children with their field names.",
  "for _, c in ipairs(block:named_children()) do print(c[1]) end")
E("mech.nn.Module.modules", "module:modules() -> {module, ...}", "The module and all its descendants, in tree order.", "print(#block:modules())")
E("mech.nn.Module.path", "module:path() -> string", "The module's path in its tree (\"blocks.1.mixer\"; \"\" for a root): the name of its output's hook site.",
  "print(block.mixer:path())")
E("mech.nn.Module.state_dict", "module:state_dict() -> {name = tensor}", "The parameters by state-dict name (detached, sharing storage).",
  "local sd = block:state_dict()")
E("mech.nn.Module.load_state_dict", "module:load_state_dict(sd)",
  "Copies each tensor of sd into the parameter of that name; a missing or unexpected key or a shape that differs is an error naming the parameter's path and the expected shape, raised before anything changes.",
  "other:load_state_dict(block:state_dict())")
E("mech.nn.Module.num_params", "module:num_params() -> n", "The number of parameter elements.", "print(block:num_params())")
E("mech.nn.Module.zero_grad", "module:zero_grad()", "Drops every parameter's gradient.", "block:zero_grad()")
E("mech.nn.Module.train", "module:train([on = true]) -> module", "Sets .training on the whole tree.", "block:train()")
E("mech.nn.Module.eval", "module:eval() -> module", "module:train(false).", "block:eval()")
E("mech.nn.Module.apply", "module:apply(fn) -> module", "Calls fn(m) for every module of the tree, children first (as PyTorch).",
  "block:apply(function(m) print(m:path()) end)")
E("mech.nn.Module.hook_names", "module:hook_names() -> {name, ...}",
  "Every hook site of the tree: each module's output at its path, each HookPoint, and a built-in mixer layer's internal sites (\"blocks.0.mixer.pattern\").",
  "for _, n in ipairs(block:hook_names()) do print(n) end")
E("mech.nn.Module.internal_sites", "module:internal_sites() -> {name, ...}",
  "Sites a module fires inside its forward other than its children's, relative to it (a built-in mixer layer lists its C sites); {} by default.",
  "print(#mech.nn.Attention { d_model = 8 }:internal_sites())")
E("mech.nn.Module.run_with_cache", "module:run_with_cache(x...[, {names = filter}]) -> output, cache",
  "Runs the module and returns the activations of every hook site (or those a name, {pattern = Lua pattern}, list or function keeps; a name is literal: whole dot-separated parts) by name, detached.",
  'local y, cache = block:run_with_cache(x, { names = "mixer" })')
E("mech.nn.Module.run_with_hooks", "module:run_with_hooks(x..., {fwd_hooks = {{name, fn}, ...}} or {[name] = fn}) -> output",
  "Runs the module with hooks: fn(act, name) returns nil to observe or a replacement of the same shape; name is a hook name (an unknown one is an error with the closest) or, in fwd_hooks, a function(name).",
  'local y = block:run_with_hooks(x, { fwd_hooks = { { "attention_output", function(a) return a * 0 end } } })')
E("mech.nn.Module.add_hook", "module:add_hook(name, fn) -> handle", "A hook every later call of the module runs, until handle.remove() or reset_hooks().",
  'local h = block:add_hook("block_output", function(a, name) print(name) end)')
E("mech.nn.Module.reset_hooks", "module:reset_hooks()", "Removes every hook added with add_hook.", "block:reset_hooks()")
E("mech.nn.Module.new", "Class:new(...) -> module", "What Class(...) calls: a fresh instance, then its init(...).", "local lin = mech.nn.Linear:new(4, 2)")
E("mech.nn.Module.extend", "Class:extend(name) -> Class", "A subclass registered under name (mech.nn.registry[name]).",
  'local MyBlock = mech.nn.Block:extend("MyBlock")')
E("mech.nn.HookPoint", "mech.nn.HookPoint() -> module", "A named point inside a forward (TransformerLens's HookPoint): self.hook_x = mech.nn.HookPoint() in init, self.hook_x(t) in forward; its path is a hook site.",
  "self.hook_gate = mech.nn.HookPoint()")
E("mech.nn.Linear", "mech.nn.Linear(in_features, out_features[, {bias = true}]) -> module", "y = x·Wᵀ + b; weight (out, in), PyTorch's default init.",
  "local lin = mech.nn.Linear(64, 256)")
E("mech.nn.Embedding", "mech.nn.Embedding(num_embeddings, embedding_dim) -> module", "Rows of weight (V, D) at int32 ids; N(0, 1) init.",
  "local emb = mech.nn.Embedding(8196, 64)")
E("mech.nn.LayerNorm", "mech.nn.LayerNorm(d[, {eps = 1e-5, bias = true}]) -> module", "LayerNorm over the last dim (mech.layer_norm).",
  "local ln = mech.nn.LayerNorm(64)")
E("mech.nn.RMSNorm", "mech.nn.RMSNorm(d[, {eps = 1e-5}]) -> module", "RMSNorm over the last dim (mech.rms_norm), Mamba's.",
  "local norm = mech.nn.RMSNorm(64)")
E("mech.nn.Conv1d", "mech.nn.Conv1d(channels, kernel_size[, {bias = true}]) -> module",
  "The mixers' short convolution: depthwise and causal over (B, L, D), weight (D, 1, K) (mech.causal_conv1d).", "local conv = mech.nn.Conv1d(64, 4)")
E("mech.nn.MLP", "mech.nn.MLP{d_model=, kind = \"mlp\" | \"glu\", hidden = 4·d_model} -> module",
  "The paper's state mixer: fc2(gelu(fc1 x)), or GLU fc3(fc1 x ⊙ gelu(fc2 x)); sites hidden_pre and hidden_post.",
  "local mlp = mech.nn.MLP { d_model = 64 }")
E("mech.nn.Sequential", "mech.nn.Sequential(m1, m2, ...) -> module", "Runs its modules in turn; children named 0, 1, ... (0-based indexing, #seq).",
  "local s = mech.nn.Sequential(mech.nn.Linear(4, 8), mech.nn.Linear(8, 4))")
E("mech.nn.ModuleList", "mech.nn.ModuleList([{m1, ...}]) -> module", "Holds modules at 0, 1, ... (list[0], #list, list:append(m)); no forward of its own.",
  "local blocks = mech.nn.ModuleList(); blocks:append(mech.nn.Linear(4, 4))")
E("mech.nn.ModuleList.append", "list:append(module) -> list", "Adds a module at the next index.", "blocks:append(mech.nn.Linear(4, 4))")
E("mech.nn.Block", "mech.nn.Block{d_model=, mixer=, kind=, state_mixer = \"mlp\"} -> module",
  "The paper's block around a mixer (a module or a class): TransformerBlock r + mixer(LN1 r), then + MLP(LN2 r) (state_mixer mlp, glu or none); MambaBlock (kind \"mamba\", the default for Mamba) r + mixer(RMSNorm r). Parameter names and the six sites are the built-in block's.",
  "local blk = mech.nn.Block { d_model = 64, mixer = mech.nn.Attention { d_model = 64 } }")
for _, arch in ipairs(mech.architectures) do
  local name = (arch:gsub("^%l", string.upper):gsub("_(%w)", string.upper))
  E("mech.nn." .. name, "mech.nn." .. name .. "{d_model=, layer=, <options of mech.model>} -> module",
    "The built-in " .. arch .. " mixer as a layer (x (B, L, D) -> (B, L, D)): a private one-block model of the architecture runs its mixer; parameters are that model's leaves named as in its state dict relative to the mixer, and its internal sites fire under the layer's path. layer: the block index whose mixer it is (hybrids and BaseConv differ between even and odd blocks).",
    "local mixer = mech.nn." .. name .. " { d_model = 16 }")
end
E("mech.nn.cross_entropy", "mech.nn.cross_entropy(logits, targets) -> loss",
  "Mean cross-entropy of logits (N, V) or (B, L, V) against int32 targets (N) or (B, L), targets -100 ignored (F.cross_entropy's ignore_index): the fused kernel of the built-in models' loss, with its gradient.",
  "local loss = mech.nn.cross_entropy(mech.randn(4, 10), { 1, -100, 3, 9 })")
E("mech.nn.push_context", "mech.nn.push_context({fire = function(path, t) -> t, wants = function(path) -> boolean})",
  "Pushes a hook context: while it is on top, every site of a module tree goes to fire (which returns the activation or a replacement of its shape). What run_with_cache and run_with_hooks use, and how a host of Lua modules sees their sites.",
  "mech.nn.push_context({ fire = function(path, t) print(path) return t end })")
E("mech.nn.pop_context", "mech.nn.pop_context()", "Pops the top hook context (an error when there is none).", "mech.nn.pop_context()")
E("mech.nn.fire", "mech.nn.fire(path, t) -> t", "Fires site path with t through the top hook context (t itself when none is active).",
  'local y = mech.nn.fire("my_site", mech.zeros(2))')
E("mech.nn.wants", "mech.nn.wants(path) -> boolean", "Whether the top hook context wants site path (false with none): a layer may skip computing a site nobody reads.",
  'print(mech.nn.wants("blocks.0.mixer.q"))')
E("mech.nn.active", "mech.nn.active() -> boolean", "Whether a hook context is active.", "print(mech.nn.active())")
E("mech.nn.is_module", "mech.nn.is_module(x) -> boolean", "Whether x is an instance of a mech.nn class.", "print(mech.nn.is_module(mech.nn.Linear(2, 2)))")
E("mech.lr_schedule", "mech.lr_schedule{kind=, lr=, total=, warmup=} -> function(step) -> lr",
  "A learning-rate schedule (cosine, linear or constant with linear warmup).",
  'local lr = mech.lr_schedule { kind = "cosine", lr = 1e-3, total = 1000 }')
E("model:forward", "model:forward(tokens[, hooks]) -> logits (B, L, V)",
  "Runs int32 tokens (B, L) or (L); hooks is a table {[site] = fn(act, ctx)} (see model:run_with_hooks).",
  "local logits = model:forward(tokens)")
E("model:hidden", "model:hidden(tokens[, hooks]) -> h (B, L, D)", "The final hidden states (after the final norm, before the head).",
  "local h = model:hidden(tokens)")
E("model:unembed", "model:unembed(x) -> logits", "The final LayerNorm and the tied head on a residual (B, L, D) or (L, D): the logit lens on any cached residual.",
  'local lens = model:unembed(cache:get("resid_post", 0))')
E("model:run_with_cache", "model:run_with_cache(tokens[, {names=, grads=, targets=, rows=, objective=}]) -> logits, cache[, grads]",
  "Runs and keeps activations in a mech.Cache. names: a site name or a run of its dot-separated parts (literal; TransformerLens names work), {pattern = a Lua pattern}, a function(name) -> keep, or a list; grads = true also returns d objective / d activation.",
  'local logits, cache = model:run_with_cache(tokens, { names = "block_input" })')
E("model:run_with_hooks", "model:run_with_hooks(tokens, {[site] = fn(act, ctx)}) -> logits",
  "A forward with hooks for this call: fn observes (returns nothing) or returns a replacement of the same shape; ctx = {site, layer, name}.",
  'local logits = model:run_with_hooks(tokens, { ["blocks.1.mlp_output"] = function(a) return a * 0 end })')
E("model:add_hook", "model:add_hook(site, fn) -> handle", "A hook that stays until handle:remove(), the handle goes out of a `<close>` scope, or model:reset_hooks().",
  'local h <close> = model:add_hook("blocks.0.hook_resid_pre", function(a) print(a:shape()[2]) end)')
E("model:reset_hooks", "model:reset_hooks()", "Removes every hook added with model:add_hook.", "model:reset_hooks()")
E("model:hook_names", "model:hook_names([filter]) -> {{id=, name=, layer=, component=, shape=}, ...}", "Every hook site: its integer id, full name, layer, component and shape (B and L for batch and length), or those a name (literal), {pattern = a Lua pattern} or function keeps; prints one a line.",
  'for _, s in ipairs(model:hook_names("mixer")) do print(s.id, s.layer, s.component) end')
E("model:site", "model:site(layer, component) -> name", "The full site name \"blocks.{layer}.{component}\" (TransformerLens component names too); a bad layer is an error naming the layer count, a bad component one naming the layer's closest.",
  'print(model:site(0, "resid_pre"))   -- blocks.0.block_input')
E("model:param", "model:param(name) -> tensor", "A parameter by state-dict name or hook-style name (\"blocks.1.mixer.A_log\", \"embed.W_E\"; TransformerLens's per-head \"blocks.0.attn.W_Q\" and \"W_U\" as model:weight's views); it shares the model's storage.",
  'local A_log = model:param("blocks.1.mixer.A_log")')
E("model:weight", "model:weight(name[, layer]) -> tensor",
  "TransformerLens's weights as views of the model's parameters (writes go through, gradients flow): W_Q, W_K, W_V (H, D, d_head) and W_O (H, d_head, D) of an attention layer (slices of the fused Wqkv.weight and out_proj.weight), b_O, W_E (V, D), W_pos (max_pos, D), W_U (D, V; the tied head). model:param(\"blocks.0.attn.W_Q\") and param(\"W_U\") reach them too.",
  'local W_OV = mech.matmul(model:weight("W_V", 1)[0], model:weight("W_O", 1)[0])  -- head 0\'s OV circuit (D, D)')
E("model:generate", "model:generate(tokens[, {max_new=16, temperature=0, top_k=0, seed=0}]) -> tokens (B, L + max_new)",
  "Appends max_new tokens to each sequence: temperature 0 takes the argmax (greedy), a positive temperature samples from softmax(logits / temperature) among the top_k likeliest (0: all); the draws depend only on seed.",
  "local out = model:generate(tokens[{ { 0, 1 }, { 0, 5 } }], { max_new = 4, temperature = 0.8, seed = 1 })")
E("model:named_parameters", "model:named_parameters() -> {{name, tensor}, ...}", "Every parameter with its state-dict name.",
  "for _, p in ipairs(model:named_parameters()) do print(p[1]) end")
E("model:module", "model:module() -> mech.nn module",
  "The model as a mech.nn tree (embed, pos_embed, blocks with their norms, mixer and MLP, ln_final, unembed when untied) holding the model's own parameter tensors: a write through it is a write to the model, its forward equals model:forward, and each piece runs on its own (docs/nn.md, \"A model as a tree\").",
  "local mixer = model:module().blocks[0].mixer")
E("model:children", "model:children() -> {module, ...}", "The tree's top modules (model:module():children()).", "print(#model:children())")
E("model:named_children", "model:named_children() -> {{name, module}, ...}", "The tree's top modules with their names.",
  "for _, c in ipairs(model:named_children()) do print(c[1]) end")
E("model:modules", "model:modules() -> {module, ...}", "Every module of the tree, depth first.", "print(#model:modules())")
E("model:parameters", "model:parameters() -> {tensor, ...}", "Every parameter, in the order of named_parameters (what mech.optim takes).",
  "print(#model:parameters())")
E("model:tree", "model:tree() -> string", "The tree printed: each module with its parameter count, each parameter with its shape.",
  "print(model:tree())")
E("model:train", "model:train([on]) -> model", "Sets the tree's training flag (no layer of the paper's models uses it; modules of your own may).",
  "model:train()")
E("model:eval", "model:eval() -> model", "model:train(false).", "model:eval()")
E("model:config", "model:config() -> table", "The model's options (those of mech.model).", "print(model:config().arch)")
E("model:n_params", "model:n_params() -> count", "The parameter count as PyTorch counts it (tied embedding once).", "print(model:n_params())")
E("model:zero_grad", "model:zero_grad()", "Sets every parameter gradient to zero.", "model:zero_grad()")
E("model:loss", "model:loss(tokens, targets[, hooks]) -> loss, logits (N, V), rows (N)",
  "Mean cross-entropy at the rows whose target is not -100; also the logits there and their flat indices.",
  "local loss = model:loss(tokens, targets)")
E("model:train_step", "model:train_step(opt, tokens, targets, lr[, \"record\"]) -> {loss, correct, n, prob_sum[, nonfinite]}",
  "One AdamW step on a batch. A non-finite loss stops it before the update with an error naming the step and the first non-finite parameter; with \"record\" it goes on and the stats name it.",
  "local stats = model:train_step(opt, tokens, targets, 1e-3)")
E("model:nonfinite", "model:nonfinite() -> name or nil", "The first parameter (state-dict name) holding a NaN or infinity, or nil.",
  "print(model:nonfinite())")
E("model:evaluate", "model:evaluate(tokens, targets[, {precision = \"fp32\"}]) -> {loss, correct, n, prob_sum}",
  "Loss and argmax accuracy at the supervised rows, without gradients. precision = \"fp32\" runs a bf16 model in fp32 for this call (as the interchange evaluation does).", "local s = model:evaluate(tokens, targets); print(s.correct / s.n)")
E("model:save", "model:save(path[, {optimizer=, meta=, torch=}])",
  "Writes a checkpoint atomically (safetensors; config and metadata inside); torch = true writes PyTorch's full state dict (tied head, buffers) for a strict load_state_dict. A Lua mixer's class must come from a module `require` finds (its name and source hash are recorded): a class defined in a script is an error, as no other process could load the file.",
  'model:save("tiny.safetensors", { meta = { note = "tour" } })')

-- ---------------------------------------------------------------- caches and hooks
E("cache:get", "cache:get(component[, layer]) -> tensor",
  "An activation by component and layer, in mechlab's or TransformerLens's names (\"block_input\", \"resid_pre\", \"hook_resid_pre\"); a missing one is an error naming the closest.",
  'local r = cache:get("resid_pre", 1)   -- cache["blocks.1.block_input"]')
E("cache:has", "cache:has(name) -> boolean", "Whether the cache holds the site (`cache[name]` raises for a missing one).",
  'print(cache:has("blocks.0.mixer.q"))')
E("cache:names", "cache:names([filter]) -> {name, ...}", "The cached site names, sorted; filter: a name (literal, whole dot-separated parts), {pattern = a Lua pattern} or a function(name) -> keep.",
  'for _, n in ipairs(cache:names("mixer")) do print(n, cache[n]:shape()[2]) end')
E("cache:save", "cache:save(path)", "Writes the cached activations to safetensors under their full site names (numpy and PyTorch read it).",
  'cache:save(os.tmpname())')
E("cache:accumulated_resid", "cache:accumulated_resid([{layer=, incl_mid=, apply_ln=}]) -> stack (n, B, L, D), labels",
  "The residual stream before each layer up to `layer` (default all, then the final residual: labels \"0_pre\", ..., \"final_post\"); incl_mid adds each layer's resid_mid site (hook_resid_mid: the residual after the mixer's add, where the block has an MLP); apply_ln as cache:apply_ln_to_stack.",
  "local acc, labels = cache:accumulated_resid { incl_mid = true }")
E("cache:decompose_resid", "cache:decompose_resid([{layer=, apply_ln=}]) -> stack (n, B, L, D), labels",
  "The residual entering `layer` (default: the final one) as its parts: embed, pos_embed, each layer's mixer output (\"0_attn_out\") and MLP output (\"0_mlp_out\"); they sum to it.",
  "local parts, labels = cache:decompose_resid()")
E("cache:stack_head_results", "cache:stack_head_results([{layer=, incl_remainder=, apply_ln=}]) -> stack (layers·H, B, L, D), labels",
  "Every attention head's output (attn.hook_result: z through its slice of W_O, no bias), labels \"L0H0\", ...; incl_remainder adds the final residual minus their sum.",
  "local heads, labels = cache:stack_head_results()")
E("cache:apply_ln_to_stack", "cache:apply_ln_to_stack(stack) -> stack",
  "The final LayerNorm on each part of a decomposition of the final residual: centred, divided by the final residual's cached scale, times ln_final.w (the parts then sum to LN_f(residual) − ln_final.b).",
  "local normed = cache:apply_ln_to_stack(parts)")
E("cache:logit_attrs", "cache:logit_attrs(stack, {answers=, wrong=, rows=}) -> attrs (n, B), bias (B)",
  "Direct logit attribution: each part of a final-residual decomposition through the final LayerNorm and W_U along W_U[:, answer] − W_U[:, wrong] (or the answer's logit) at each example's row (default the last); attrs:sum(0) + bias is the logit difference.",
  "local attrs, bias = cache:logit_attrs(parts, { answers = 3, wrong = 7 })")
E("handle:remove", "handle:remove()", "Removes the hook that model:add_hook returned this handle for (again: nothing).", "h:remove()")

-- ---------------------------------------------------------------- interventions
E("mech.interp.patch", "mech.interp.patch(model, tokens, {site=, source=, pos=, reference=}) -> logits",
  "Runs tokens with the site's activation overwritten by source (B, ...) or a per-position (L, ...) value at pos (nil: every position; an integer; or one per example). Interchange, mean, zero and resample ablations.",
  'local logits = mech.interp.patch(model, corrupted, { site = "blocks.1.block_input", source = cache["blocks.1.block_input"], pos = 5 })')
E("mech.interp.patching_map", "mech.interp.patching_map(model, clean, corrupted, {dataset=, first= | rows=, targets=; layers=, components=, positions=, metric=, threshold=, chance=, ablate=}) -> map",
  "Patches each layer × component's clean activation into the corrupted run at each position: map.values (layer·component, position) is (patched − corrupted) / (clean − corrupted) of the metric (\"prob\", \"logprob\", \"logit\" of targets at rows, or a function(logits)); the readout is where each answer is predicted, from `dataset` (the clean tokens are its documents from `first`) or from `rows`/`targets` (required: no guess); positions are integers (negative from the end) or, with `dataset`, position names of its task (a named column patches each example at its document's position of that name, labelled by the name); with labels, passes (the 0.01 filter) and a warning when the model is at chance. ablate = \"zero\" | \"mean\" (corrupted nil or left out) ablates instead, in the clean run: each cell replaces the activation (one head's slice for a per-head component such as \"z\") at that position by zero or its mean over the batch, and map.values is the metric's change (patched − clean).",
  "local map = mech.interp.patching_map(model, clean, corrupted, { dataset = ds, layers = { 1 }, positions = { 1, 5 } })")
E("mech.interp.plot_map", "mech.interp.plot_map(map, {out=, title=, filter=, vmin=, vmax=, xlabels=, ylabels=})",
  "Draws a patching map (values, row_labels, col_labels; threshold with den or dens, filter_note) as a heatmap (PNG, SVG or PDF and a CSV of the numbers); cells failing the filter are hatched.",
  'mech.interp.plot_map(map, { out = "map.png" })')
E("map:plot", "map:plot{out=, title=, filter=, vmin=, vmax=, xlabels=, ylabels=}", "mech.interp.plot_map on this map; xlabels / ylabels replace the column / row tick labels (one per column / row).", 'map:plot { out = "map.png" }')
E("mech.interp.site_mean", "mech.interp.site_mean(model, dataset, site[, {n=, batch=}]) -> (L, ...)",
  "The mean activation of a site per position over a dataset (a mean-ablation source).",
  'local mean = mech.interp.site_mean(model, ds, "blocks.1.block_input")')
E("mech.interp.short_conv_edit", "mech.interp.short_conv_edit(model, \"identity\" | \"zero\" | \"truncate\"[, {layer=, keep=}]) -> kernels edited",
  "Surgery on the short convolutions (Mamba conv1d, BaseConv/Based, Hyena, DeltaNet) of one layer or all (-1).",
  'mech.interp.short_conv_edit(mamba, "truncate", { layer = 1, keep = 2 })')
E("mech.interp.mamba_attention", "mech.interp.mamba_attention(model, tokens, layer) -> alpha (B, E, L, L)",
  "Mamba's implicit attention: y[b,t,e] = Σ_s α[b,e,t,s]·u[b,s,e].", "local alpha = mech.interp.mamba_attention(mamba, tokens, 0)")
E("mech.interp.attention_mass", "mech.interp.attention_mass(model, dataset[, {query=, key=, n=}]) -> {[layer] = mass}",
  "Per layer, the mean attention weight from a named query position (default query_item) to a named key position (default target_item_orig) over the first n documents: mixer.pattern summed over heads, or Mamba's implicit attention normalised per row; layers without an attention are absent.",
  'local mass = mech.interp.attention_mass(model, ds, { key = "target_item_orig" })')
E("mech.interp.attribution_patching", "mech.interp.attribution_patching(model, dataset, {sites=, positions=, label_types=, seed=, n=}) -> {{site=, layer=, component=, label_type=, position=, estimate=}, ...}",
  "Gradient attribution patching in C: per label type one corrupted run and one backward pass of Σ p(answer); estimate = mean over documents of (clean − corrupted)·gradient at the named position (ic.attribution_patching names and correlates them).",
  'local est = mech.interp.attribution_patching(model, ds, { sites = { "blocks.1.block_input" }, positions = { "query_item" } })')
E("mech.interp.interchange", "mech.interp.interchange(model, dataset[, {sites=, label_types=, positions=, seed=, batch=, first=, count=, swap=, reference=, workers=}]) -> result",
  "The paper's interchange sweep in C (ic.evaluate adds the site choice and names). positions: names of the dataset's task (task:positions(), its own names included; default: the paper's for AR/ATR/MQAR, the declared ones for a task of your own); label_types: query_item_orig and/or target_item_orig. workers: combinations run at once, each on one thread (default: mech.threads()); the results are the same bits for any number.", "local r = mech.interp.interchange(model, ds, { sites = { \"blocks.1.block_input\" } })")
E("mech.interp.path_patch", "mech.interp.path_patch(model, clean, corrupted, {sender=, receiver=, sender_head=, receiver_head=}) -> logits",
  "Path patching (Wang et al. 2022): the clean run with the receiver set to what it reads when the sender takes its corrupted value and every other mixer and MLP output is frozen to its clean value — the sender's effect through the residual stream only. Sites in either spelling; heads restrict a per-head site (attn.hook_z, hook_q, ...) to one head.",
  'local lg = mech.interp.path_patch(model, clean, corrupted, { sender = "blocks.0.attn.hook_z", sender_head = 1, receiver = "blocks.1.attn.hook_q", receiver_head = 0 })')
E("mech.interp.implicit_attention", "mech.interp.implicit_attention(model, tokens, layer) -> (B, heads, L, L)",
  "The layer's mixer as an L × L matrix per head or channel whose product with its values is its output: attention's and Based's pattern, DeltaNet's linear attention through the delta rule, H3's and Hyena's convolutions as causal Toeplitz matrices between their gates, Mamba's mamba_attention (docs/analysis.md).",
  "local A = mech.interp.implicit_attention(model, tokens, 1)")
E("mech.plot.layers", "mech.plot.layers(values[, {out=, title=, labels=, xlabel=, ylabel=}])",
  "A line over layers of values (n) or (series, n), e.g. a norm of cache:accumulated_resid per layer (mech.plot.lines); also mech.interp.plot_layers.",
  'mech.plot.layers(acc:pow(2):mean(3):mean(2):mean(1):sqrt(), { out = "resid.png" })')
E("mech.plot.components", "mech.plot.components(values, labels[, {out=, title=, ylabel=, series=}])",
  "A bar per component, e.g. direct logit attributions averaged over examples (mech.plot.bar); also mech.interp.plot_components.",
  'mech.plot.components(attrs:mean(1), labels, { out = "dla.png" })')
E("mech.interp.plot_layers", "mech.interp.plot_layers(values[, {out=, title=, labels=, xlabel=, ylabel=}])",
  "The same function as mech.plot.layers (a line over layers).",
  'mech.interp.plot_layers(acc:pow(2):mean(3):mean(2):mean(1):sqrt(), { out = "resid.png" })')
E("mech.interp.plot_components", "mech.interp.plot_components(values, labels[, {out=, title=, ylabel=, series=}])",
  "The same function as mech.plot.components (a bar per component).",
  'mech.interp.plot_components(attrs:mean(1), labels, { out = "dla.png" })')
E("mech.interp.kl_div", "mech.interp.kl_div(corrupted_logits, intervened_logits) -> number", "KL(corrupted ‖ intervened) / |V| of two logit vectors (the paper's metric).",
  "print(mech.interp.kl_div(mech.randn(5), mech.randn(5)))")
E("mech.interp.argmax", "mech.interp.argmax({values}, {names}) -> index", "max_perc's winner: 1-based, #names + 1 for \"nothing\"; ties to the larger name.",
  'print(mech.interp.argmax({ 0.1, 0.3 }, { "a", "b" }))')
E("mech.interp.corrupt", "mech.interp.corrupt(lo, hi, orig, gen) -> token", "The paper's corruption draw from the pool [lo, hi] (task:corrupt_range()), never orig.",
  "print(mech.interp.corrupt(4, 35, 10, mech.Generator(42, 7)))")
E("ic.evaluate", "ic.evaluate(model, dataset[, {layers=, components=, sites=, mixer_sites=, label_types=, positions=, seed=, batch=, first=, count=, swap=, workers=}]) -> res",
  "The paper's interchange evaluation: res.by_name[metric], res.passes[label] (the 0.01 filter), res.accuracy, res.chance and res.warning when the model is at chance. It runs its combinations on the machine's cores (workers=, default mech.sys.cores() up to 8; each worker copies the model and the clean cache): the results are the same bits for any number, whatever mech.threads() says.",
  "local res = ic.evaluate(model, ds, { layers = { 1 } })")
E("ic.sites", "ic.sites(model[, {sites=, layers=, components=, mixer_sites=}]) -> {site, ...}", "The sites a sweep patches.",
  "local sites = ic.sites(model, { layers = { 0 } })")
E("ic.attrib", "ic.attrib(res, label[, threshold]) -> value, passes, se", "Attribution (Eq. 3, ratio of means) of a label, whether it passes the filter, and its standard error over the documents (the delta method: the evaluation's attrib_se).",
  'print(ic.attrib(res, "1.KEY.query_item_orig.target_item_orig.block_input"))')
E("ic.check_accuracy", "ic.check_accuracy(res, model, dataset, first, count, fn)", "Sets res.accuracy and res.chance; at chance sets res.warning and prints it to stderr.",
  'ic.check_accuracy(res, model, ds, 0, 16, "mine")')
E("ic.write_csv", "ic.write_csv(res, path_or_writer, step, split)", "Appends every metric to a long-format metrics CSV.", 'ic.write_csv(res, "ic.csv", 0, "test")')
E("ic.evaluator", "ic.evaluator{every=, split=, on_result=, ...} -> evaluator", "The sweep as a training-loop evaluator (train.run{evaluators = ...}).",
  "local ev = ic.evaluator { every = 1000, layers = { 1 } }")
E("ic.readout", "ic.readout(dataset, first, n) -> rows, targets", "Where documents' first answers are read (target_item − 1 for AR and ATR, MQAR's first query) and the answers, as int32 tensors (patching_map's rows and targets).",
  "local rows, targets = ic.readout(ds, 0, 8)")
E("ic.corrupt", "ic.corrupt(dataset, first, n[, {position=, seed=}]) -> clean, corrupted", "Token batches with the named item (default the key, query_item_orig; any name of the task's positions()) corrupted by the paper's draw.",
  "local clean, corrupted = ic.corrupt(ds, 0, 8)")
E("ic.attention_mass", "ic.attention_mass(model, dataset[, {query=, key=, n=}]) -> {[layer] = mass}",
  "Mean attention weight from a named query position to a named key position (attention, Based, Mamba's implicit attention).",
  "local mass = ic.attention_mass(model, ds)")
E("ic.plot_map", "ic.plot_map(map[, {out=, title=, filter=, vmin=, vmax=}])",
  "The drawing behind mech.interp.plot_map and map:plot (which check their options first): the map's values as a mech.plot.heatmap, cells failing the filter hatched.",
  'ic.plot_map(map, { out = "map.png" })')
E("ic.checked_plot_map", "ic.checked_plot_map(map, {out=, title=, filter=, vmin=, vmax=, xlabels=, ylabels=})",
  "mech.interp.plot_map and map:plot themselves: checks the options (xlabels / ylabels replace the map's tick labels, on a copy of the map), then ic.plot_map.",
  'ic.checked_plot_map(map, { out = "map.png", xlabels = { "a", "b", "c" } })')
E("ic.type_name", "ic.type_name(task) -> string", "The TYPE in metric labels (KEY, VALUE, PARENT, ...).", "print(ic.type_name(task))")
E("ic.attribution_patching", "ic.attribution_patching(model, dataset[, {real=, n=, seed=, ...}]) -> {estimates, correlation, n}",
  "Gradient attribution patching (activation × gradient) and its correlation with real patching.",
  "local ap = ic.attribution_patching(model, ds, { real = res })")

-- ---------------------------------------------------------------- tasks
E("mech.task.ar", "mech.task.ar{num_kv=, length=, min_length=, max_length=, query_type=, ...} -> task",
  "The associative-recall task (docs/tasks.md).", "local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }")
E("mech.task.atr", "mech.task.atr{...} -> task", "The ATR PCFG task (docs/tasks.md lists the options).", "local atr = mech.task.atr {}")
E("mech.task.mqar", "mech.task.mqar{vocab_size=, input_seq_len=, num_kv_pairs=, power_a=, num_passes=, random_non_queries=, rng=, seed=} -> task",
  "Zoology's multi-query associative recall: every query is a readout (docs/tasks.md, \"MQAR\").",
  "local mq = mech.task.mqar { vocab_size = 64, input_seq_len = 32, num_kv_pairs = 4 }")
E("mech.task.from_spec", "mech.task.from_spec(spec[, {modules=, dir=}]) -> task", "The task of a record made by task:spec() (same grammar, same documents). A Lua task's module must be loaded, mechlab's own or in `modules` (or mech.allow_module), its constructor registered (mech.task.register); with `dir`, a jsonl file must lie below it (docs/security.md).",
  "local again = mech.task.from_spec(task:spec())")
E("mech.task.from_checkpoint", "mech.task.from_checkpoint(path | meta[, {modules=, dir=}]) -> task | nil, why",
  "The task a checkpoint was trained on (its task.spec; older files: the preset of task.name or the manifest beside it). `modules` as mech.load's; a jsonl record's file is read from the checkpoint's directory (dir for a meta table) only (docs/security.md).",
  'local t, why = mech.task.from_checkpoint("runs/default/checkpoint.safetensors")')
E("mech.task.new", "mech.task.new{name=, vocab=, sample= or sample_batch=, positions=, corrupt=, holdout=, seed=} -> task",
  "A task written in Lua: sample(gen, split) returns one document {tokens=, targets= (positions to predict) or readouts=/answers=, positions=}; or sample_batch(gen, split, n) returns up to n documents at once as int32 tensors {tokens = (m, L), targets = (m, T) or a shared list, positions = {name = (m) or a shared integer}} (fixed-length tasks drawn with tensor ops: several times faster); checked and stored in C (docs/tasks.md, \"Your own task\"). positions: the names its documents carry, the paper's (mech.task.positions) or identifiers of its own (docs/tasks.md, \"Position names\").",
  'local t = mech.task.new { name = "one", vocab = 4, sample = function(gen) return { tokens = { 1, 2 + gen:below(2) }, targets = { 1 } } end }')
E("mech.task.register", "mech.task.register(f | {name = f, ...}) -> the same",
  "Declares a module's task constructors, the only functions of it a checkpoint's or sweep's record may call: end a module of tasks with `return mech.task.register(M)` (docs/security.md).",
  'local M = mech.task.register({ one = function(o) return mech.task.preset("ar_32") end })')
E("mech.task.load", "mech.task.load(module[, options][, seed][, name]) -> task",
  "The Lua task that require(module) makes from plain options (a function, or a table of them by task name); recorded so checkpoints and sweeps rebuild it.",
  'local t = mech.task.load("mech.task_examples", { n_symbols = 4 }, 42, "copy")')
E("mech.task.from_jsonl", "mech.task.from_jsonl(path[, {vocab=, positions=, corrupt=, holdout=, name=, seed=}]) -> task",
  "A task whose documents are the lines of a JSON-lines file (tokens as ids or names, targets or readouts/answers, positions, split); a bad line is an error with its number.",
  'local t = mech.task.from_jsonl("data.jsonl")')
E("mech.task.preset", "mech.task.preset(name[, seed][, {rng=}]) -> task", "A task of the paper by name (mech.task.presets() lists them).",
  'local t = mech.task.preset("ar_32")')
E("mech.task.presets", "mech.task.presets() -> {name, ...}", "The preset names.", "print(#mech.task.presets())")
E("mech.task.show", "mech.task.show(doc) -> string", "A document as text.", "print(mech.task.show(task:sample(1)))")
E("task:sample", "task:sample([seed | gen][, split]) -> doc", "One document.", "local doc = task:sample(1)")
E("task:dataset", "task:dataset([n][, {seed=, split=}]) -> dataset", "n documents (default: the paper's sizes).", 'local ds = task:dataset(16, { seed = 1, split = "test" })')
E("task:vocab_size", "task:vocab_size() -> V", "The vocabulary size (a model's vocab).", "print(task:vocab_size())")
E("task:token_name", "task:token_name(id) -> string", "The name of one token id.", "print(task:token_name(5))")
E("task:to_str_tokens", "task:to_str_tokens(tokens) -> {name, ...}", "Token names of a sequence (a table or tensor (L)) or of a batch (B, L) as a list of lists.",
  "print(table.concat(task:to_str_tokens(ds:batch(0, 1))[1], \" \"))")
E("task:to_tokens", "task:to_tokens(text | {text, ...}) -> int32 (B, Lmax)",
  "Tokens separated by spaces (names of the task's vocabulary) to ids, right-padded with <pad>; an unknown token is an error naming it.",
  'local tokens = task:to_tokens("<bos> k3 v7 <eos> k3")')
E("task:show", "task:show(doc) -> string", "One of this task's documents as text; a damaged document (a position outside it, a bad tree entry) is an error naming the field.", "print(task:show(task:sample(1)))")
E("task:name", "task:name() -> string", "The task's name.", "print(task:name())")
E("task:kind", "task:kind() -> \"ar\" | \"atr\" | \"mqar\" | \"lua\" | \"jsonl\"", "The task family.", "print(task:kind())")
E("task:config", "task:config() -> table", "The options (those mech.task.ar / atr / mqar accept).", "print(task:config().num_kv)")
E("task:spec", "task:spec() -> {kind, name, seed, options}", "The task's whole record (what checkpoints keep; mech.task.from_spec rebuilds it).",
  "print(task:spec().kind)")
E("task:has_split", "task:has_split(split) -> boolean", "Whether documents are split into train/test.", 'print(task:has_split("test"))')
E("task:chance", "task:chance() -> p", "Chance: the accuracy of guessing uniformly among the answers the task can have (AR: 1 / the number of values; ATR: of terminals; MQAR: of values; a custom task: of its corruption pool). ic.evaluate's res.chance and a patching map's (with dataset=) are this number (docs/interventions.md).", "print(task:chance())")
E("task:corrupt_range", "task:corrupt_range() -> lo, hi", "The corruption pool of the interchange evaluator.", "print(task:corrupt_range())")
E("task:positions", "task:positions() -> {names}", "The task's position names in slot order: mech.task.positions (the paper's eight), then the names a Lua or JSONL task declares of its own (up to 56; docs/tasks.md, \"Position names\"). Every tool that takes a position name takes these.",
  "print(table.concat(task:positions(), \" \"))")
E("dataset:batch", "dataset:batch(first, count) -> tokens, targets, positions", "Documents [first, first + count) as int32 tensors (B, L), padded.",
  "local tokens, targets = ds:batch(0, 4)")
E("dataset:batch_at", "dataset:batch_at({i, ...}) -> tokens, targets, positions", "The documents at 0-based indices.", "local tokens = ds:batch_at({ 0, 5 })")
E("dataset:positions", "dataset:positions(first, count) -> (count, #ds:position_names())", "Named positions of each document (-1 where absent), one column per name of ds:position_names(): the paper's eight, then the task's own names.",
  "local pos = ds:positions(0, 4)")
E("dataset:position_names", "dataset:position_names() -> {names}", "The columns of dataset:positions(): its task's positions() (docs/tasks.md, \"Position names\").",
  "print(#ds:position_names())")
E("dataset:target_dist", "dataset:target_dist(first, count) -> (count, V)", "The distribution of correct answers per document.", "local d = ds:target_dist(0, 4)")
E("dataset:doc", "dataset:doc(i) -> doc", "Document i (0-based).", "local doc = ds:doc(0)")
E("dataset:show", "dataset:show(i) -> string", "Document i as text.", "print(ds:show(0))")
E("dataset:stats", "dataset:stats() -> table", "Means of per-document statistics and the length range.", "print(ds:stats().doc_len)")
E("dataset:size", "dataset:size() -> n", "The number of documents (also #ds).", "print(ds:size())")
E("dataset:task", "dataset:task() -> task", "The task the documents come from.", "print(ds:task():name())")
E("dataset:split", "dataset:split() -> string", "\"train\" or \"test\".", "print(ds:split())")
E("dataset:max_len", "dataset:max_len() -> L", "The longest document's length.", "print(ds:max_len())")
E("dataset:write_jsonl", "dataset:write_jsonl(path)",
  "The documents as JSON lines (a header with the vocabulary, then tokens, readouts, answers, positions, split per line), written atomically; mech.task.from_jsonl reads them back.",
  'ds:write_jsonl("test.jsonl")')
E("gen:uniform", "gen:uniform() -> number", "The next uniform number in [0, 1).", "print(mech.Generator(1):uniform())")
E("gen:normal", "gen:normal() -> number", "The next standard normal number.", "print(mech.Generator(1):normal())")
E("gen:below", "gen:below(n) -> integer", "A uniform integer in [0, n).", "print(mech.Generator(1):below(10))")

-- ---------------------------------------------------------------- figures and system
for _, p in ipairs {
  { "heatmap", "{data=, xlabels=, ylabels=, center=, values=, filter=, title=, out=, ...}", "A heatmap of a matrix (table of rows or 2-D tensor)." },
  { "lines", "{series = {{label=, x=, y=}, ...}, logx=, dodge=, caption=, title=, out=, ...}", "Line plots (or facets = {...}); dodge = px shifts overlapping series apart along x; caption adds a line under the figure." },
  { "scatter", "{series = {{label=, x=, y=}, ...}, jitter=, seed=, dodge=, caption=, title=, out=, ...}", "A scatter plot; jitter = px moves each point by up to px pixels (fixed by seed) so that coinciding points show." },
  { "box", "{groups = {{label=, key=, values=}, ...}, categories=, hlines=, caption=, title=, out=, ...}", "Box plots of groups (a group of fewer than 3 values is drawn as its points); categories = {keys} fixes their order along x." },
  { "bar", "{groups = {{label=, values=}, ...}, title=, out=, ...}", "A bar chart." },
} do
  E("mech.plot." .. p[1], "mech.plot." .. p[1] .. p[2], p[3] .. " Writes PNG, SVG or PDF (by `out`'s extension) and a CSV of the plotted numbers (docs/figures.md).",
    "mech.plot." .. p[1] .. " { out = \"fig.png\", ... }")
end
E("mech.viz.attention", "mech.viz.attention{pattern= | model=, input=; tokens=, out=, title=, example=0} -> path",
  "Writes one self-contained HTML page (no network), CircuitsVis's attention view: a layer and head (or channel) selector, a per-layer grid of thumbnails, one token strip, the matrix with the tokens on both axes (rows: destination, columns: source), a colour legend; hovering a cell marks its destination and source and shows the value. pattern: a cache (its mixer.pattern sites), a tensor (H, L, L) or (B, H, L, L), or a list of them per layer; model= and input= (token ids) show every layer through mech.interp.implicit_attention, so an SSM shows its implicit attention, the method named on the page. L above 256 is refused; more than 16 heads or channels per layer are cut, with a note. In a notebook the page shows inline (docs/notebook.md).",
  'mech.viz.attention { pattern = cache, tokens = task:to_str_tokens(tokens)[1], out = "view.html" }')
E("mech.display", "mech.display(x[, {format=, out=, title=}]) -> path or nil",
  "Shows x as a notebook shows it: in the Jupyter kernel (mechlab --kernel) a figure's or page's path (.png, .svg, .html) as image/png, image/svg+xml or the viewer as text/html, a patching map drawn as image/png (format = \"svg\": image/svg+xml), anything else (tensors too) as text/plain; a cell's last value is shown the same way. In the REPL and in scripts it writes the file (a map: to out or a temporary .png) and prints its path (docs/notebook.md).",
  'mech.display(mech.plot.heatmap { data = { { 1, 2 }, { 3, 4 } }, out = "h.png" })')
E("mech.viz.attention_grid", "mech.viz.attention_grid{pattern=, tokens=, out=, title=, example=0} -> path",
  "Every head of every layer in one static heatmap (rows: layers, columns: heads), PNG, SVG or PDF with its CSV, for papers.",
  'mech.viz.attention_grid { pattern = cache, out = "heads.png" }')
E("mech.plot.color", "mech.plot.color(palette, i [, n]) -> \"#rrggbb\"",
  "A palette's colour (set2, tab10, blues) for series i (0-based) of n, as the figures draw it; for a series' `color`.",
  'print(mech.plot.color("set2", 1))')
for _, s in ipairs {
  { "isatty", "([fd]) -> boolean", "Whether fd (default 1) is a terminal." },
  { "time", "() -> seconds", "A monotonic clock." },
  { "utc", "() -> string", "Wall-clock time as ISO 8601 UTC." },
  { "mkdir", "(path)", "mkdir -p." },
  { "exists", "(path) -> boolean", "Whether a path exists." },
  { "read_file", "(path) -> text or nil, message", "The whole file as a string (nil and a message when it cannot be read, as io.open)." },
  { "write_atomic", "(path, text)", "Writes a file atomically (temporary file, then rename)." },
  { "metrics", "(path) -> writer", "A long-format metrics CSV (step, split, metric, value) appended with writer:append(...)." },
  { "lock", "(path) -> lock or nil, holder", "An exclusive lock on a run directory (flock)." },
  { "closest", "(name, names) -> name or nil", "The entry of the list names nearest to name, as every \"did you mean\" of mechlab chooses it: edit distance with digits compared as numbers, and one table of common synonyms (learning_rate -> lr, epochs -> steps, num_layers -> n_layers, hidden_size -> d_model, attn_out -> attention_output, ...)." },
  { "lock_held", "(path) -> boolean", "Whether another process holds the lock at path; creates and writes nothing (a symlink or a non-regular file there is an error)." },
  { "atomic", "(path) -> file", "A file written in pieces (file:write(s, ...)) and published whole by file:commit(); file:abort() or dropping it leaves no temporary file and the target untouched." },
  { "file_size", "(path) -> bytes or nil", "The size of a regular file (symlinks followed), nil for anything else; opens nothing, so a FIFO cannot block it." },
  { "realpath", "(path) -> path or nil, message", "The absolute path with every symbolic link resolved." },
  { "redirect_output", "(path)", "This process's standard output and error appended to path (never through a symlink; a regular file only)." },
  { "catch_signals", "()", "SIGINT and SIGTERM only set a flag until release_signals()." },
  { "release_signals", "()", "Restores SIGINT and SIGTERM." },
  { "interrupted", "() -> boolean", "Whether a caught signal arrived." },
  { "spawn", "({exe, args...}, log_path) -> pid", "Runs a program with its output in a log file." },
  { "wait", "([pid[, block]]) -> pid, code, signal", "Reaps a child process." },
  { "kill", "(pid[, signal])", "Sends a signal to a process." },
  { "getpid", "() -> pid", "This process's id." },
  { "hostname", "() -> string", "The machine's name." },
  { "cores", "() -> n", "The number of online processors." },
  { "vector_unit", "() -> string", "The vector unit whose clone of the kernels runs on this CPU: \"avx512\", \"avx2\" or \"baseline\" (\"native\" where the kernels are not cloned). The same inputs, build and thread count give the same bits on machines with the same vector unit, not across them (docs/kernels.md, \"Determinism\"); a run's manifest records it as vector_unit." },
  { "executable", "() -> path", "The running mechlab." },
  { "sleep", "(seconds)", "Sleeps." },
} do
  E("mech.sys." .. s[1], "mech.sys." .. s[1] .. s[2], s[3], "print(mech.sys." .. s[1] .. (s[2]:match("^%(%)") and "())" or " ~= nil)"))
end
-- ---------------------------------------------------------------- training (require "mech.train")
-- One entry per key of train.run's config, its default read from mech.train itself (test_api
-- checks that every key has one); help("mech.train.run.lr") shows one, help("mech.train") all.
local train_keys = {
  { "model", "The model: a config table for mech.model (arch, d_model, n_layers, ...) or a built model." },
  { "task", "A preset name (\"ar_32\"), a task record (task:spec()) or a task object." },
  { "task_seed", "The seed of a preset task's vocabulary draw (default: seed)." },
  { "train_docs", "Training documents (the paper: 100032)." },
  { "eval_docs", "Documents of each evaluation split (the paper: 320)." },
  { "batch_size", "Documents per update." },
  { "eval_batch", "Documents per forward pass of an evaluation." },
  { "epochs", "Passes over train_docs, in the same fixed order (ignored beside steps)." },
  { "steps", "Updates in all, instead of epochs." },
  { "lr", "Peak learning rate of AdamW." },
  { "schedule", "constant, constant_with_warmup, linear or cosine (Hugging Face's)." },
  { "warmup", "Warm-up as a fraction of the updates (floor(warmup * total))." },
  { "weight_decay", "AdamW's decoupled weight decay." },
  { "beta1", "AdamW's first-moment decay." },
  { "beta2", "AdamW's second-moment decay." },
  { "eps", "AdamW's epsilon." },
  { "eval_every", "Evaluate every this many updates (and at the last)." },
  { "eval_splits", "The splits evaluated (default {\"test\"})." },
  { "log_every", "Write the training loss to metrics.csv every this many updates." },
  { "seed", "Model initialisation and document seed." },
  { "quiet", "No progress output." },
  { "progress", "Force the progress bar on (true) or off (false); default: when stdout is a terminal." },
  { "threads", "mech.threads(n) for the run." },
  { "out", "Run directory: manifest.json, metrics.csv, checkpoint.safetensors, lock (docs/training.md)." },
  { "checkpoint_every", "Save a checkpoint every this many updates (with out)." },
  { "stop_at", "Stop after this many updates, with a checkpoint." },
  { "resume", "true: continue out's checkpoint; a path: continue that checkpoint." },
  { "overwrite", "Replace a run already in out." },
  { "lock", "A lock on out/lock the caller already holds (mech.sys.lock)." },
  { "on_nonfinite", "\"record\": go on past a non-finite loss, recording it (default: stop with an error)." },
  { "evaluators", "A list of {every=, fn=} or ic.evaluator(...) called at evaluations." },
  { "report_docs", "Evaluate the reported step on this many documents of each split instead of eval_docs." },
  { "report_step", "The reported step for report_docs (default: the last)." },
  { "precision", "The model's precision for the run: \"bf16\" (bf16 products, docs/kernels.md \"bf16 training\") or \"fp32\"; as model = {precision = ...}; a sweep axis." },
}
E("mech.train.run", "train.run(config) -> run",
  "Trains a model on a task (docs/training.md): one call with a config table; an unknown key is an error naming the closest. Keys (help(\"mech.train.run.KEY\") for one): "
  .. (function()
    local parts = {}
    for _, k in ipairs(train_keys) do parts[#parts + 1] = k[1] end
    return table.concat(parts, ", ")
  end)() .. ".",
  'local run = require("mech.train").run { model = { arch = "attention", d_model = 16 }, task = "ar_32", train_docs = 64, eval_docs = 16, steps = 2, quiet = true }')
local function default_text(key)
  local v = require("mech.train").default(key)
  if v == nil then return "no default" end
  if type(v) == "table" then return "default {}" end
  if type(v) == "string" then return string.format("default %q", v) end
  return "default " .. tostring(v)
end
for _, k in ipairs(train_keys) do
  E("mech.train.run." .. k[1], "train.run{" .. k[1] .. " = ...} (" .. default_text(k[1]) .. ")", k[2],
    "local train = require \"mech.train\"; print(train.default(\"" .. k[1] .. "\"))")
end
E("mech.train.default", "train.default(key) -> value", "The default of a config key of train.run (nil for keys without one).",
  'print(require("mech.train").default("lr"))')
E("mech.train.config_keys", "train.config_keys() -> set", "The keys a train.run config may hold, as a set.",
  'for k in pairs(require("mech.train").config_keys()) do print(k) end')

E("mech.help", "mech.help([x])", "Prints the signature, description and example of a function, a method (\"model:forward\"), a topic (\"model\", \"cache\", \"mech.interp\") or of what x is (a function, a model, a cache); in the REPL also `help(x)`.",
  'mech.help("cache:get")')
E("mech.find", "mech.find(path) -> path or nil, message",
  "A file of mechlab's distribution (a script, a sweep file, a figure recipe) by its path in the repository: path itself when it names a file here, else the same path under `mech.home`, the directory holding mechlab's lua/, experiments/ and plots/ (an installation's share/mechlab, found from the executable; a build's source tree). How `mechlab experiments/paper.lua` runs from any directory.",
  'print(mech.find("experiments/paper/ar.lua"), mech.home)')

-- ---------------------------------------------------------------- lookup and text
local by_name = {}
for _, e in ipairs(H.entries) do by_name[e.name] = e end
H.by_name = by_name

local function topic_of(key)
  for _, t in ipairs(H.topics) do if t.key == key then return t end end
end

local function entries_of(t)
  local out = {}
  for _, e in ipairs(H.entries) do
    if (e.name:sub(1, #t.prefix) == t.prefix and (t.key ~= "mech" or not e.name:match("^mech%.%a+%."))) or e.topic == t.key then
      out[#out + 1] = e
    end
  end
  return out
end
H.entries_of = entries_of

local function entry_text(e)
  return e.signature .. "\n  " .. e.description .. "\n  Example: " .. e.example
end

-- Method prefixes of entry names -> the class whose methods they are (its metatable's __name).
H.method_class = { model = "mech.Model", cache = "mech.Cache", handle = "mech.HookHandle", map = "mech.PatchingMap",
  task = "mech.Task", dataset = "mech.Dataset", gen = "mech.Generator", opt = "mech.Optimizer" }

--- The methods table of a class: its metatable's __index table, or the first upvalue of an
--- __index function (mech.Cache keeps its methods there).
function H.methods(class)
  local mt = debug.getregistry()[class]
  local idx = type(mt) == "table" and rawget(mt, "__index")
  if type(idx) == "function" then idx = select(2, debug.getupvalue(idx, 1)) end
  return type(idx) == "table" and idx or {}
end

-- The value an entry documents: a mech.* function, a method, or a function of mech.interchange.
local function value_of(e)
  if e.name == "t[index]" then return rawget(debug.getregistry()["mech.Tensor"], "__index") end
  local prefix, method = e.name:match("^(%a+):([%w_]+)$")
  if prefix then return H.methods(H.method_class[prefix])[method] end
  local icname = e.name:match("^ic%.([%w_]+)$")
  if icname then return require("mech.interchange")[icname] end
  local train_name = e.name:match("^mech%.train%.([%w_]+)$")
  if train_name then return require("mech.train")[train_name] end
  local train_key = e.name:match("^mech%.train%.run%.([%w_]+)$") -- a config key: it names the key
  if train_key then return require("mech.train").config_keys()[train_key] end
  local v = require "mech"
  for part in e.name:gmatch("[^.]+") do
    -- mech.nn is loaded on first use (mech's __index), so it is read through the index
    if part ~= "mech" then v = type(v) == "table" and (rawget(v, part) or (part == "nn" and v.nn)) or nil end
  end
  return v
end
H.value_of = value_of

local function find_function(f)
  for _, e in ipairs(H.entries) do if value_of(e) == f then return e end end
end

--- The help text of x (see mech.help).
function H.text(x)
  if x == nil then
    local lines = { "help(x): x is a function, a value (model, cache, tensor, ...), a name such as \"model:forward\", or a topic:" }
    for _, t in ipairs(H.topics) do lines[#lines + 1] = string.format("  %-12s %s", t.key, t.title) end
    return table.concat(lines, "\n")
  end
  if type(x) == "function" then
    local e = find_function(x)
    return e and entry_text(e) or "help: no entry for this function (help() lists the topics)"
  end
  local nn = package.loaded["mech.nn"]
  if type(x) == "table" and nn and nn.is_module(x) then -- a layer: its class's entry, else the topic
    local name = "mech.nn." .. tostring(rawget(getmetatable(x), "__name"))
    x = by_name[name] and name or "mech.nn"
  end
  if type(x) ~= "string" then
    local mt = getmetatable(x)
    local class = type(mt) == "table" and rawget(mt, "__name")
    if x == require("mech") then x = "mech" elseif class and H.classes[class] then x = H.classes[class]
    else return "help: no entry for a " .. type(x) .. " (help() lists the topics)" end
  end
  if by_name[x] then return entry_text(by_name[x]) end
  if by_name["mech." .. x] and not topic_of(x) then return entry_text(by_name["mech." .. x]) end
  local t = topic_of(x)
  if t then
    local lines = { t.title .. ":" }
    if x == "model" then lines[#lines + 1] = "  " .. by_name["mech.model"].signature end
    if x == "task" then lines[#lines + 1] = "  see also help(\"mech.task\")" end
    for _, e in ipairs(entries_of(t)) do lines[#lines + 1] = "  " .. e.signature end
    lines[#lines + 1] = "help(\"name\") shows one entry with its example."
    return table.concat(lines, "\n")
  end
  local names = {}
  for _, e in ipairs(H.entries) do names[#names + 1] = e.name end
  for _, tp in ipairs(H.topics) do names[#names + 1] = tp.key end
  local set = {}
  for _, n in ipairs(names) do set[n] = true end
  local best = require("mech.util").closest(x, set) -- bounded: compares the first 64 characters
  if #x > 80 then x = x:sub(1, 72) .. "... (" .. #x .. " characters)" end
  return string.format("help: no entry '%s' (did you mean '%s'?)", x, best)
end

--- Prints the help text of x.
function H.help(x) print(H.text(x)) end

--- docs/api.md: every topic's entries with signature, description and example.
function H.markdown()
  local out = { "# Lua API reference",
    "",
    "Generated from `lua/mech/help.lua` by `mechlab tools/gen_api_docs.lua`; do not edit by hand",
    "(the test suite fails when this page and the registry differ). In the REPL, `help(x)` shows",
    "the same entries: `help(mech.zeros)`, `help(\"model:forward\")`, `help(model)`, `help(\"cache\")`.",
    "Examples are fragments: `model`, `tokens`, `cache`, `ds` and friends are those of docs/repl.md.",
    "Tensor methods are the `mech.*` ops taken as methods (`t:sum(1)`); docs/tensors.md has the rest." }
  for _, t in ipairs(H.topics) do
    out[#out + 1] = ""
    out[#out + 1] = "## " .. t.title
    for _, e in ipairs(entries_of(t)) do
      out[#out + 1] = ""
      out[#out + 1] = "### `" .. e.signature .. "`"
      out[#out + 1] = ""
      out[#out + 1] = e.description
      out[#out + 1] = ""
      out[#out + 1] = "```lua fragment"
      out[#out + 1] = e.example
      out[#out + 1] = "```"
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return H
