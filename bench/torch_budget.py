#!/usr/bin/python3
"""torch_budget.py -- PyTorch, trained for a time budget, for bench/budget_vs_torch.sh.

The model is ../shared/bench/torch_ref.py's (MODEL.md: Pre-LN GPT, learned positions, biases,
no weight tying, N(0, 0.02) init), with MODEL.md's dropout (on the embedding sum, the attention
weights after softmax, after w_o and after fc2; nanoGPT places it the same way), which
torch_ref.py lacks, with --rope char_lm's rotary positions (on q and k, beside the learned ones),
and a time budget laid out the way `char_lm train --time-budget` lays it:

  - the first steps are timed (from the second) until they add up to 2% of the budget and
    number 3, or the warmup ends; then the step count N is fixed so that the steps end 2% of the
    budget early, and the cosine decays to min_lr at N (nanoGPT's get_lr); every 5% of the
    budget N is fitted again to the steps since (taken when it moves by more than 2%), as
    char_lm refits at each evaluation: the first steps of a run are often the slowest;
  - before each step: if one more step (the larger of the smoothed and the last step time)
    would end past the deadline, the run stops there.

The clock starts after torch is imported and the text is read, just before the model is built,
and stops after the last optimizer step: no evaluation happens inside the budget (char_lm
evaluates and checkpoints inside its own), so PyTorch gets the whole budget for training.
Afterwards, outside the budget, the loss of the whole validation split is computed as `char_lm
eval` computes it: the split cut into windows of T+1 characters at 0, T, 2T, ..., every target
of every whole window once. The last line on stdout is one JSON object:
  {"iters", "train_s", "tokens_per_s", "out_of_time", "val_loss_whole", "train_loss_last"}

    /usr/bin/python3 bench/torch_budget.py --time-budget 300 --n-layer 6 --n-head 6 --n-embd 384 \\
        --block-size 256 --batch-size 64 --dropout 0.2 --lr 1e-3 --min-lr 1e-4 --warmup-iters 100
"""
import argparse
import json
import math
import os
import sys
import time

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--time-budget", type=float, required=True, help="seconds")
p.add_argument("--n-layer", type=int, default=4)
p.add_argument("--n-head", type=int, default=4)
p.add_argument("--n-embd", type=int, default=128)
p.add_argument("--block-size", type=int, default=64)
p.add_argument("--batch-size", type=int, default=12)
p.add_argument("--dropout", type=float, default=0.0)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--min-lr", type=float, default=1e-4)
p.add_argument("--warmup-iters", type=int, default=100)
p.add_argument("--max-iters", type=int, default=10**9)
p.add_argument("--weight-decay", type=float, default=0.1)
p.add_argument("--no-embedding-decay", action="store_true", help="decay the Linear weights only (char_lm's flag)")
p.add_argument("--rope", action="store_true", help="rotary positions on q and k, beside pos_emb (char_lm's flag)")
p.add_argument("--beta2", type=float, default=0.99)
p.add_argument("--optimizer", choices=("adamw", "muon"), default="adamw",
               help="muon: Muon on the blocks' weight matrices, AdamW on the rest (char_lm's src/optim/muon.c)")
p.add_argument("--adamw-lr-scale", type=float, default=1.0,
               help="with --optimizer muon: AdamW's rest at lr times this (char_lm's flag; 0 is 1)")
p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
p.add_argument("--blas-threads", type=int, default=2, help="OpenBLAS threads")
p.add_argument("--seed", type=int, default=1337)
p.add_argument("--data", type=str, default="data/tinyshakespeare.txt")
p.add_argument("--device", type=str, default="cpu",
               help="cpu, or cuda for a sweep by steps (--max-iters N, a --time-budget that never binds); fp32")
args = p.parse_args()

# before torch (and with it OpenBLAS / libgomp) is loaded
os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CAL_SHARE, CAL_MIN_STEPS, RESERVE_SHARE, REFIT_MIN = 0.02, 3, 0.02, 0.02   # as src/train/budget.c
REFIT_SHARE = 0.05   # the count fitted again every 5% of the budget (char_lm: at each evaluation)


def rope(x, cos, sin):
    """RoPE on [B,H,T,D]: the pair (2i, 2i+1) at position p turned by p * 10000^(-2i/D):
    y[2i] = x[2i] cos - x[2i+1] sin, y[2i+1] = x[2i] sin + x[2i+1] cos (cos, sin: [T, D/2])."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class MultiHeadAttention(nn.Module):
    def __init__(self, C, H, T, dropout, use_rope=False):
        super().__init__()
        self.H, self.use_rope = H, use_rope
        if use_rope:
            D = C // H
            assert D % 2 == 0, "rope needs an even head size"
            theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)   # theta_i = 10000^(-2i/D)
            a = torch.arange(T, dtype=torch.float64)[:, None] * theta   # [T, D/2]: p * theta_i
            self.register_buffer("cos", a.cos().float(), persistent=False)
            self.register_buffer("sin", a.sin().float(), persistent=False)
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(C, C) for _ in range(4))
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q = self.w_q(x).view(B, T, H, D).transpose(1, 2)   # [B,H,T,D]
        k = self.w_k(x).view(B, T, H, D).transpose(1, 2)
        v = self.w_v(x).view(B, T, H, D).transpose(1, 2)
        if self.use_rope:
            q, k = rope(q, self.cos[:T], self.sin[:T]), rope(k, self.cos[:T], self.sin[:T])
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))   # [B,H,T,T]
        s = s.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        a = self.attn_drop(F.softmax(s, dim=-1))
        o = (a @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.w_o(o))


class Block(nn.Module):
    def __init__(self, C, H, T, dropout, use_rope=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = MultiHeadAttention(C, H, T, dropout, use_rope)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc1 = nn.Linear(C, 4 * C)
        self.fc2 = nn.Linear(4 * C, C)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, V, L, H, C, T, dropout, use_rope=False):
        super().__init__()
        self.tok_emb = nn.Embedding(V, C)
        self.pos_emb = nn.Embedding(T, C)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(C, H, T, dropout, use_rope) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        for blk in self.blocks:
            nn.init.normal_(blk.attn.w_o.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))
            nn.init.normal_(blk.fc2.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T), reduction="sum")


def newton_schulz5(G):
    """src/optim/muon.c's NS5: about U V^T of G = U S V^T, five quintic rounds, kept wide."""
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G / (G.norm() + 1e-7)
    tall = X.size(0) > X.size(1)
    if tall:
        X = X.T
    for _ in range(5):
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.T if tall else X


class Muon(torch.optim.Optimizer):
    """src/optim/muon.c: buf = mu buf + g; u = g + mu buf; p -= lr wd p; p -= lr 0.2 sqrt(max dim) NS5(u)."""

    def __init__(self, params, lr, weight_decay, momentum=0.95):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p_ in g["params"]:
                buf = self.state[p_].setdefault("buf", torch.zeros_like(p_))
                buf.mul_(g["momentum"]).add_(p_.grad)
                u = newton_schulz5(p_.grad.add(buf, alpha=g["momentum"]))
                p_.mul_(1 - g["lr"] * g["weight_decay"])
                p_.add_(u, alpha=-g["lr"] * 0.2 * max(p_.shape) ** 0.5)


class Optimizers:
    """Several optimizers stepped as one (Muon's matrices and AdamW's rest)."""

    def __init__(self, *opts):
        self.opts = opts
        self.param_groups = [g for o in opts for g in o.param_groups]

    def zero_grad(self, set_to_none=True):
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)

    def step(self):
        for o in self.opts:
            o.step()


def lr_at(it, n):
    a = args
    if it < a.warmup_iters:
        return a.lr * (it + 1) / (a.warmup_iters + 1)
    if it > n:
        return a.min_lr
    span = n - a.warmup_iters
    r = (it - a.warmup_iters) / span if span > 0 else 0.0
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (a.lr - a.min_lr)


def fit_count(it, step, avail):
    return max(it + 1, min(args.max_iters, it + int(avail // step)))


def train(model, opt, train_ids, t0):
    B, T = args.batch_size, args.block_size
    gen = torch.Generator().manual_seed(args.seed)
    deadline = t0 + args.time_budget
    n, fixing, fit_at, fit_it = args.max_iters, True, 0.0, 0
    timed_s, timed, step_s, step_last = 0.0, 0, 0.0, 0.0
    out_of_time, loss_v, it = False, float("nan"), 0
    while it < n:
        now = time.perf_counter()
        if it > 0 and now + max(step_s, step_last) > deadline:
            out_of_time = True
            break
        if fixing and (it > args.warmup_iters or (timed >= CAL_MIN_STEPS and timed_s >= CAL_SHARE * args.time_budget)):
            n = fit_count(it, timed_s / timed if timed else step_s,
                          deadline - now - RESERVE_SHARE * args.time_budget)
            fixing = False
            fit_at, fit_it = now, it
            print(json.dumps({"fixed_count": n, "at": it, "step_s": round(timed_s / max(timed, 1), 5)}), flush=True)
        elif not fixing and now - fit_at >= REFIT_SHARE * args.time_budget and it > fit_it:
            m = fit_count(it, (now - fit_at) / (it - fit_it), deadline - now - RESERVE_SHARE * args.time_budget)
            if abs(m - n) > REFIT_MIN * n:
                print(json.dumps({"refit_count": m, "at": it, "was": n}), flush=True)
                n = m
            fit_at, fit_it = now, it
        for g in opt.param_groups:
            g["lr"] = lr_at(it, n) * g.get("lr_scale", 1.0)
        ix = torch.randint(len(train_ids) - T, (B,), generator=gen).tolist()
        x = torch.stack([train_ids[i:i + T] for i in ix]).to(args.device)
        y = torch.stack([train_ids[i + 1:i + 1 + T] for i in ix]).to(args.device)
        loss = model(x, y) / (B * T)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_v = loss.item()
        dt = time.perf_counter() - now
        step_last, step_s = dt, (0.9 * step_s + 0.1 * dt if step_s > 0 else dt)
        if fixing and it > 0:
            timed_s, timed = timed_s + dt, timed + 1
        it += 1
    return it, time.perf_counter() - t0, out_of_time, loss_v


@torch.no_grad()
def whole_split_loss(model, ids):
    """char_lm eval's loss: windows of T+1 at 0, T, 2T, ...; every target of a whole window once."""
    model.eval()
    T = args.block_size
    starts = list(range(0, len(ids) - T, T))   # a whole window needs T+1 tokens
    tot, cnt = 0.0, 0
    for k in range(0, len(starts), 32):
        s = starts[k:k + 32]
        x = torch.stack([ids[i:i + T] for i in s]).to(args.device)
        y = torch.stack([ids[i + 1:i + 1 + T] for i in s]).to(args.device)
        tot += model(x, y).item()
        cnt += len(s) * T
    return tot / cnt


def make_optimizer(model):
    """AdamW with MODEL.md's groups; with --optimizer muon the blocks' matrices go to Muon."""
    embedding = ("tok_emb.weight", "pos_emb.weight") if args.no_embedding_decay else ()
    muon = args.optimizer == "muon"
    hidden = [p_ for n, p_ in model.named_parameters() if muon and p_.dim() == 2 and n.startswith("blocks.")]
    decay = [p_ for n, p_ in model.named_parameters()
             if p_.dim() == 2 and n not in embedding and not (muon and n.startswith("blocks."))]
    no_decay = [p_ for n, p_ in model.named_parameters() if p_.dim() != 2 or n in embedding]
    rest = args.adamw_lr_scale if muon and args.adamw_lr_scale > 0 else 1.0   # muon.c: 0 is 1
    adamw = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay, "lr_scale": rest},
                               {"params": no_decay, "weight_decay": 0.0, "lr_scale": rest}],
                              lr=args.lr, betas=(0.9, args.beta2), eps=1e-8)   # train() sets each group's lr
    return Optimizers(Muon(hidden, args.lr, args.weight_decay), adamw) if muon else adamw


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.data, "r", encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_train = int(0.9 * len(data))
    t0 = time.perf_counter()   # the budget starts here
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False   # fp32, as attograd
    model = GPT(len(chars), args.n_layer, args.n_head, args.n_embd, args.block_size, args.dropout,
                args.rope).to(args.device)
    opt = make_optimizer(model)
    iters, train_s, out_of_time, last = train(model, opt, data[:n_train], t0)
    val = whole_split_loss(model, data[n_train:])
    print(json.dumps({"iters": iters, "train_s": round(train_s, 2),
                      "tokens_per_s": round(iters * args.batch_size * args.block_size / train_s, 1),
                      "out_of_time": out_of_time, "val_loss_whole": round(val, 4), "train_loss_last": round(last, 4),
                      "threads": args.threads, "blas_threads": args.blas_threads, "torch": torch.__version__,
                      "device": args.device, "rope": args.rope}),
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
