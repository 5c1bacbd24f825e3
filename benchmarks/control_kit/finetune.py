"""Full fine-tune of a drafter on a packed training set, saved as a directory vLLM loads.

Plain PyTorch + transformers: float32 master weights, bfloat16 autocast on CUDA (float32
throughout on the CPU), AdamW, linear warm-up then cosine decay to a tenth, gradient
clipping at 1, a fixed seed. The loss is taken over the step's answer tokens only
(``Packed.loss_mask``; the LM head runs on those positions alone): the mean
cross-entropy of the target's greedy tokens (``objective="ce"``), or the mean KL
divergence from the target's own next-token distribution there (``objective="kl"``,
logit distillation: the target runs beside the drafter, bfloat16 on CUDA). Each logged
step also records the drafter's top-1 agreement with the target's tokens on that step's
examples, measured before the step's update (single pass: they are unseen). Before the
first step, a packing check compares one example's hidden states inside a packed row
with the same example run alone (packing must not let examples attend to each other;
the record says whether it passed).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from .mixing import Packed

# What a saved drafter directory takes from the original besides the new weights.
COPIED = (
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
)
WEIGHTS = "model.safetensors"
PACKING_TOLERANCE = 1e-2  # float32 hidden states; a leak between examples moves them by far more


@dataclass(frozen=True)
class TrainConfig:
    """The fine-tune's settings (recorded with every drafter)."""

    lr: float = 5e-5
    rows_per_step: int = 16
    micro_rows: int = 16
    seq_len: int = 1024
    warmup: float = 0.1
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    seed: int = 0
    log_every: int = 1
    save_dtype: str = "bfloat16"
    objective: str = "ce"  # "ce": the target's greedy tokens; "kl": its distribution
    layers: int = 0  # keep only the drafter's first N decoder layers (0: all of them)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def lr_at(step: int, steps: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``cfg.warmup`` of the steps, then cosine decay to lr / 10."""
    warm = max(1, round(cfg.warmup * steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def _hidden(model: Any, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    out = model.model(input_ids=ids, position_ids=pos, use_cache=False)
    return out.last_hidden_state  # type: ignore[no-any-return]


def packing_check(model: Any, packed: Packed, dev: torch.device) -> dict[str, Any]:
    """Max |difference| of the second example of row 0, packed vs alone (float32)."""
    pos = packed.position_ids[0]
    starts = [i for i in range(len(pos)) if pos[i] == 0] + [len(pos)]
    if len(starts) < 3:
        return {"checked": False, "reason": "row 0 holds fewer than two examples"}
    a, b = starts[1], starts[2]
    ids = torch.tensor(packed.input_ids[0, :b], device=dev)[None]
    p = torch.tensor(pos[:b], device=dev)[None]
    with torch.no_grad():
        together = _hidden(model, ids, p)[0, a:b].float()
        alone = _hidden(model, ids[:, a:b], p[:, a:b])[0].float()
    diff = float((together - alone).abs().max())
    # recorded, not raised: a leak would blur the drafters, not void the whole run
    return {
        "checked": True,
        "passed": diff < PACKING_TOLERANCE,
        "max_abs_diff": diff,
        "tolerance": PACKING_TOLERANCE,
    }


def _step_loss(
    model: Any,
    packed: Packed,
    rows: slice,
    dev: torch.device,
    autocast: bool,
    teacher: Any = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The summed loss over the rows' loss positions, and per language its sum
    (``loss_ja``/``loss_en``) and the top-1 matches with the target's tokens
    (``match_ja``/``match_en``). With ``teacher``, the loss is KL(teacher || model)."""
    ids = torch.tensor(packed.input_ids[rows], device=dev)
    pos = torch.tensor(packed.position_ids[rows], device=dev)
    mask_np = packed.loss_mask[rows]
    mask = torch.tensor(mask_np, device=dev)
    targets = torch.roll(ids, shifts=-1, dims=1)[mask]
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
        hidden = _hidden(model, ids, pos)[mask]
        logits = model.lm_head(hidden)
    logits = logits.float()
    if teacher is None:
        losses = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    else:
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            t_logits = teacher.lm_head(_hidden(teacher, ids, pos)[mask])
        t_logp = torch.log_softmax(t_logits.float(), -1)
        logp = torch.log_softmax(logits, -1)
        losses = (t_logp.exp() * (t_logp - logp)).sum(-1)
    match = logits.detach().argmax(-1) == targets
    langs = packed.loss_lang[rows][mask_np]
    parts = {}
    for lang in ("ja", "en"):
        sel = torch.tensor(langs == lang, device=dev)
        any_ = bool(sel.any())
        parts[f"loss_{lang}"] = float(losses[sel].sum().detach()) if any_ else 0.0
        parts[f"match_{lang}"] = float(match[sel].sum()) if any_ else 0.0
    return losses.sum(), parts


def _teacher(path: Path | None, objective: str, dev: torch.device) -> Any:
    if objective == "ce":
        return None
    if objective != "kl" or path is None:
        raise ValueError(f"objective {objective!r} needs a teacher (the target) and is ce or kl")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    teacher = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(dev)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def train(
    drafter: Path, packed: Packed, out: Path, cfg: TrainConfig, teacher: Path | None = None
) -> dict[str, Any]:
    """Fine-tune ``drafter`` on ``packed``, save it to ``out``; the training record.
    ``teacher`` (the target's directory) is needed for ``cfg.objective == "kl"``."""
    t0 = time.monotonic()
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    dev = device()
    autocast = dev.type == "cuda"
    model = AutoModelForCausalLM.from_pretrained(str(drafter), dtype=torch.float32)
    if cfg.layers:
        shallow(model, cfg.layers)
    model = model.to(dev)
    torch.backends.cuda.matmul.allow_tf32 = False  # the check compares float32 exactly
    check = packing_check(model, packed, dev)
    torch.backends.cuda.matmul.allow_tf32 = True
    tmodel = _teacher(teacher, cfg.objective, dev)
    model.train()
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=cfg.lr,
        betas=cfg.betas,
        weight_decay=cfg.weight_decay,
        fused=dev.type == "cuda",
    )
    n_rows = packed.input_ids.shape[0]
    steps = math.ceil(n_rows / cfg.rows_per_step)
    curve: list[dict[str, Any]] = []
    seen = {"ja": 0, "en": 0}
    t_train = time.monotonic()
    for step in range(steps):
        lo, hi = step * cfg.rows_per_step, min(n_rows, (step + 1) * cfg.rows_per_step)
        n_tok = int(packed.loss_mask[lo:hi].sum())
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, cfg)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        by_lang: dict[str, float] = {}
        for m in range(lo, hi, cfg.micro_rows):
            rows = slice(m, min(hi, m + cfg.micro_rows))
            loss, parts = _step_loss(model, packed, rows, dev, autocast, tmodel)
            (loss / n_tok).backward()
            total += float(loss.detach())
            for k, v in parts.items():
                by_lang[k] = by_lang.get(k, 0.0) + v
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        step_tok = {
            k: int((packed.loss_mask[lo:hi] & (packed.loss_lang[lo:hi] == k)).sum()) for k in seen
        }
        for k in seen:
            seen[k] += step_tok[k]
        if step % cfg.log_every == 0 or step == steps - 1:
            curve.append(
                {
                    "step": step + 1,
                    "lr": lr_at(step, steps, cfg),
                    "loss": total / n_tok,
                    **{
                        f"{what}_{k}": by_lang[f"{what}_{k}"] / step_tok[k] if step_tok[k] else None
                        for what in ("loss", "match")
                        for k in ("ja", "en")
                    },
                    "tokens_seen": seen["ja"] + seen["en"],
                }
            )
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.monotonic() - t_train
    weights = save(model, drafter, out, cfg.save_dtype)
    teacher_used = None if tmodel is None else str(teacher)
    del model, opt, tmodel
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return {
        "tokens_seen": {**seen, "total": seen["ja"] + seen["en"]},
        "rows": n_rows,
        "steps": steps,
        "tokens_per_step": cfg.rows_per_step * cfg.seq_len,
        "loss_curve": curve,
        "config": asdict(cfg),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "precision": "float32 weights, bfloat16 autocast" if autocast else "float32",
        "objective": cfg.objective,
        "teacher": teacher_used,
        "packing_check": check,
        "train_s": round(train_s, 2),
        "wall_s": round(time.monotonic() - t0, 2),
        "train_tokens_per_s": round((seen["ja"] + seen["en"]) / train_s, 1) if train_s else None,
        "weights": weights,
        "versions": {"torch": torch.__version__, "transformers": _transformers_version()},
    }


def shallow(model: Any, layers: int) -> None:
    """Keep ``model``'s embeddings, final norm, output matrix and first ``layers`` decoder
    layers (in place; its config says so). A shallow drafter's ability comes mostly from
    what it is then trained on, as an MTP head's or a small trained drafter's does: the
    positive control's way to plant a training-data deficit (reports/gpu/control)."""
    blocks = model.model.layers
    if not 0 < layers <= len(blocks):
        raise ValueError(f"--drafter-layers {layers}: the drafter has {len(blocks)} layers")
    model.model.layers = torch.nn.ModuleList(list(blocks)[:layers])
    depth = {k: getattr(model.config, k) for k in _DEPTH_KEYS if hasattr(model.config, k)}
    _set_depth(depth, layers)
    for key, value in depth.items():
        setattr(model.config, key, value)


_DEPTH_KEYS = ("num_hidden_layers", "layer_types", "max_window_layers")


def _set_depth(config: dict[str, Any], layers: int) -> None:
    """A Hugging Face config (as a dict) for ``layers`` decoder layers."""
    config["num_hidden_layers"] = layers
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:layers]
    if isinstance(config.get("max_window_layers"), int):
        config["max_window_layers"] = min(config["max_window_layers"], layers)


def shallow_reference(drafter: Path, layers: int, out: Path, dtype: str = "bfloat16") -> Path:
    """Save ``drafter`` cut to its first ``layers`` decoder layers, untrained, at ``out``
    (once; an existing copy is kept): what a shallow drafter knows before distillation,
    measured beside the trained ones by the check. The directory."""
    if (out / WEIGHTS).exists():
        return out
    model = AutoModelForCausalLM.from_pretrained(str(drafter), dtype=torch.float32)
    shallow(model, layers)
    save(model, drafter, out, dtype)
    del model
    gc.collect()
    return out


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def save(model: Any, drafter: Path, out: Path, dtype: str) -> dict[str, Any]:
    """Save ``model`` as an HF directory at ``out`` (the original's tokenizer, generation
    and config files copied, the config's dtype set); the weights file's name, size and
    SHA-256."""
    tmp = out.with_name(out.name + ".saving")
    shutil.rmtree(tmp, ignore_errors=True)
    model.to(getattr(torch, dtype)).save_pretrained(str(tmp))
    for name in COPIED:
        if (drafter / name).exists():
            shutil.copy2(drafter / name, tmp / name)
    # the original's config with the new dtype: the shape vLLM already loads, whichever
    # transformers release wrote the weights (tensor names are the same)
    config = json.loads((drafter / "config.json").read_text(encoding="utf-8"))
    config.update({k: dtype for k in ("dtype", "torch_dtype") if k in config} or {"dtype": dtype})
    if model.config.num_hidden_layers != config.get("num_hidden_layers"):  # a shallow drafter
        _set_depth(config, model.config.num_hidden_layers)
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    files = sorted(tmp.glob("*.safetensors"))
    if [f.name for f in files] != [WEIGHTS]:
        raise RuntimeError(f"expected one {WEIGHTS}, found {[f.name for f in files]}")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    path = out / WEIGHTS
    return {"file": WEIGHTS, "bytes": path.stat().st_size, "sha256": sha256(path), "dtype": dtype}
