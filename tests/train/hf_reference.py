#!/usr/bin/env python3
"""
tests/train/hf_reference.py — `trainer init / export / import` against Hugging Face
transformers and the `safetensors` package (docs/trainer.md "Hugging Face models").

Usage:  python3 tests/train/hf_reference.py [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_TRAINER (the program
to test, default $top_builddir/train/trainer).

  (a) export loads in transformers: `trainer init` a nano model (--set model.vocab=512, over
      an encoding of the 256 single bytes: model.vocab is never below data.encoding's size),
      untied and tied, `trainer export`, LlamaForCausalLM.from_pretrained(DIR) in float32
      with no missing or unexpected keys and the config's dimensions; every tensor of its
      state_dict equals the file's tensor read with safetensors.safe_open (exact), the file
      holds F32 tensors of exactly the model's names (no lm_head.weight when tied, where
      transformers ties it to the embedding).
  (b) import reads what transformers writes: a LlamaForCausalLM with random weights (and
      rope_theta 500000, rms_norm_eps 1e-6) saved with save_pretrained(safe_serialization=
      True) — as one file, as shards (model.safetensors.index.json), in bfloat16, tied —
      goes through `trainer import` and `trainer export`; every tensor of the export equals
      the saved one exactly (bf16 -> f32 is exact) and config.json keeps the settings.
  (c) round trip: `trainer import` of the export of (a) holds the checkpoint's parameters
      bit for bit, and exporting it again gives byte-identical model.safetensors.
  (d) refusals: another model_type, RoPE scaling, attention bias, a missing and a
      misshaped tensor each exit 1 with a message naming the problem; an extra tensor is
      ignored.

  (e) logits: transformers' logits (LlamaForCausalLM, float32) equal the trainer's forward
      (tests/train/parity_tool logits, the checkpoint's model) within 1e-5 relative (max
      |ours - theirs| / max |theirs|) on two samples of 37 and 300 tokens (the second
      crosses the attention kernel's tiles), for: the untied and the tied export of (a),
      and the f32 and tied imports of (b) (rope_theta 500000, rms_norm_eps 1e-6).
  (f) the families users continue from, each a nano model built with transformers' own
      config class (random weights, torch seeded, saved with save_pretrained):
        llama3   LlamaConfig with rope_type "llama3" (factor 8, low 1, high 4, original
                 context 1024: the head's 8 frequencies fall in all three bands);
        mistral  MistralConfig, sliding_window null;
        qwen2    Qwen2Config (Q/K/V biases, no o_proj bias), tied embeddings.
      Each: `trainer import`; the logits as in (e) within 1e-5 relative; every parameter
      gradient of the mean loss (parity_tool run: a sample whole and a sample in two slices
      with KV context) against torch autograd of the same loss in float64, per tensor max
      |ours - theirs| <= 3e-5 max |theirs| (the Q/K/V biases' gradients among them; fp32
      against fp64 with these N(0, 0.5) weights reaches ~1.1e-5 on a norm weight, whose
      gradient sums every row);
      `trainer export` writes a directory AutoModelForCausalLM.from_pretrained loads without
      missing or unexpected keys, as the same architecture and model_type, with the same
      RoPE settings, the same tensors exactly and logits equal to the original model's.
      The transformers-4 layout of llama3 (rope_theta and "rope_scaling" at the top level)
      imports to the same checkpoint bytes as transformers-5's "rope_parameters". Refused
      by name: a mistral whose sliding_window is below max_position_embeddings, a qwen2
      with use_sliding_window, a rope_type other than default/llama3.

Output: TAP-style lines ("ok N - ...", "not ok N - ..."). Exit status: 0 pass, 1 fail,
77 skip (torch, transformers or safetensors missing, or the trainer not built).
"""
import base64
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")

try:
    import torch
    import transformers
    from safetensors import safe_open
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    # configure picks the project's venv for PYTHON; fall back to it when run by hand.
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_HF_REEXEC")):
        os.environ["LONGTAIL_HF_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print("1..0 # SKIP torch/transformers/safetensors not importable by %s (%s)" % (sys.executable, e))
    sys.exit(77)

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILDDIR = os.environ.get("top_builddir") or SRCDIR
TRAINER = os.environ.get("LONGTAIL_TRAINER") or os.path.join(BUILDDIR, "train", "trainer")

NANO = dict(hidden_size=64, intermediate_size=192, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=2, vocab_size=512)

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
TF_MAJOR = int(transformers.__version__.split(".")[0])
DTYPE_KW = "dtype" if TF_MAJOR >= 5 else "torch_dtype"

n_test = 0
n_fail = 0


def report(ok, what, detail=""):
    global n_test, n_fail
    n_test += 1
    if not ok:
        n_fail += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n_test, what))
    if not ok and detail:
        for line in str(detail).rstrip().splitlines():
            print("#   " + line)


def trainer(*args, expect=0):
    """Run the trainer; returns (stdout, stderr). A different exit status raises."""
    p = subprocess.run([TRAINER] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode != expect:
        raise RuntimeError("trainer %s: exit %d (expected %d)\n%s%s" % (" ".join(map(str, args)), p.returncode,
                                                                        expect, p.stdout, p.stderr))
    return p.stdout, p.stderr


def safetensors_tensors(path):
    """name -> tensor of a safetensors file, through the reference implementation."""
    with safe_open(path, framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def ckpt_params(path):
    """The parameter bytes of a trainer checkpoint (docs/trainer.md: header 256 bytes, n_params at 208)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data, 208)[0]
    return data[256:256 + 4 * n]


def load_hf(d):
    model, info = LlamaForCausalLM.from_pretrained(d, output_loading_info=True, **{DTYPE_KW: torch.float32})
    return model, info


def exact(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def mismatches(want, got):
    """Names whose tensors differ (values, shape or dtype), and names only on one side."""
    bad = [k for k in want if k in got and not exact(want[k].to(torch.float32), got[k])]
    return bad, sorted(set(want) - set(got)), sorted(set(got) - set(want))


# ---------------------------------------------------------------- (a) export -> transformers

def byte_encoding(tmp):
    """--set options naming an encoding of the 256 single bytes (ranks 0..255, no specials),
    written under tmp: a 512-row head is then at least data.encoding's size."""
    d = os.path.join(tmp, "vocab")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "bytes.tiktoken"), "w") as f:
        for b in range(256):
            f.write("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b))
    with open(os.path.join(d, "bytes.json"), "w") as f:
        json.dump({"pat_str": r"\S+|\s+", "special_tokens": {}}, f)
    return ["--set", "data.encoding=bytes", "--set", "data.vocab_dir=" + d]


def check_export(tmp):
    for tied in (False, True):
        tag = "tied" if tied else "untied"
        ckpt = os.path.join(tmp, "init-%s.bin" % tag)
        out_dir = os.path.join(tmp, "export-%s" % tag)
        sets = ["--set", "model.preset=nano", "--set", "model.vocab=512", "--set", "train.seed=%d" % (11 + tied)]
        sets += byte_encoding(tmp)
        if tied:
            sets += ["--set", "model.tie_embeddings=true"]
        out, _ = trainer("init", *sets, "--out", ckpt)
        report(out.startswith("wrote %s: " % ckpt) and out.rstrip().endswith(" parameters"),
               "init prints 'wrote CKPT: MODEL N parameters' (%s)" % tag, out)
        out, _ = trainer("export", ckpt, "--hf", out_dir)
        report(out.startswith("wrote %s: " % out_dir), "export prints 'wrote DIR: ...' (%s)" % tag, out)

        model, info = load_hf(out_dir)
        problems = {k: v for k, v in info.items() if v and k != "error_msgs"} if isinstance(info, dict) else {}
        report(not problems, "transformers loads the %s export without missing/unexpected keys" % tag, problems)
        c = model.config
        dims_ok = (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads,
                   c.num_hidden_layers, c.vocab_size, bool(c.tie_word_embeddings)) == (64, 192, 4, 2, 2, 512, tied)
        report(dims_ok, "config.json dimensions and tie_word_embeddings (%s)" % tag, c)

        path = os.path.join(out_dir, "model.safetensors")
        file_t = safetensors_tensors(path)
        header = safetensors_header(path)
        dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
        report(dtypes == {"F32"} and header.get("__metadata__", {}).get("format") == "pt",
               "the file holds F32 tensors and format=pt (%s)" % tag, (dtypes, header.get("__metadata__")))
        sd = {k: v for k, v in model.state_dict().items()}
        want_names = set(sd) - ({"lm_head.weight"} if tied else set())
        report(set(file_t) == want_names, "file tensor names == state_dict names%s (%s)"
               % (" minus the tied lm_head" if tied else "", tag), sorted(set(file_t) ^ want_names))
        bad = [k for k in file_t if k in sd and not exact(sd[k], file_t[k])]
        report(not bad, "every state_dict tensor equals the file's exactly (%s)" % tag, bad)
        if tied:
            report(torch.equal(sd["lm_head.weight"], file_t["model.embed_tokens.weight"]),
                   "tied: transformers' lm_head is the exported embedding")
        else:
            norms = [k for k in file_t if k.endswith("norm.weight")]
            report(all(file_t[k].dim() == 1 for k in norms) and len(norms) == 5,
                   "norm weights are 1-D tensors", [tuple(file_t[k].shape) for k in norms])
    return os.path.join(tmp, "init-untied.bin"), os.path.join(tmp, "export-untied")


# ---------------------------------------------------------------- (b) transformers -> import -> export

def random_model(tied, seed):
    cfg = LlamaConfig(**NANO, tie_word_embeddings=tied, rope_theta=500000.0, rms_norm_eps=1e-6,
                      max_position_embeddings=4096)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model


def check_import(tmp):
    cases = [("f32", False, torch.float32, {}), ("bf16", False, torch.bfloat16, {}),
             ("sharded", False, torch.float32, {"max_shard_size": "100KB"}), ("tied", True, torch.float32, {}),
             ("f16", False, torch.float16, {})]
    for i, (tag, tied, dtype, kw) in enumerate(cases):
        model = random_model(tied, 100 + i).to(dtype)
        src = os.path.join(tmp, "hf-%s" % tag)
        model.save_pretrained(src, safe_serialization=True, **kw)
        if tag == "sharded":
            report(os.path.exists(os.path.join(src, "model.safetensors.index.json")),
                   "save_pretrained wrote shards", os.listdir(src))
        ckpt = os.path.join(tmp, "import-%s.bin" % tag)
        again = os.path.join(tmp, "reexport-%s" % tag)
        out, err = trainer("import", "--hf", src, "--out", ckpt)
        report(out.startswith("wrote %s: " % ckpt), "import prints 'wrote CKPT: ...' (%s)" % tag, out + err)
        trainer("export", ckpt, "--hf", again)
        got = safetensors_tensors(os.path.join(again, "model.safetensors"))
        want = {k: v for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
        bad, missing, extra = mismatches(want, got)
        report(not bad and not missing and not extra,
               "import -> export reproduces every %s tensor exactly" % tag,
               "differ: %s\nmissing: %s\nextra: %s" % (bad, missing, extra))
        with open(os.path.join(again, "config.json")) as f:
            c = json.load(f)
        report(c["rope_theta"] == 500000.0 and c["rms_norm_eps"] == 1e-6 and c["tie_word_embeddings"] == tied
               and c["model_type"] == "llama", "config.json keeps rope_theta, rms_norm_eps, tying (%s)" % tag, c)
        if tag in ("bf16", "f16"):
            report(("%s tensors widened to fp32" % tag.upper()) in err, "import notes the %s widening" % tag, err)


# ---------------------------------------------------------------- (c) round trip

def check_roundtrip(tmp, ckpt, export_dir):
    back = os.path.join(tmp, "back.bin")
    trainer("import", "--hf", export_dir, "--out", back)
    report(ckpt_params(back) == ckpt_params(ckpt), "import of the export holds the checkpoint's parameters bit for bit")
    again = os.path.join(tmp, "export-again")
    trainer("export", back, "--hf", again)
    with open(os.path.join(export_dir, "model.safetensors"), "rb") as f1, \
            open(os.path.join(again, "model.safetensors"), "rb") as f2:
        report(f1.read() == f2.read(), "export -> import -> export gives byte-identical model.safetensors")


# ---------------------------------------------------------------- (d) refusals

def check_refusals(tmp, export_dir):
    def variant(name, edit_config=None, edit_tensors=None):
        d = os.path.join(tmp, "bad-" + name)
        shutil.copytree(export_dir, d)
        if edit_config:
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
            edit_config(c)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(c, f)
        if edit_tensors:
            from safetensors.torch import save_file
            t = safetensors_tensors(os.path.join(d, "model.safetensors"))
            edit_tensors(t)
            save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return d

    def refused(name, d, *needles):
        p = subprocess.run([TRAINER, "import", "--hf", d, "--out", os.path.join(tmp, "x.bin")],
                           capture_output=True, text=True)
        ok = p.returncode == 1 and p.stderr.startswith("trainer: error: ") and all(n in p.stderr for n in needles)
        report(ok, "import refuses %s (exit 1, message names it)" % name, "exit %d\n%s" % (p.returncode, p.stderr))

    refused("another model_type", variant("type", lambda c: c.update(model_type="gemma")), "model_type", "gemma")
    refused("RoPE scaling", variant("rope", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": 8.0})),
            "RoPE scaling", "yarn")
    refused("llama3 scaling without its parameters",
            variant("rope3", lambda c: c.update(rope_scaling={"rope_type": "llama3", "factor": 8.0})),
            "llama3", "low_freq_factor")
    refused("attention biases", variant("bias", lambda c: c.update(attention_bias=True)), "attention_bias")
    refused("a missing tensor",
            variant("missing", edit_tensors=lambda t: t.pop("model.layers.1.mlp.down_proj.weight")),
            "model.layers.1.mlp.down_proj.weight", "missing")
    refused("a misshaped tensor",
            variant("shape", edit_tensors=lambda t: t.update({"model.norm.weight": torch.ones(63)})),
            "model.norm.weight", "[63]", "[64]")
    d = variant("extra", edit_tensors=lambda t: t.update(
        {"model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8)}))
    p = subprocess.run([TRAINER, "import", "--hf", d, "--out", os.path.join(tmp, "extra.bin")],
                       capture_output=True, text=True)
    report(p.returncode == 0 and "inv_freq" in p.stderr, "import ignores an extra tensor with a note",
           p.stdout + p.stderr)


# ---------------------------------------------------------------- (e) logits

PARITY_TOOL = os.path.join(BUILDDIR, "tests", "train", "parity_tool")
LOGITS_TOL = 1e-5


def check_logits(tmp, model, ckpt, what):
    """transformers' logits of `model` against the trainer's forward of `ckpt`."""
    import numpy as np
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(7)
    samples = [torch.randint(0, V, (n,), generator=g) for n in (37, 300)]
    out = os.path.join(tmp, "logits-" + what.replace(" ", "_"))
    os.makedirs(out)
    spec = os.path.join(out, "spec.json")
    with open(spec, "w") as f:
        json.dump({"model": {}, "ckpt": ckpt, "samples": [s.tolist() for s in samples], "units": [],
                   "threads": 2}, f)
    p = subprocess.run([PARITY_TOOL, "logits", spec, out], capture_output=True, text=True)
    if p.returncode != 0:
        report(False, "parity_tool logits ran (%s)" % what, p.stdout + p.stderr)
        return
    model = model.to(torch.float32).eval()
    for j, s in enumerate(samples):
        with torch.no_grad():
            ref = model(s[None]).logits[0].numpy().astype(np.float64)
        ours = np.fromfile(os.path.join(out, "logits_s%d.bin" % j), dtype="<f4").astype(np.float64)
        if ours.size != ref.size:
            report(False, "logits of a %d-token sample (%s)" % (len(s), what), (ours.size, ref.shape))
            continue
        rel = np.abs(ours.reshape(ref.shape) - ref).max() / max(np.abs(ref).max(), 1e-30)
        report(rel <= LOGITS_TOL, "transformers' logits == ours, %d tokens, %s (rel %.2e)" % (len(s), what, rel),
               "rel %.3e > %g" % (rel, LOGITS_TOL))


def check_all_logits(tmp):
    for tied in (False, True):
        tag = "tied" if tied else "untied"
        model, _ = load_hf(os.path.join(tmp, "export-%s" % tag))
        check_logits(tmp, model, os.path.join(tmp, "init-%s.bin" % tag), "%s export" % tag)
    for tag, tied in (("f32", False), ("tied", True)):
        src = os.path.join(tmp, "hf-%s" % tag)
        model, _ = load_hf(src)
        check_logits(tmp, model, os.path.join(tmp, "import-%s.bin" % tag), "%s import" % tag)


# ---------------------------------------------------------------- (f) llama3, mistral, qwen2

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 1024}
GRAD_TOL = 3e-5  # fp32 against fp64 (see (f) above)


def family_model(family, seed):
    """A nano model of `family` from transformers' own config class, random weights."""
    common = dict(NANO, rms_norm_eps=1e-6, max_position_embeddings=4096)
    rope = "rope_parameters" if TF_MAJOR >= 5 else "rope_scaling"
    if family == "llama3":
        if TF_MAJOR >= 5:
            cfg = transformers.LlamaConfig(**common, rope_parameters=dict(LLAMA3_ROPE, rope_theta=500000.0))
        else:
            cfg = transformers.LlamaConfig(**common, rope_theta=500000.0, rope_scaling=dict(LLAMA3_ROPE))
        cls = transformers.LlamaForCausalLM
    elif family == "mistral":
        kw = {rope: {"rope_type": "default", "rope_theta": 1000000.0}} if TF_MAJOR >= 5 else {"rope_theta": 1e6}
        cfg = transformers.MistralConfig(**common, sliding_window=None, **kw)
        cls = transformers.MistralForCausalLM
    else:
        kw = {rope: {"rope_type": "default", "rope_theta": 1000000.0}} if TF_MAJOR >= 5 else {"rope_theta": 1e6}
        cfg = transformers.Qwen2Config(**common, tie_word_embeddings=True, use_sliding_window=False, **kw)
        cls = transformers.Qwen2ForCausalLM
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model


def run_parity(tmp, what, spec_extra, cmd="run"):
    out = os.path.join(tmp, "%s-%s" % (cmd, what))
    os.makedirs(out)
    spec = os.path.join(out, "spec.json")
    with open(spec, "w") as f:
        json.dump(dict({"model": {}, "threads": 2, "optim": {"steps": 0}}, **spec_extra), f)
    p = subprocess.run([PARITY_TOOL, cmd, spec, out], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("parity_tool %s (%s): exit %d\n%s%s" % (cmd, what, p.returncode, p.stdout, p.stderr))
    return out, p.stdout


def check_grads(tmp, model, ckpt, what):
    """Every parameter gradient of the mean loss against torch autograd (float64)."""
    import numpy as np
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(9)
    samples = [torch.randint(0, V, (n,), generator=g) for n in (37, 100)]
    units = [[[0, 0, 37]], [[1, 0, 60]], [[1, 60, 100]]]  # the second sample in two slices (KV context)
    out, _ = run_parity(tmp, what, {"ckpt": ckpt, "samples": [s.tolist() for s in samples], "units": units})
    _, layout = run_parity(tmp, what + "-layout", {"ckpt": ckpt}, "layout")
    ref = copy.deepcopy(model).to(torch.float64)
    ref.zero_grad()
    N = sum(len(s) - 1 for s in samples)
    loss = sum(torch.nn.functional.cross_entropy(ref(s[None]).logits[0][:-1], s[1:], reduction="sum")
               for s in samples) / N
    loss.backward()
    params = dict(ref.named_parameters())
    grads = np.fromfile(os.path.join(out, "grads.bin"), dtype="<f4").astype(np.float64)
    off, worst, bad, names = 0, 0.0, [], []
    for line in layout.split("\n"):
        if not line.strip():
            continue
        name, rows, cols = line.split()
        n = int(rows) * int(cols)
        want = params[name].grad.numpy().reshape(-1)
        rel = np.abs(grads[off:off + n] - want).max() / max(np.abs(want).max(), 1e-30)
        worst = max(worst, rel)
        if not rel <= GRAD_TOL:
            bad.append("%s rel %.3e" % (name, rel))
        names.append(name)
        off += n
    report(off == grads.size and not bad,
           "every parameter gradient == torch autograd's, %s (%d tensors, worst rel %.2e)" % (what, len(names), worst),
           "\n".join(bad) or "%d floats of %d" % (off, grads.size))
    if "qwen2" in what:
        biases = [n for n in names if n.endswith("_proj.bias")]
        report(len(biases) == 3 * model.config.num_hidden_layers and not any("o_proj" in n for n in biases),
               "the gradients include every q/k/v_proj bias and no o_proj bias (%s)" % what, biases)


def check_family(tmp, family, seed):
    model = family_model(family, seed).eval()
    src = os.path.join(tmp, "fam-" + family)
    model.save_pretrained(src, safe_serialization=True)
    ckpt = os.path.join(tmp, "fam-%s.bin" % family)
    out, err = trainer("import", "--hf", src, "--out", ckpt)
    report(out.startswith("wrote %s: " % ckpt), "import of a %s model" % family, out + err)
    check_logits(tmp, model, ckpt, "%s import" % family)
    check_grads(tmp, model, ckpt, "%s import" % family)
    exp = os.path.join(tmp, "fam-%s-export" % family)
    trainer("export", ckpt, "--hf", exp)
    back, info = transformers.AutoModelForCausalLM.from_pretrained(exp, output_loading_info=True,
                                                                   **{DTYPE_KW: torch.float32})
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"} if isinstance(info, dict) else {}
    report(not problems and type(back) is type(model) and back.config.model_type == model.config.model_type,
           "transformers loads the %s export as %s without missing/unexpected keys" % (family, type(model).__name__),
           (type(back).__name__, back.config.model_type, problems))
    want_rope = getattr(model.config, "rope_parameters", None) or getattr(model.config, "rope_scaling", None)
    got_rope = getattr(back.config, "rope_parameters", None) or getattr(back.config, "rope_scaling", None)
    report(want_rope == got_rope and bool(back.config.tie_word_embeddings) == bool(model.config.tie_word_embeddings),
           "the %s export keeps the RoPE settings and the tying" % family, (want_rope, got_rope))
    bad, missing, extra = mismatches(model.state_dict(), back.state_dict())
    report(not bad and not missing and not extra, "the %s export's tensors equal the original's exactly" % family,
           "differ: %s\nmissing: %s\nextra: %s" % (bad, missing, extra))
    g = torch.Generator().manual_seed(11)
    s = torch.randint(0, model.config.vocab_size, (300,), generator=g)
    with torch.no_grad():
        same = torch.equal(model(s[None]).logits, back.eval()(s[None]).logits)
    report(same, "the %s export's logits equal the original model's" % family)
    return src, ckpt


def check_families(tmp):
    srcs = {}
    for i, family in enumerate(("llama3", "mistral", "qwen2")):
        srcs[family] = check_family(tmp, family, 300 + i)
    # llama3 in transformers 4's layout: rope_theta and rope_scaling at the top level
    src, ckpt = srcs["llama3"]
    d = os.path.join(tmp, "fam-llama3-v4")
    shutil.copytree(src, d)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c.pop("rope_parameters", None)
    c["rope_theta"] = 500000.0
    c["rope_scaling"] = dict(LLAMA3_ROPE)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    v4 = os.path.join(tmp, "fam-llama3-v4.bin")
    trainer("import", "--hf", d, "--out", v4)
    with open(ckpt, "rb") as f1, open(v4, "rb") as f2:
        report(f1.read() == f2.read(), "llama3 in transformers 4's rope_scaling layout imports to the same checkpoint")

    def refused(name, src, edit, *needles):
        d = os.path.join(tmp, "bad-fam-" + name)
        shutil.copytree(src, d)
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        edit(c)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f)
        p = subprocess.run([TRAINER, "import", "--hf", d, "--out", os.path.join(tmp, "x.bin")],
                           capture_output=True, text=True)
        ok = p.returncode == 1 and p.stderr.startswith("trainer: error: ") and all(n in p.stderr for n in needles)
        report(ok, "import refuses %s (exit 1, message names it)" % name, "exit %d\n%s" % (p.returncode, p.stderr))

    refused("a mistral sliding window", srcs["mistral"][0], lambda c: c.update(sliding_window=512),
            "sliding_window", "512", "sliding-window attention")
    d = os.path.join(tmp, "fam-mistral-wide")
    shutil.copytree(srcs["mistral"][0], d)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c["sliding_window"] = 4096  # covers max_position_embeddings: full attention
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    p = subprocess.run([TRAINER, "import", "--hf", d, "--out", os.path.join(tmp, "y.bin")],
                       capture_output=True, text=True)
    report(p.returncode == 0, "a mistral whose sliding_window covers max_position_embeddings imports", p.stderr)
    refused("a qwen2 sliding window", srcs["qwen2"][0],
            lambda c: c.update(use_sliding_window=True, sliding_window=256, max_window_layers=1,
                               layer_types=["full_attention", "sliding_attention"]),
            "sliding_attention", "sliding-window attention")


def main():
    keep = "--keep" in sys.argv[1:]
    if not os.access(TRAINER, os.X_OK):
        print("1..0 # SKIP %s is not built" % TRAINER)
        return 77
    tmp = tempfile.mkdtemp(prefix="lt-hf-reference-")
    try:
        ckpt, export_dir = check_export(tmp)
        check_import(tmp)
        check_roundtrip(tmp, ckpt, export_dir)
        check_refusals(tmp, export_dir)
        check_all_logits(tmp)
        check_families(tmp)
    except Exception as e:  # a trainer failure or a crash of the checks: a failure, with the reason
        report(False, "the checks ran to the end", "%s: %s" % (type(e).__name__, e))
    finally:
        if keep:
            print("# kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % n_test)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
