#!/usr/bin/python3
"""torch_fixture.py -- the PyTorch reference values that tests/test_torch_ref.c checks against.

Builds the `tiny` GPT of MODEL.md (n_layer 2, n_head 2, n_embd 64, block_size 32, vocab 65)
from the reference implementation ../shared/bench/torch_ref.py (relative to the repo root),
initialised by its own init after torch.manual_seed(1234); takes one fixed batch (B=4, T=32,
windows of T+1 token ids drawn from a torch.Generator seeded
99; x = w[:, :-1], y = w[:, 1:]); computes loss = model(x, y) and
loss.backward(); and writes tests/fixtures/torch_tiny.safetensors:
    <name>          every parameter under its state_dict name, F32
    grad.<name>     its gradient, F32
    batch.x         input ids  [4,32], F32 (small integers are exact)
    batch.y         target ids [4,32], F32
    __metadata__    {"loss": repr(float loss), "config": JSON, "torch": version, ...}
The safetensors file is written with struct + json (no safetensors package needed).

Regenerate (from the repo root, with Debian's interpreter, where python3-torch lives):
    /usr/bin/python3 tests/torch_fixture.py
"""
import importlib.util
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.normpath(os.path.join(ROOT, "..", "shared", "bench", "torch_ref.py"))
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_tiny.safetensors")

CONFIG = {"vocab_size": 65, "n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32}
B, T = 4, 32
INIT_SEED, BATCH_SEED = 1234, 99


def import_torch_ref():
    """torch_ref.py parses sys.argv at import time: give it an empty command line, and one
    thread (it sets OPENBLAS/OMP thread counts before importing torch)."""
    saved = sys.argv
    sys.argv = [REF, "--threads", "1"]
    try:
        spec = importlib.util.spec_from_file_location("torch_ref", REF)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = saved
    return mod


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, float32 torch tensor); metadata: dict of str -> str."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors:
        data = t.detach().to("cpu").contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    hdr = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hdr += b" " * ((8 - len(hdr) % 8) % 8)  # pad with spaces so the data is 8-byte aligned
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main():
    ref = import_torch_ref()
    torch = ref.torch
    torch.set_num_threads(1)

    torch.manual_seed(INIT_SEED)
    model = ref.GPT(CONFIG["vocab_size"], CONFIG["n_layer"], CONFIG["n_head"], CONFIG["n_embd"],
                    CONFIG["block_size"])
    model.train()  # no dropout in the reference; train mode only for clarity

    gen = torch.Generator().manual_seed(BATCH_SEED)
    # windows of T+1 ids, as MODEL.md's batches: x = w[:, :-1], y = w[:, 1:]
    w = torch.randint(0, CONFIG["vocab_size"], (B, T + 1), generator=gen, dtype=torch.long)
    x, y = w[:, :-1].contiguous(), w[:, 1:].contiguous()

    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()

    tensors = []
    for name, p in model.named_parameters():
        tensors.append((name, p))
    for name, p in model.named_parameters():
        tensors.append(("grad." + name, p.grad))
    tensors.append(("batch.x", x.float()))
    tensors.append(("batch.y", y.float()))

    cfg = dict(CONFIG, dropout=0.0, batch_size=B, seq_len=T, init_seed=INIT_SEED, batch_seed=BATCH_SEED)
    meta = {"loss": repr(loss.item()), "config": json.dumps(cfg), "torch": torch.__version__,
            "generator": "tests/torch_fixture.py"}
    write_safetensors(OUT, tensors, meta)
    print("wrote %s: %d tensors, loss %r" % (os.path.relpath(OUT, ROOT), len(tensors), loss.item()))


if __name__ == "__main__":
    main()
