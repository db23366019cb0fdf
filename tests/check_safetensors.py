#!/usr/bin/env python3
"""check_safetensors.py -- validate a char_lm model.safetensors without attograd's reader.

    python3 tests/check_safetensors.py out/baby/model.safetensors

An independent second reading of the file (standard library only: struct + json), checking
what MODEL.md ("Checkpoint files") promises:
  - 8-byte little-endian header length N, N <= file size - 8; the header is a JSON object;
  - every tensor has dtype F32, a shape of non-negative ints, data_offsets [begin, end] with
    end - begin == 4 * numel, and the tensors tile the data area exactly: contiguous, no gap,
    no overlap, ending at the end of the file;
  - __metadata__ holds only strings, format == "char_lm-1", "config" is a JSON object with
    vocab_size, n_layer, n_head, n_embd, block_size, and "vocab" is a JSON array of
    vocab_size distinct, sorted code points;
  - the tensor names and shapes are exactly MODEL.md's parameter list for that config.
Prints "ok: N tensors" and exits 0, or prints one "error: ..." line and exits 1.
"""
import json
import struct
import sys


class Bad(Exception):
    pass


def expected_params(cfg):
    """MODEL.md's state_dict: name -> shape."""
    V, L, C, T = cfg["vocab_size"], cfg["n_layer"], cfg["n_embd"], cfg["block_size"]
    p = {"tok_emb.weight": [V, C], "pos_emb.weight": [T, C]}
    for i in range(L):
        b = f"blocks.{i}."
        p[b + "ln1.weight"] = [C]
        p[b + "ln1.bias"] = [C]
        for lin in ("w_q", "w_k", "w_v", "w_o"):
            p[b + f"attn.{lin}.weight"] = [C, C]
            p[b + f"attn.{lin}.bias"] = [C]
        p[b + "ln2.weight"] = [C]
        p[b + "ln2.bias"] = [C]
        p[b + "mlp.fc1.weight"] = [4 * C, C]
        p[b + "mlp.fc1.bias"] = [4 * C]
        p[b + "mlp.fc2.weight"] = [C, 4 * C]
        p[b + "mlp.fc2.bias"] = [C]
    p["ln_f.weight"] = [C]
    p["ln_f.bias"] = [C]
    p["lm_head.weight"] = [V, C]
    p["lm_head.bias"] = [V]
    return p


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise Bad(f"file is {len(blob)} bytes, too short for the header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise Bad(f"header length {n} exceeds file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"),
                            object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise Bad(f"header is not valid JSON: {e}")
    if not isinstance(header, dict):
        raise Bad("header is not a JSON object")
    data_size = len(blob) - 8 - n

    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict):
        raise Bad("no __metadata__ object")
    for k, v in meta.items():
        if not isinstance(v, str):
            raise Bad(f"__metadata__ value for {k!r} is not a string")

    # tensors: dtype, shape, offsets contiguous in file order and in bounds
    pos = 0
    shapes = {}
    for name, e in header.items():
        if not isinstance(e, dict):
            raise Bad(f"entry {name!r} is not an object")
        if e.get("dtype") != "F32":
            raise Bad(f"tensor {name!r} has dtype {e.get('dtype')!r}, expected F32")
        shape = e.get("shape")
        if not isinstance(shape, list) or not all(is_int(d) and d >= 0 for d in shape):
            raise Bad(f"tensor {name!r} has a bad shape {shape!r}")
        offs = e.get("data_offsets")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(is_int(o) for o in offs)):
            raise Bad(f"tensor {name!r} has bad data_offsets {offs!r}")
        begin, end = offs
        numel = 1
        for d in shape:
            numel *= d
        if begin != pos:
            raise Bad(f"tensor {name!r} starts at {begin}, expected {pos} (not contiguous)")
        if end - begin != 4 * numel:
            raise Bad(f"tensor {name!r} of shape {shape} needs {4 * numel} bytes, has {end - begin}")
        if end > data_size:
            raise Bad(f"tensor {name!r} ends at {end}, past the data area of {data_size} bytes")
        pos = end
        shapes[name] = shape
    if pos != data_size:
        raise Bad(f"tensors end at {pos}, but the data area is {data_size} bytes")

    # metadata contents
    if meta.get("format") != "char_lm-1":
        raise Bad(f"__metadata__ format is {meta.get('format')!r}, expected 'char_lm-1'")
    for key in ("config", "vocab"):
        if key not in meta:
            raise Bad(f"__metadata__ has no {key!r}")
    try:
        cfg = json.loads(meta["config"])
        vocab = json.loads(meta["vocab"])
    except ValueError as e:
        raise Bad(f"__metadata__ config or vocab is not JSON: {e}")
    if not isinstance(cfg, dict):
        raise Bad("__metadata__ config is not a JSON object")
    for k in ("vocab_size", "n_layer", "n_head", "n_embd", "block_size"):
        if not is_int(cfg.get(k)) or cfg[k] <= 0:
            raise Bad(f"config {k} is {cfg.get(k)!r}, expected a positive integer")
    if cfg["n_embd"] % cfg["n_head"]:
        raise Bad(f"config n_head {cfg['n_head']} does not divide n_embd {cfg['n_embd']}")
    if not isinstance(vocab, list) or not all(is_int(c) and 0 <= c <= 0x10FFFF for c in vocab):
        raise Bad("__metadata__ vocab is not a JSON array of code points")
    if any(a >= b for a, b in zip(vocab, vocab[1:])):
        raise Bad("__metadata__ vocab is not sorted and distinct")
    if len(vocab) != cfg["vocab_size"]:
        raise Bad(f"vocab has {len(vocab)} entries, config vocab_size is {cfg['vocab_size']}")

    # names and shapes: exactly MODEL.md's list
    want = expected_params(cfg)
    missing = [k for k in want if k not in shapes]
    extra = [k for k in shapes if k not in want]
    if missing:
        raise Bad(f"missing tensors: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else ""))
    if extra:
        raise Bad(f"unexpected tensors: {', '.join(extra[:5])}" + (" ..." if len(extra) > 5 else ""))
    for k, s in want.items():
        if shapes[k] != s:
            raise Bad(f"tensor {k!r} has shape {shapes[k]}, expected {s}")
    return len(shapes)


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def main():
    if len(sys.argv) != 2:
        print("usage: check_safetensors.py MODEL.safetensors", file=sys.stderr)
        return 2
    path = sys.argv[1]
    try:
        n = check(path)
    except OSError as e:
        print(f"error: {path}: {e.strerror}", file=sys.stderr)
        return 1
    except Bad as e:
        print(f"error: {path}: {e}", file=sys.stderr)
        return 1
    print(f"ok: {n} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
