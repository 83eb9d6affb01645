"""A bounded, seeded fuzz test (issue 12): a few hundred malformed inputs to checkpoint loading,
corpus loading, the model API and the command line. Each case runs in a child process with an
address-space cap and a time limit; the test asserts no signal, no hang, and only the documented
exception types with a message naming the thing that was wrong.

One worker process imports the package once and forks a child per case (fast); the worker itself
runs in a subprocess so nothing it does can take pytest down."""

import json
import subprocess
import sys
import textwrap

SEED = 12
CASES = {"checkpoint": 110, "corpus": 70, "model": 80, "cli": 24}
MEMORY_CAP = 3 << 30  # bytes of address space per case
CASE_SECONDS = 20  # a case running longer is a hang

WORKER = textwrap.dedent(r"""
import io, json, os, random, resource, signal, sys, zipfile
import numpy as np
import multiscale_rnn as msr
from multiscale_rnn import checkpoint, data
from multiscale_rnn.checkpoint import CheckpointError
from multiscale_rnn.cli import main

SEED, CASES, CAP, SECONDS = int(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
msr.set_num_threads(1)
work = sys.argv[5]

# one valid checkpoint to mutate
_c = data.char_corpus(data.embedded_text()[:3000])
_m = msr.LSTM(_c.vocab_size, 4, 8, seed=0)
_t = msr.Trainer(_m, msr.optim.Adam(), batch_size=2, bptt=10, progress=False)
GOOD = os.path.join(work, "good.npz")
_t.fit(_c.train, epochs=1, max_chunks=2, checkpoint=GOOD, vocab=_c.vocab)
GOOD_BYTES = open(GOOD, "rb").read()
with zipfile.ZipFile(GOOD) as z:
    MEMBERS = {i.filename: z.read(i) for i in z.infolist()}


def npy(a):
    b = io.BytesIO(); np.save(b, a); return b.getvalue()


WEIRD = [None, 0, -1, 1.5, 4.5, float("inf"), float("nan"), 2 ** 62, 2 ** 64, -2 ** 63, "x", "", [], {}, [1, 2],
         {"a": 1}, True, 1e308, "\udcff"]


def mutate_checkpoint(rng, path):
    kind = rng.randrange(7)
    if kind == 0:  # flip bytes anywhere
        b = bytearray(GOOD_BYTES)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        open(path, "wb").write(bytes(b)); return
    if kind == 1:  # truncate
        open(path, "wb").write(GOOD_BYTES[:rng.randrange(len(GOOD_BYTES))]); return
    m = dict(MEMBERS)
    name = rng.choice(sorted(m))
    if kind == 2:  # edit a number in a .npy header
        blob = m[name]
        head = blob[:128].decode("latin1")
        digits = [i for i, ch in enumerate(head) if ch.isdigit()]
        if digits:
            i = rng.choice(digits)
            head = head[:i] + str(rng.choice([0, 1, 7, 9])) + head[i + 1:]
        m[name] = head.encode("latin1") + blob[128:]
    elif kind == 3:  # replace a member by a random array
        arr = rng.choice([np.zeros(3), np.zeros((2, 2), np.float32), np.array("text"), np.array(5),
                          np.zeros(0, np.uint64), np.array([1, 2], dtype=object), np.zeros(7, ">f4")])
        m[name] = npy(arr)
    elif kind == 4:  # a value inside the JSON
        key = rng.choice(["config.npy", "meta.npy"])
        doc = json.loads(str(np.load(io.BytesIO(m[key]))))
        def walk(d, depth=0):
            if isinstance(d, dict) and d and depth < 4:
                k = rng.choice(sorted(d))
                if rng.random() < 0.5 or not isinstance(d[k], (dict, list)):
                    if rng.random() < 0.2:
                        del d[k]
                    else:
                        d[k] = rng.choice(WEIRD)
                else:
                    walk(d[k], depth + 1)
            elif isinstance(d, list) and d and depth < 4:
                d[rng.randrange(len(d))] = rng.choice(WEIRD)
        walk(doc)
        m[key] = npy(np.array(json.dumps(doc)))
    elif kind == 5:  # drop a member, or add one that declares a huge array
        if rng.random() < 0.5:
            del m[name]
        else:
            b = io.BytesIO()
            np.lib.format.write_array_header_1_0(b, {"descr": "<f8", "fortran_order": False, "shape": (1 << 39,)})
            m[name] = b.getvalue() + b"\0" * 16
    else:  # the JSON text itself damaged
        key = rng.choice(["config.npy", "meta.npy"])
        s = str(np.load(io.BytesIO(m[key])))
        i = rng.randrange(max(1, len(s)))
        m[key] = npy(np.array(s[:i] + rng.choice(["", "}", "[", "1e999", "NaN", "\"", "{\"a\":"]) + s[i + 1:]))
    with zipfile.ZipFile(path, "w") as z:
        for k, v in m.items():
            z.writestr(k, v)


def case_checkpoint(rng, i):
    path = os.path.join(work, f"ck{i}.npz")
    mutate_checkpoint(rng, path)
    try:
        ck = checkpoint.load(path)
        if ck.trainer_state is not None and rng.random() < 0.5:
            t = msr.Trainer(ck.model, type(ck.optimizer)() if ck.optimizer else msr.optim.Adam(),
                            batch_size=2, bptt=10, progress=False)
            t.fit(_c.train, epochs=1, max_chunks=1, checkpoint=path, resume=True)
    except (CheckpointError, FileNotFoundError) as e:
        return type(e).__name__, str(e), [path]
    return "ok", "", []


def case_corpus(rng, i):
    path = os.path.join(work, f"text{i}.txt")
    kind = rng.randrange(4)
    if kind == 0:
        blob = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3000)))
    elif kind == 1:
        blob = ("word " * rng.randint(0, 300)).encode() + bytes([rng.randrange(128, 256)]) + b" tail" * 50
    elif kind == 2:
        blob = rng.choice([b"", b" \n\t ", b"\n" * 100, "é".encode() * 500, b"a"])
    else:
        os.makedirs(path, exist_ok=True)
        for f in rng.sample(["train.txt", "valid.txt", "test.txt", "other.txt"], rng.randint(0, 3)):
            open(os.path.join(path, f), "wb").write(bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))))
        blob = None
    if blob is not None:
        open(path, "wb").write(blob)
    opts = {}
    for k, vals in (("unit", ["char", "word", "byte", 3]), ("level", ["codepoint", "byte", None]),
                    ("valid_fraction", [0.0, 0.1, 0.5, 1.0, -0.1, "x"]), ("test_fraction", [0.0, 0.05, 0.99])):
        if rng.random() < 0.3:
            opts[k] = rng.choice(vals)
    if rng.random() < 0.1:
        opts["bogus"] = 1
    try:
        data.load(path=path, **opts)
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError) as e:
        return type(e).__name__, str(e), [os.path.basename(path)] + list(opts)
    return "ok", "", []


ARGS = ["vocab_size", "embed_size", "hidden_sizes", "dropout", "dtype", "seed", "head", "head_size", "input_size",
        "layer_norm", "dropuot", "fast_cells", "cell", "boundary", "slope"]


def case_model(rng, i):
    family = rng.choice(["LSTM", "GRU", "ElmanRNN", "FSRNN", "HMLSTM"])
    cls = getattr(msr, family, None) or msr.LSTM
    kwargs = {"vocab_size": 5, "embed_size": 4, "hidden_sizes": [6, 6] if family in ("FSRNN", "HMLSTM") else [6]}
    for _ in range(rng.randint(1, 2)):
        k = rng.choice(ARGS)
        kwargs[k] = rng.choice(WEIRD + [[2 ** 62], [2 ** 40, 2 ** 40], [3, 0], 2 ** 31, 2 ** 40])
    names = [k for k in kwargs]
    try:
        m = cls(**kwargs)
        x = np.array([[0, 1, 2]], dtype=np.int32)
        op = rng.randrange(4)
        if op == 0:
            m.loss_and_grad(x, rng.choice([x, x + 10, x[:, :2], x.astype(float), -x]))
        elif op == 1:
            inputs = rng.choice([x, x[0], np.zeros((1, 0), np.int32), x * 1000, [[0.5]]])
            m.forward(inputs, rng.choice([None, {}, "keep", 3]))
        elif op == 2:
            m.set_option(rng.choice(["slope", "nothing", ""]), rng.choice([1.0, float("nan"), "x", -1.0]))
        else:
            msr.set_num_threads(rng.choice([0, -3, 2 ** 31, 10 ** 6, 1.5, 1]))
    except (TypeError, ValueError, IndexError, KeyError, MemoryError) as e:
        return type(e).__name__, str(e), names + ["state", "option", "threads", "tokens", "targets", "token",
                                                  "inputs", "shape", "dtype", "id"]
    return "ok", "", []


CLI_POOL = [["--batch-size", "0"], ["--bptt", "0"], ["--batch-size", "4.5"], ["--seed", "-1"], ["--threads", "0"],
            ["--threads", "100000"], ["--epochs", "0"], ["--lr", "nan"], ["--lr", "-1"], ["--dropout", "1"],
            ["--hidden-sizes", "0"], ["--hidden-sizes", "4611686018427387904"], ["--embed-size", "-3"],
            ["--option", "dropuot=0.5"], ["--option", "x"], ["--clip-norm", "-1"], ["--data", "nosuchcorpus"],
            ["--data-path", "/nonexistent/x.txt"], ["--config", "/"], ["--out", "/"], ["--out", "/proc/x/y.npz"],
            ["--anneal", "slope=1,2"], ["--lr-schedule", "plateau", "--lr-every", "step"], ["--max-chunks", "-2"],
            ["--dtype", "float16"], ["--model", "nosuchmodel"], ["--data-option", "level=byte"]]


def case_cli(rng, i):
    out = os.path.join(work, f"cli{i}", "m.npz")
    args = ["train", "--model", "lstm", "--embed-size", "4", "--hidden-sizes", "8", "--batch-size", "2", "--bptt",
            "10", "--threads", "1", "--no-progress", "--epochs", "1", "--max-chunks", "1", "--data", "synthetic",
            "--data-option", "n_chars=2000", "--out", out]
    for _ in range(rng.randint(1, 2)):
        args += rng.choice(CLI_POOL)
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        try:
            code = main(args)
        except SystemExit as e:  # argparse: usage and one error line
            code = e.code
    finally:
        sys.stderr = old
    text = err.getvalue()
    if code not in (0, 1, 2) or "Traceback" in text or (code == 1 and text.count("error:") != 1):
        return "BadExit", f"exit {code}: {text}", ["never"]
    return ("ok" if code == 0 else f"exit {code}"), text, ["error:", "usage:"]


def run(kind, i):
    rng = random.Random(f"{SEED}-{kind}-{i}")
    return globals()["case_" + kind](rng, i)


results = []
for kind, n in CASES.items():
    for i in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
            signal.alarm(SECONDS)
            try:
                what, msg, names = run(kind, i)
                out = {"kind": kind, "i": i, "what": what, "msg": msg[:400], "names": names}
            except BaseException as e:  # an undocumented exception type
                out = {"kind": kind, "i": i, "what": "UNDOCUMENTED " + type(e).__name__, "msg": str(e)[:400],
                       "names": []}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        blob = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            blob += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            results.append({"kind": kind, "i": i, "what": f"SIGNAL {os.WTERMSIG(status)}", "msg": "", "names": []})
        else:
            results.append(json.loads(blob))
print(json.dumps(results))
""")


def test_fuzz_inputs_are_refused_cleanly(tmp_path):
    script = tmp_path / "fuzz_worker.py"
    script.write_text(WORKER)
    r = subprocess.run(
        [sys.executable, str(script), str(SEED), json.dumps(CASES), str(MEMORY_CAP), str(CASE_SECONDS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == sum(CASES.values())
    problems = []
    for res in results:
        if res["what"] == "ok":
            continue
        if res["what"].startswith(("SIGNAL", "UNDOCUMENTED", "BadExit")):
            problems.append(res)
        elif not res["msg"] or not any(n and str(n).lower() in res["msg"].lower() for n in res["names"]):
            problems.append({**res, "why": "message names none of " + ", ".join(map(str, res["names"]))})
    refused = sum(res["what"] != "ok" for res in results)
    assert refused >= len(results) // 3, "the cases should mostly be bad input"
    assert not problems, json.dumps(problems[:10], indent=1)
