"""The mechlab Jupyter kernel through Debian's jupyter_client (docs/notebook.md): kernel_info,
execute (results, streams, errors with the Lua traceback, counts, persisting state), rich display
(a valid PNG, SVG, the viewer as HTML, tensors as text), is_complete, complete, inspect, history,
comm_info, an interrupt during a long cell, bad input on the wire (malformed, wrongly signed, on
the wrong channel), a bounded fuzz of messages with random fields, and a restart.
Run by ctest with the mechlab under test: python3 test_kernel.py build/mechlab."""
import json
import os
import random
import struct
import sys
import tempfile
import time
import zlib

import zmq
from jupyter_client import KernelManager
from jupyter_client.session import Session

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelspec  # noqa: E402

check = kernelspec.check


def run(kc, code, timeout=60, **kw):
    """Executes code; returns (reply content, iopub messages of this request)."""
    msg_id = kc.execute(code, **kw)
    out = []
    deadline = time.time() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(1, deadline - time.time()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:  # skip stale replies (wait_for_ready repeats kernel_info while a kernel starts)
        reply = kc.get_shell_msg(timeout=max(1, deadline - time.time()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], out


def of_type(msgs, t):
    return [m["content"] for m in msgs if m["msg_type"] == t]


def valid_png(data):
    """PNG signature, an IHDR with a positive size, and every chunk's CRC right."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    pos, seen_end = 8, False
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        if zlib.crc32(kind + body) != crc:
            return False
        if kind == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
            if w == 0 or h == 0:
                return False
        pos += 12 + n
        seen_end = kind == b"IEND"
    return seen_end


def main():
    mechlab = kernelspec.mechlab_from_argv()
    root = kernelspec.install(mechlab)
    log_path = os.path.join(root, "kernel.log")
    log = open(log_path, "w")
    km = KernelManager(kernel_name="mechlab")
    km.start_kernel(stderr=log)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    tmp = tempfile.mkdtemp(dir=root)

    # kernel_info
    info = kc.kernel_info(reply=True, timeout=30)["content"]
    check(info["protocol_version"] == "5.3" and info["language_info"]["name"] == "lua", "kernel_info: protocol 5.3, Lua")

    # execute: values, counts, persisting locals and globals, streams
    r, msgs = run(kc, "1 + 1")
    res = of_type(msgs, "execute_result")
    check(r["status"] == "ok" and res and res[0]["data"]["text/plain"] == "2", "an expression's value is the result")
    first = r["execution_count"]
    r, _ = run(kc, "local x = 41\ng = 'global'")
    r, msgs = run(kc, "x + 1, g")
    res = of_type(msgs, "execute_result")
    check(res and res[0]["data"]["text/plain"] == "42\tglobal", "locals and globals persist across cells")
    check(r["execution_count"] == first + 2, "execution counts go up by one a cell")
    r, msgs = run(kc, "print('hello') io.stderr:write('warn\\n') io.write('no newline')")
    outs = "".join(s["text"] for s in of_type(msgs, "stream") if s["name"] == "stdout")
    errs = "".join(s["text"] for s in of_type(msgs, "stream") if s["name"] == "stderr")
    check(outs == "hello\nno newline" and errs == "warn\n", "print and io.write as stdout, io.stderr as stderr streams")
    r, msgs = run(kc, "print(mech.zeros(2, 3))")
    check("tensor" in "".join(s["text"] for s in of_type(msgs, "stream")).lower() or r["status"] == "ok", "printing a tensor")
    r, msgs = run(kc, "mech.arange(6):reshape(2, 3)")
    res = of_type(msgs, "execute_result")
    check(res and set(res[0]["data"]) == {"text/plain"} and "2" in res[0]["data"]["text/plain"], "a tensor is text/plain")

    # errors: the Lua traceback
    r, msgs = run(kc, "local function f() error('boom') end\nf()")
    err = of_type(msgs, "error")
    check(r["status"] == "error" and r["ename"] == "LuaError" and "boom" in r["evalue"], "an error cell: ename and evalue")
    check(err and any("stack traceback:" in line for line in err[0]["traceback"]) and
          any("in local 'f'" in line or "in function 'f'" in line or "in upvalue 'f'" in line for line in err[0]["traceback"]),
          "the error's traceback names the Lua frames: %s" % (err and err[0]["traceback"]))
    r, _ = run(kc, "x = = 1")
    check(r["status"] == "error" and r["ename"] == "SyntaxError", "a syntax error")
    r, msgs = run(kc, "mech.zeros('a')")
    check(r["status"] == "error" and "mech.zeros" in r["evalue"], "a binding error names the function: " + r.get("evalue", ""))

    # rich display
    png = os.path.join(tmp, "h.png")
    r, msgs = run(kc, "mech.plot.heatmap{data = {{1, 2}, {3, 4}}, out = %s}" % json.dumps(png))
    res = of_type(msgs, "execute_result")
    import base64
    check(res and "image/png" in res[0]["data"] and valid_png(base64.b64decode(res[0]["data"]["image/png"])),
          "a figure's path as a cell's value is a valid image/png")
    svg = os.path.join(tmp, "h.svg")
    r, msgs = run(kc, "mech.display(mech.plot.heatmap{data = {{1, 2}, {3, 4}}, out = %s})" % json.dumps(svg))
    disp = of_type(msgs, "display_data")
    check(disp and disp[0]["data"].get("image/svg+xml", "").lstrip().startswith("<?xml"), "mech.display of an SVG: image/svg+xml")
    r, msgs = run(kc, "print('before') mech.display(mech.ones(2)) print('after')")
    kinds = [m["msg_type"] for m in msgs if m["msg_type"] in ("stream", "display_data")]
    check(kinds == ["stream", "display_data", "stream"], "output and displays keep their order: %s" % kinds)
    html = os.path.join(tmp, "v.html")
    r, msgs = run(kc, """local m = mech.model{d_model = 16, n_layers = 2, vocab = 20, n_heads = 2, seed = 1}
local _, cache = m:run_with_cache(mech.tensor({{1, 5, 9, 2}}, {dtype = "int32"}), {names = "pattern"})
mech.viz.attention{pattern = cache, out = %s}""" % json.dumps(html))
    res = of_type(msgs, "execute_result")
    check(res and "<iframe" in res[0]["data"].get("text/html", "") and "blocks.1" in res[0]["data"]["text/html"],
          "the attention viewer is text/html")
    r, msgs = run(kc, "mech.display(1, {format = 'gif'})")
    check(r["status"] == "error" and "option 'format'" in r["evalue"], "mech.display refuses a bad option")

    # display fuzz: values of every type with good and bad options, as bundles and as display_data
    n_display = int(os.environ.get("MECHLAB_DISPLAY_FUZZ", "2000"))
    r, msgs = run(kc, """math.randomseed(%d)
local cyc = {}; cyc.self = cyc
local vals = {true, 1, 1.5, 0/0, -1/0, "x", "missing.png", "a.html", "\\0\\255", %s, {}, {1, {2, {3}}}, cyc,
  mech.zeros(2, 3), mech.zeros(0), mech.arange(5), mech.ones(2, 2, 2):int(), print, coroutine.create(print),
  setmetatable({}, {__tostring = function() error("bad tostring") end}), {values = 1, plot = function() error("no") end},
  mech.model{d_model = 8, n_layers = 1, vocab = 10}}
local opts = {{}, {format = "svg"}, {format = 1}, {out = 3}, {bogus = 1}, 5, {title = {}}}
local n, errors, shown = 0, 0, 0
for i = 1, %d do
  local v, o = vals[math.random(#vals + 1)], math.random(2) == 1 and opts[math.random(#opts)] or nil
  local ok = pcall(require("mech.display").bundle_of, v, o)
  if i %% 20 == 0 and pcall(mech.display, v, o) then shown = shown + 1 end
  n, errors = n + 1, errors + (ok and 0 or 1)
end
n, errors, shown""" % (int(os.environ.get("MECHLAB_FUZZ_SEED", "1")), json.dumps(png), n_display), timeout=300)
    disp = of_type(msgs, "display_data")
    res = of_type(msgs, "execute_result")
    counts = res and res[0]["data"]["text/plain"].split("\t")
    check(r["status"] == "ok" and counts and int(counts[0]) == n_display and len(disp) == int(counts[2]),
          "display fuzz: %s values (bundle errors, displays) = %s, %d display_data" % (n_display, counts, len(disp)))

    # is_complete, complete, inspect, history, comm_info
    def shell(method, *a, **kw):
        msg_id = getattr(kc, method)(*a, **kw)
        while True:
            reply = kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]
    check(shell("is_complete", "for i = 1, 3 do")["status"] == "incomplete", "is_complete: an open loop is incomplete")
    check(shell("is_complete", "x = 1")["status"] == "complete", "is_complete: a statement is complete")
    check(shell("is_complete", "x = = 1")["status"] == "invalid", "is_complete: a syntax error is invalid")
    c = shell("complete", "y = mech.zer", 12)
    check("mech.zeros(" in c["matches"] and c["cursor_start"] == 4 and c["cursor_end"] == 12, "complete: mech.zer -> mech.zeros(")
    run(kc, "cache = {['blocks.0.hook_resid_pre'] = 1, ['blocks.1.mixer.pattern'] = 2}")
    c = shell("complete", 'cache["blocks.1', 15)
    check(c["matches"] == ['blocks.1.mixer.pattern"]'], "complete: keys of a cache: %s" % c["matches"])
    c = shell("complete", "é = x", 5)  # cursor in code points
    check(c["status"] == "ok" and c["cursor_start"] == 4 and "x" in c["matches"], "complete counts code points")
    i = shell("inspect", "mech.zeros(", 11)
    check(i["found"] and "mech.zeros" in i["data"]["text/plain"], "inspect: mech.help's entry")
    i = shell("inspect", "no_such_thing", 3)
    check(not i["found"], "inspect: nothing found for an unknown name")
    h = shell("history", hist_access_type="tail", n=2, output=False, raw=True)
    check(h["status"] == "ok" and len(h["history"]) == 2 and "cache" in h["history"][-1][2], "history: the last cells")
    check(shell("comm_info")["comms"] == {}, "comm_info: no comms")

    # interrupt a long cell (a Lua loop, then a C loop), the kernel answers afterwards
    for code, what in (("while true do end", "a Lua loop"),
                       ("local m = mech.model{d_model = 32, n_layers = 2, vocab = 16, seed = 1}\n"
                        "local t = mech.randint(0, 16, 4, 64)\n"
                        "for i = 1, 1e9 do m:forward(t) end", "model forwards")):
        msg_id = kc.execute(code)
        time.sleep(1.0)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)["content"]
        check(reply["status"] == "error" and reply["ename"] == "Interrupted", "an interrupt stops %s: %s" % (what, reply.get("evalue")))
        r, msgs = run(kc, "40 + 2")
        check(of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "42", "the kernel answers after the interrupt")
    del msg_id
    # interrupt_mode "message": an interrupt_request on control while the cell runs
    msg_session = Session(key=km.session.key, signature_scheme=km.session.signature_scheme)
    ctl = zmq.Context.instance().socket(zmq.DEALER)
    ctl.linger = 0
    ctl.connect("tcp://%s:%d" % (km.get_connection_info()["ip"], km.get_connection_info()["control_port"]))
    kc.execute("while true do end")
    time.sleep(1.0)
    msg_session.send(ctl, "kernel_info_request", {})
    msg_session.send(ctl, "interrupt_request", {})
    reply = kc.get_shell_msg(timeout=30)["content"]
    answers = [msg_session.recv(ctl, mode=0)[1]["msg_type"] for _ in range(2) if ctl.poll(10000)]
    check(reply["status"] == "error" and reply["ename"] == "Interrupted" and answers == ["kernel_info_reply", "interrupt_reply"],
          "an interrupt_request on control stops a running cell; control answers meanwhile: %s" % answers)
    ctl.close()
    km.interrupt_kernel()  # with nothing running: ignored
    time.sleep(0.3)
    r, msgs = run(kc, "40 + 2")
    check(km.is_alive() and of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "42", "an interrupt while idle is harmless")

    # bad input on the wire: refused, logged, the kernel keeps running
    conn = km.get_connection_info()
    ctx = zmq.Context()
    session = Session(key=km.session.key, signature_scheme=km.session.signature_scheme)
    bad_session = Session(key=b"not-the-key", signature_scheme=km.session.signature_scheme)

    def sock(port, kind=zmq.DEALER):
        s = ctx.socket(kind)
        s.linger = 0
        s.connect("tcp://%s:%d" % (conn["ip"], conn[port]))
        return s
    shell_s, control_s, stdin_s = sock("shell_port"), sock("control_port"), sock("stdin_port")
    time.sleep(0.3)
    shell_s.send_multipart([b"garbage"])
    shell_s.send_multipart([b"<IDS|MSG>", b"sig", b"{"])
    bad_session.send(shell_s, "execute_request", {"code": "os.exit(3)", "silent": False})
    session.send(control_s, "execute_request", {"code": "os.exit(4)", "silent": False})
    session.send(stdin_s, "input_reply", {"value": "x"})
    session.send(shell_s, "no_such_request", {})
    header = session.msg_header("execute_request")
    parts = [session.pack(header), b"{}", b"{}", b"[1, 2]"]
    shell_s.send_multipart([b"<IDS|MSG>", session.sign(parts)] + parts)
    parts = [b"not json", b"{}", b"{}", b"{}"]
    shell_s.send_multipart([b"<IDS|MSG>", session.sign(parts)] + parts)
    session.send(shell_s, "execute_request", {"code": 12})  # a well-signed request with bad content
    reply = session.recv(shell_s, mode=0)[1]
    check(reply["content"]["status"] == "error" and reply["content"]["ename"] == "BadRequest", "bad content: an error reply")
    time.sleep(0.5)
    r, msgs = run(kc, "40 + 2")
    check(km.is_alive() and of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "42",
          "after malformed, wrongly signed and misplaced messages the kernel answers")
    log.flush()
    logged = open(log_path).read()
    refusals = logged.count("refused")
    check(logged.count("wrong signature") == 1 and "belongs on another channel" in logged and
          "unknown message type" in logged and "no <IDS|MSG> delimiter" in logged and "is not JSON" in logged and
          "on the stdin channel" in logged and refusals >= 9, "each refusal is logged (%d)" % refusals)

    # fuzz: messages with random fields and frames, signed so that they reach the handlers
    rng = random.Random(int(os.environ.get("MECHLAB_FUZZ_SEED", "1")))
    types = ["execute_request", "complete_request", "inspect_request", "is_complete_request", "history_request",
             "kernel_info_request", "comm_info_request", "interrupt_request", "shutdown_request", "x"]
    keys = ["code", "cursor_pos", "silent", "store_history", "hist_access_type", "n", "start", "stop", "pattern",
            "detail_level", "restart", "user_expressions", "allow_stdin"]

    def value(depth=0):
        k = rng.randrange(9 if depth < 2 else 6)
        if k == 0:
            return None
        if k == 1:
            return rng.random() < 0.5
        if k == 2:
            return rng.choice([rng.randint(-2**40, 2**40), -1, 0, 1, 2**63 - 1])
        if k == 3:
            return rng.random() * 1e6
        if k == 4:
            return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(12)))
        if k == 5:
            return rng.choice(["mech.", "cache[\"", "x = = ", "é", "\x00", "tail", "range", "search", "*"])
        if k == 6:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        if k == 7:
            return {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(3))}
        return -1.5
    n_fuzz = int(os.environ.get("MECHLAB_KERNEL_FUZZ", "400"))
    sent = {"structured": 0, "raw": 0}
    for i in range(n_fuzz):
        t = rng.choice(types)
        if t == "shutdown_request":
            t = "kernel_info_request"  # a shutdown would end the run; its bad fields are tried above
        content = {rng.choice(keys): value() for _ in range(rng.randrange(5))}
        if t in ("complete_request", "inspect_request", "is_complete_request") and rng.random() < 0.7:
            # text the completer and help read, never run: fragments of Lua and random characters
            frags = ["mech.", "zeros(", "cache[\"", "blocks.", ":", ".", "(", "\"", "'", "[", "é", "\n", " ", "for i=1,2 do", "end",
                     "x", "help", "model:forward", "\x00", "--[[", "]]"]
            content["code"] = "".join(rng.choice(frags) if rng.random() < 0.8 else chr(rng.randrange(1, 0x3000))
                                      for _ in range(rng.randrange(12)))
            content["cursor_pos"] = rng.choice([rng.randrange(len(content["code"]) + 1), rng.randrange(-3, 1000), value()])
        if t == "execute_request" and isinstance(content.get("code"), str):
            content["code"] = "return " + json.dumps(content["code"])[:40]  # never run random code
        if t == "history_request" and rng.random() < 0.7:
            content["hist_access_type"] = rng.choice(["tail", "range", "search", "other"])
        if rng.random() < 0.7:
            target = shell_s if rng.random() < 0.8 else control_s
            session.send(target, t, content)
            sent["structured"] += 1
        else:
            frames = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(rng.randrange(8))]
            if rng.random() < 0.5:
                frames = [b"<IDS|MSG>"] + frames
            if rng.random() < 0.5 and len(frames) >= 5:
                frames[1] = session.sign(frames[2:6])
            shell_s.send_multipart(frames or [b""])
            sent["raw"] += 1
    time.sleep(1.0)
    for s in (shell_s, control_s, stdin_s):
        s.close()
    r, msgs = run(kc, "40 + 2", timeout=120)
    check(km.is_alive() and of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "42",
          "after %d fuzzed messages (%d structured, %d raw frames) the kernel answers" % (n_fuzz, sent["structured"], sent["raw"]))
    print("fuzz: %d structured, %d raw messages" % (sent["structured"], sent["raw"]))

    # restart: a fresh state
    km.restart_kernel(now=False)
    kc.wait_for_ready(timeout=60)
    r, msgs = run(kc, "x == nil and g == nil")
    check(of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "true", "a restart gives a fresh state")

    kc.stop_channels()
    km.shutdown_kernel(now=False)
    log.close()
    reports = kernelspec.sanitizer_reports(root)
    check(not reports, "no sanitizer report" + ("".join("\n" + r[:3000] for r in reports)))
    print(open(log_path).read()[-1500:])
    kernelspec.finish()


if __name__ == "__main__":
    main()
