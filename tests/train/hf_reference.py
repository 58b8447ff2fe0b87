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

Output: TAP-style lines ("ok N - ...", "not ok N - ..."). Exit status: 0 pass, 1 fail,
77 skip (torch, transformers or safetensors missing, or the trainer not built).
"""
import base64
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

    refused("another model_type", variant("type", lambda c: c.update(model_type="mistral")), "model_type", "mistral")
    refused("RoPE scaling", variant("rope", lambda c: c.update(rope_scaling={"rope_type": "llama3", "factor": 8.0})),
            "RoPE scaling", "llama3")
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
