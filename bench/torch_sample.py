#!/usr/bin/python3
"""torch_sample.py -- PyTorch's sampling speed for bench/compare.sh: the reference GPT of
../shared/bench/torch_ref.py (no KV cache, as nanoGPT samples) generates block_size characters
greedily, recomputing the whole context for each one, five times, and prints the best round's
{"chars_per_s": F}.

    /usr/bin/python3 bench/torch_sample.py --config baby --threads 1 [--ref PATH]
"""
import argparse, importlib.util, json, os, sys, time

p = argparse.ArgumentParser()
p.add_argument("--config", default="baby", choices=["tiny", "baby", "small"])
p.add_argument("--threads", type=int, default=1)
p.add_argument("--ref", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench", "torch_ref.py"))
a = p.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
cfg = {"tiny": (2, 2, 64, 32), "baby": (4, 4, 128, 64), "small": (6, 6, 384, 256)}[a.config]
sys.argv = [a.ref]  # torch_ref.py parses its own argv at import
spec = importlib.util.spec_from_file_location("torch_ref", a.ref)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
import torch  # noqa: E402
torch.set_num_threads(a.threads)
torch.manual_seed(1337)
L, H, C, T = cfg
model = ref.GPT(65, L, H, C, T).eval()
best = 0.0
with torch.no_grad():
    for _round in range(5):  # the best of 5, as build/bench does: the first one also warms up
        idx = torch.zeros((1, 1), dtype=torch.long)
        t0 = time.perf_counter()
        for _ in range(T - 1):
            logits, _ = model(idx)  # the whole context, every time
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        best = max(best, (T - 1) / (time.perf_counter() - t0))
print(json.dumps({"config": a.config, "chars_per_s": round(best, 1), "threads": a.threads}))
