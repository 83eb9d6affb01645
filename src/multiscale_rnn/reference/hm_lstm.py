"""The HM-LSTM (Chung, Ahn & Bengio 2017, eq. 1-12) written directly in PyTorch autograd: every gate of
every column computed, the operation chosen by the boundary weights (the masked computation of
public HM-LSTM code), with the package's straight-through rule and parameter and state names.

Used by the parity tests in float64 (``loss_and_grad``, the common interface of
``multiscale_rnn.reference``) and by ``bench/bench_hm_lstm.py`` as the
masked model written the natural way (``forward`` in float32).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, tensors, torch_grads, torch_inputs, torch_objective
from . import torch as _torch

#: The options under which ``model.loss_and_grad`` is the exact derivative of the model's objective,
#: for finite-difference checks: soft boundaries. The straight-through rule of "step" and "sample"
#: boundaries is by design not the derivative of the hard boundary (``loss_and_grad`` here follows it).
EXACT_GRADIENT_OPTIONS = {"boundary": "soft"}


def _per_layer(value, L: int) -> list:
    """A per-layer option: one value (a string) for every layer, or a list padded with its last entry to L."""
    return [value] * L if isinstance(value, str) else list(value) + [value[-1]] * (L - len(value))


def _preactivations(P: dict, config: dict, l: int, h: list, zp, hb, zb, below_only: bool):
    """s^l_t (B, 4 H_l [+ 1]) of eq. 4-7: r U^l_l h^l_{t-1} + z^{l-1}_t W^l_{l-1} h^{l-1}_t + b^l, plus the top-down
    z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} below the top (top_down on); r = 1 - z^l_{t-1} with flush_cut, else 1.
    ``h``: every layer's h_{t-1}; ``zp`` z^l_{t-1}; ``hb``, ``zb``: h^{l-1}_t, z^{l-1}_t; ``below_only``: the
    boundary row reads only the layer below (its recurrent and top-down weights held at 0)."""
    torch = _torch()
    n, L, dt = h[l].shape[1], len(h), h[l].dtype
    r = 1 - zp if config["flush_cut"] else 1.0
    Uh, Utd = P[f"weight_hh_l{l}"], P.get(f"weight_td_l{l}")
    if below_only and Uh.shape[0] > 4 * n:  # the boundary row reads only the layer below
        keep = torch.ones(Uh.shape[0], 1, dtype=dt)
        keep[4 * n] = 0.0
        Uh, Utd = Uh * keep, (Utd * keep if Utd is not None else None)
    s = (r * h[l]) @ Uh.T + (zb * hb) @ P[f"weight_ih_l{l}"].T + P[f"bias_l{l}"]
    if l + 1 < L and config["top_down"]:
        assert Utd is not None  # every layer below the top has its top-down weights
        s = s + (zp * h[l + 1]) @ Utd.T
    return s


def _gates(P: dict, config: dict, l: int, n: int, s):
    """The gates i, f, g, o (B, n) each of layer l from s^l_t: a = s's gate rows, each block layer-normalised when
    layer_norm is on; i, f, o = sigm(a_i, a_f, a_o), g = tanh(a_g)."""
    torch = _torch()
    gates = s[:, : 4 * n]
    if config["layer_norm"]:
        gates = torch.cat(
            [
                torch.nn.functional.layer_norm(
                    gates[:, q * n : (q + 1) * n],
                    (n,),
                    P[f"ln_weight_l{l}"][q * n : (q + 1) * n],
                    P[f"ln_bias_l{l}"][q * n : (q + 1) * n],
                    eps=1e-5,
                )
                for q in range(4)
            ],
            dim=1,
        )
    i, f = torch.sigmoid(gates[:, :n]), torch.sigmoid(gates[:, n : 2 * n])
    g, o = torch.tanh(gates[:, 2 * n : 3 * n]), torch.sigmoid(gates[:, 3 * n :])
    return i, f, g, o


def _boundary(config: dict, l: int, t: int, zhat, drawn: Optional[dict]):
    """z^l_t from zhat^l_t (eq. 9) with the package's straight-through rule: "step" rounds zhat at 1/2, "sample"
    replays the core's draw ``drawn["znew_l{l}"][:, t]``, both with zhat's gradient; "soft" is zhat itself."""
    torch = _torch()
    dt = zhat.dtype
    if config["boundary"] == "step":
        return zhat + ((zhat > 0.5).to(dt) - zhat).detach()
    if config["boundary"] == "sample":
        assert drawn is not None, "sampled boundaries are replayed from the core's draws"
        d = torch.as_tensor(np.asarray(drawn[f"znew_l{l}"])[:, t, None], dtype=dt)
        return zhat + (d - zhat).detach()
    return zhat


def _rate_terms(config: dict, terms: dict, zsums: list, L: int, BT: int, dt) -> None:
    """Into ``terms``: "boundary_rate", lambda / (B T) sum of z^l_t, and "boundary_target", mu sum_l e_l^2
    over the detector layers with a target (``forward``'s ``terms``), e_l = d - clamp(d, -s_-, s_+) with
    d = zbar^l - r_l (``rate_slack_below`` = s_-, ``rate_slack_above`` = s_+). ``zsums``: sum of z^l_t per layer."""
    torch = _torch()
    terms["boundary_rate"] = config.get("rate_penalty", 0.0) * sum(zsums) / BT
    targets = config.get("rate_target") or []

    def slack(name: str, l: int) -> float:  # a number for every layer, or one per detector layer (the last repeated)
        v = config.get(name, 0.0)
        return float(v[min(l, len(v) - 1)]) if isinstance(v, (list, tuple)) else float(v)

    def excess(d, l: int):
        return d - torch.clamp(d, -slack("rate_slack_below", l), slack("rate_slack_above", l))

    terms["boundary_target"] = sum(
        (
            config.get("rate_weight", 0.0) * excess(zsums[l] / BT - r, l) ** 2
            for l, r in enumerate(targets)
            if l < L and (l + 1 < L or config["top_boundary"])
        ),
        torch.zeros((), dtype=dt),
    )


def forward(
    P: dict, config: dict, tok, state: Optional[dict] = None, drawn: Optional[dict] = None, terms: Optional[dict] = None
):
    """Logits (B, T, V) and the state after the last step.

    ``P``: parameter tensors by the model's names; ``config``: the model's config (``model.config``);
    ``tok``: (B, T) token ids (LongTensor); ``state``: dict name -> (B, size) tensors (zeros if None);
    ``drawn``: for ``boundary="sample"``, dict ``znew_l{l}`` -> (B, T) boundary draws to replay.
    ``terms``: a dict that receives ``"boundary_rate"``, the tensor lambda / (B T) * sum of z^l_t over the
    detector layers (``rate_penalty`` = lambda; 0 when off), and ``"boundary_target"``, the tensor
    mu * sum_l e_l^2 over the detector layers with a target (e_l = zbar^l - r_l outside the band of
    ``rate_slack_below`` / ``rate_slack_above``, zbar^l the mean of z^l_t over the chunk; ``rate_weight`` = mu,
    ``rate_target`` = [r_1, ...]). With ``terms["padding"]`` (B, T) 0/1, the
    sums and means are over the columns it marks 1 (separate padded sequences).
    """
    torch = _torch()
    H = config["hidden_sizes"]
    L = len(H)
    a = config["slope"]
    switch = [g == "switch" for g in _per_layer(config["gradient"], L)]  # per z^l: no gradient through eq. 2-3
    reads = _per_layer(config.get("detector_input", "all"), L)
    x = P["embedding.weight"][tok]  # (B, T, E)
    Bn, Tn = tok.shape
    dt = x.dtype
    if state is None:
        state = {}
    zeros = lambda n: torch.zeros(Bn, n, dtype=dt)  # noqa: E731
    h = [state.get(f"h_l{l}", zeros(H[l])) for l in range(L)]
    c = [state.get(f"c_l{l}", zeros(H[l])) for l in range(L)]
    z = [state.get(f"z_l{l}", zeros(1)) for l in range(L)]  # (B, 1)
    ys = []
    zsums = [torch.zeros((), dtype=dt) for _ in range(L)]  # sum of z^l per layer (rate terms)
    pad = None if terms is None or terms.get("padding") is None else torch.as_tensor(terms["padding"], dtype=dt)
    for t in range(Tn):
        hb, zb = x[:, t], torch.ones(Bn, 1, dtype=dt)
        for l in range(L):
            n, zp = H[l], z[l]
            s = _preactivations(P, config, l, h, zp, hb, zb, reads[l] == "below")
            i, f, g, o = _gates(P, config, l, n, s)
            zpw = zp.detach() if switch[l] else zp
            zbw = zb.detach() if l > 0 and switch[l - 1] else zb
            wU, wC = (1 - zpw) * zbw, (1 - zpw) * (1 - zbw)  # UPDATE, COPY (FLUSH = zp)
            c_new = (1 - wC) * i * g + wU * f * c[l] + wC * c[l]
            h_new = (1 - wC) * o * torch.tanh(c_new) + wC * h[l]
            if s.shape[1] > 4 * n:
                zn = _boundary(config, l, t, torch.clamp((a * s[:, 4 * n :] + 1) / 2, 0, 1), drawn)
                z_new = zn if config["copy_z"] == "recompute" else (1 - wC) * zn + wC * zp
                zsums[l] = zsums[l] + (z_new.sum() if pad is None else (z_new[:, 0] * pad[:, t]).sum())
            else:
                z_new = torch.zeros(Bn, 1, dtype=dt)
            h[l], c[l], z[l] = h_new, c_new, z_new
            hb, zb = h_new, z_new
        ys.append(torch.cat(h, dim=1))
    Y = torch.stack(ys, dim=1)  # (B, T, sum H)
    if config["head"] == "gated":  # eq. 11-12
        gate = torch.sigmoid(Y @ P["output.gate.weight"].T)  # (B, T, L)
        parts = torch.split(Y, list(H), dim=2)
        Yg = torch.cat([parts[l] * gate[..., l : l + 1] for l in range(L)], dim=2)
        Y = torch.relu(Yg @ P["output.embed.weight"].T)
    logits = Y @ P["decoder.weight"].T + P["decoder.bias"]
    new_state = {f"{w}_l{l}": v[l] for l in range(L) for w, v in (("h", h), ("c", c), ("z", z))}
    if terms is not None:
        _rate_terms(config, terms, zsums, L, Bn * Tn if pad is None else pad.sum(), dt)
    return logits, new_state


def loss_and_grad(
    model, inputs, targets, state: Optional[dict] = None, mask=None, *, padding=None, records: Optional[dict] = None
):
    """The reference of ``model.loss_and_grad`` (the common interface of ``multiscale_rnn.reference``):
    the mean cross-entropy as a ``Loss`` whose ``aux`` holds ``boundary_rate`` (when ``rate_penalty`` >
    0) and ``boundary_target`` (when a layer with a detector has a ``rate_target``), the gradients of
    ``loss.total`` by the model's names and the new state (NumPy), in float64 from ``model``'s
    parameters. ``records``: the model's records of the same chunk (``model.records()``), needed for
    sampled boundaries (the draws to replay)."""
    torch = _torch()
    check_covered(model, heads=("linear", "gated"))
    config = model.config
    P = tensors(model, np.float64)
    Pin, tok = torch_inputs(P, inputs)
    B, T = tok.shape
    drawn = None
    if config["boundary"] == "sample":
        if records is None:
            raise ValueError("boundary='sample': pass records=model.records() of the same chunk (the draws to replay)")
        drawn = {k: np.asarray(v)[0].reshape(T, B).T for k, v in records.items() if k.startswith("znew_")}
    st = {k: torch.tensor(np.asarray(v, dtype=np.float64)) for k, v in (state or {}).items()}
    terms: Dict[str, Any] = {"padding": padding}
    logits, new = forward(Pin, config, tok, st, drawn, terms)
    xent = torch_objective(logits, targets, mask)
    L = len(config["hidden_sizes"])
    detectors = [l for l in range(L) if l + 1 < L or config["top_boundary"]]
    active = {
        "boundary_rate": config.get("rate_penalty", 0.0) > 0 and bool(detectors),
        "boundary_target": any(l in detectors for l in range(len(config.get("rate_target") or []))),
    }
    aux = {k: terms[k] for k, on in active.items() if on}
    (xent + sum(aux.values())).backward()
    new_state = {k: v.detach().numpy() for k, v in new.items()}
    return Loss(float(xent.detach()), {k: float(v.detach()) for k, v in aux.items()}), torch_grads(P), new_state
