"""Named training settings for ``multiscale-rnn train --preset NAME`` (and ``resolve_settings``).

A preset is a dict of settings with the same keys as a TOML config file (see ``docs/cli.md``);
the order of precedence is: built-in defaults < preset < ``--config`` file < command-line flags.
Add a paper's experiment here as one entry, with the source of its numbers in ``"about"``.
"""

from __future__ import annotations

from typing import Any, Dict

__all__ = ["DEFAULTS", "PRESETS", "get_preset", "DEFAULT_PRESET"]

#: Every setting the command line knows, with its default.
DEFAULTS: Dict[str, Any] = {
    # model
    "model": "lstm",
    "embed_size": 64,
    "hidden_sizes": [256],
    "dropout": 0.0,
    "dtype": "float32",
    "options": {},  # model-specific constructor options, e.g. {"layer_norm": true}
    # data
    "data": "embedded",
    "data_path": None,
    "data_options": {},  # e.g. for "synthetic": {"n_chars": 200000, "seed": 0}
    # training
    "epochs": 1,
    "batch_size": 32,
    "bptt": 100,
    "optimizer": "adam",  # adam | sgd
    "lr": 2e-3,
    "momentum": 0.0,  # sgd only
    "weight_decay": 0.0,
    "clip_norm": 1.0,  # null / "none" to switch off
    "clip_value": None,
    "divergence": None,  # bits per token above the best valid figure that stop a diverged run (e.g. 0.1); null: off
    "lr_schedule": "constant",  # constant | halve | plateau
    "lr_factor": 2.0,  # halve / plateau: divide by this
    "patience": 0,  # plateau
    "halve_after": 4,  # halve: epochs at the initial rate
    "lr_milestones": [],  # multistep: completed-epoch counts after which lr is divided by lr_factor
    "lr_every": "epoch",  # halve / multistep count epochs, or "step": optimiser updates
    "anneal": {},  # option -> [start, end, per_epoch] (or [start, end, per_step, "step"])
    "max_chunks": None,
    "checkpoint_every": None,
    "eval_batch_size": 16,
    "restarts": 1,  # > 1: train this many runs (seeds seed, seed+1, ...), keep the lowest valid loss
    "select_after": "auto",  # restarts > 1: compare the runs after this many epochs ("auto": where the model
    # says, e.g. before an HM-LSTM's last detector starts; none: at the end)
    "seed": 0,
    "threads": None,
    "out": "runs/model.npz",
    "progress": True,
}

PRESETS: Dict[str, Dict[str, Any]] = {
    "quick": {
        "about": "A one-minute demonstration on 2 cores: a 1-layer LSTM of 256 units, two epochs of the "
        "shipped text (The Devil's Dictionary, 345k training characters).",
        "model": "lstm",
        "embed_size": 64,
        "hidden_sizes": [256],
        "data": "embedded",
        "epochs": 2,
        "batch_size": 16,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 4e-3,
        "clip_norm": 1.0,
        "out": "runs/quick.npz",
    },
    "synthetic": {
        "about": "A small LSTM on the generated hierarchical text (characters -> words -> phrases).",
        "model": "lstm",
        "embed_size": 32,
        "hidden_sizes": [128],
        "data": "synthetic",
        "data_options": {"n_chars": 200_000, "seed": 0},
        "epochs": 2,
        "batch_size": 32,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 3e-3,
        "clip_norm": 1.0,
        "out": "runs/synthetic.npz",
    },
    "ptb-char-lstm": {
        "about": "A standard LSTM baseline on Penn Treebank characters (needs --data-path): 1 layer of 1000 "
        "units, Adam 2e-3, batch 128, 100 steps, gradient norm clipped to 1, learning rate halved "
        "when validation stops improving.",
        "model": "lstm",
        "embed_size": 128,
        "hidden_sizes": [1000],
        "data": "ptb-char",
        "epochs": 20,
        "batch_size": 128,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 2.0,
        "patience": 0,
        "out": "runs/ptb-char-lstm.npz",
    },
    "ptb-char-hm-lstm": {
        "about": "The paper's Penn Treebank setting (Chung, Ahn & Bengio 2017, Section 4.1; needs --data-path): "
        "a LayerNorm HM-LSTM of 3 layers of 512 units, embedding 128, gated output module with an "
        "output embedding of 512, step boundaries with slope annealing a = min(5, 1 + 0.04 epoch), "
        "Adam 2e-3, batch 64, 100 steps, gradient norm clipped to 1, learning rate divided by 50 "
        "when validation stops improving. The paper gives no epoch count; 100 epochs is where the "
        "slope reaches 5.",
        "model": "hmlstm",
        "embed_size": 128,
        "hidden_sizes": [512, 512, 512],
        "data": "ptb-char",
        "options": {
            "boundary": "step",
            "layer_norm": True,
            "head": "gated",
            "head_size": 512,
            "gradient": "switch",
            "flush_cut": False,
            "detector_input": "all",
            "rate_target": None,
            "warmup": 0,
        },
        "anneal": {"slope": [1.0, 5.0, 0.04]},
        "epochs": 100,
        "batch_size": 64,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 50.0,
        "patience": 0,
        "out": "runs/ptb-char-hm-lstm.npz",
    },
    **{
        f"{name}-hm-lstm-recipe": {
            "about": f"The package's HM-LSTM recipe on {what} (needs --data-path), as measured in "
            'docs/models/hm_lstm.md, "Real text with the default recipe": 3 layers of 128, embedding 64, '
            "layer norm, linear head, boundary warm-up, rate targets 0.18 on layer 1 and 0.06 on layer 2 "
            "(without the second, layer 2's boundaries drift), slope 1, Adam 2e-3, batch 64, 100 steps, "
            f"gradient norm clipped to 1, {budget}.",
            "model": "hmlstm",
            "embed_size": 64,
            "hidden_sizes": [128, 128, 128],
            "data": name,
            # the word recipe (hm_lstm.WORD_RECIPE) with a second target: a 3-layer model's own defaults are the
            # phrase recipe
            "options": {
                "layer_norm": True,
                "detector_input": "all",
                "gradient": "blend",
                "rate_target": [0.18, 0.06],
                "rate_weight": 5.0,
                "warmup": 500,
            },
            "epochs": epochs,
            "batch_size": 64,
            "bptt": 100,
            "optimizer": "adam",
            "lr": 2e-3,
            "clip_norm": 1.0,
            "out": f"runs/{name}-hm-lstm-recipe.npz",
        }
        for name, what, epochs, budget in (
            (
                "ptb-char",
                "Penn Treebank characters",
                13,
                "13 epochs (the measured budget, about 45 minutes on one core)",
            ),
            (
                "text8",
                "text8",
                5,
                "5 epochs (the measured budget on the prefix in shared/data, about 40 minutes on one "
                "core; 5 epochs of the full text8 take 8 times longer)",
            ),
        )
    },
    "synthetic-hm-lstm": {
        "about": "A small HM-LSTM on the generated hierarchical text with the default recipe (boundary "
        "warm-up, rate target, five restarts of which the lowest validation BPC is kept): its "
        "first-layer boundaries come to mark the ends of the words within a minute (see "
        'docs/models/hm_lstm.md, "The default recipe").',
        "model": "hmlstm",
        "embed_size": 16,
        "hidden_sizes": [32, 32],
        "data": "synthetic",
        "data_options": {"n_chars": 40_000, "seed": 0},
        "epochs": 40,
        "batch_size": 32,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 5e-3,
        "clip_norm": 1.0,
        "restarts": 5,
        "out": "runs/synthetic-hm-lstm.npz",
    },
    "synthetic-hm-lstm-phrases": {
        "about": "A 3-layer HM-LSTM on the generated hierarchical text with the default recipe, which from 3 "
        "layers is the phrase recipe: its first layer marks the words and its second layer the phrases "
        '(docs/models/hm_lstm.md, "The default recipe"): every boundary detector reads only the '
        "layer below, z^1 read as a blend and z^2 as a switch, rate targets 0.18 and 0.05 with weight "
        "20, layer 1's detector started after 500 updates and layer 2's after 1500, five runs compared "
        "just before layer 2's detector starts (after 65 epochs) and the one of lowest validation BPC "
        "trained on to 100 (one to two and a half minutes on 2 cores).",
        "model": "hmlstm",
        "embed_size": 16,
        "hidden_sizes": [32, 32, 32],
        "data": "synthetic",
        "data_options": {"n_chars": 40_000, "seed": 0, "valid_fraction": 0.1, "test_fraction": 0.0},  # the study's
        "epochs": 100,
        "batch_size": 32,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 5e-3,
        "clip_norm": 1.0,
        "restarts": 5,
        "out": "runs/synthetic-hm-lstm-phrases.npz",
    },
}


def _fs_lstm(data, fast, slow, k, dropout, zoneout_c, zoneout_h, embed, bptt, lr, epochs, schedule, about):
    """One column of the FS-RNN paper's Table 3: Adam, gradient norm clipped to 1, batch 128; the
    cells as the authors' code has them (docs/models/fs_rnn.md, "Readings"): layer-norm epsilon
    1e-3, a bias before each gate's layer norm, whole-matrix orthogonal initialisation."""
    return {
        "about": about,
        "model": "fsrnn",
        "embed_size": embed,
        "hidden_sizes": [fast, slow],
        "dropout": dropout,
        "options": {
            "fast_cells": k,
            "cell": "lstm",
            "layer_norm": True,
            "zoneout_c": zoneout_c,
            "zoneout_h": zoneout_h,
            "layer_norm_eps": 1e-3,
            "bias_before_norm": True,
            "orthogonal_init": "whole",
        },
        "data": data,
        "epochs": epochs,
        "batch_size": 128,
        "bptt": bptt,
        "optimizer": "adam",
        "lr": lr,
        "clip_norm": 1.0,
        **schedule,
    }


# Penn Treebank: lr / 10 for the last 20 of 200 epochs. enwik8: lr / 10 whenever the validation
# loss has not improved for two epochs in a row.
_PTB_RULE = {"lr_schedule": "multistep", "lr_milestones": [180], "lr_factor": 10.0}
_ENWIK8_RULE = {"lr_schedule": "plateau", "lr_factor": 10.0, "patience": 1}
_FS_SOURCE = "Mujika et al. 2017, Table 3 (needs --data-path). "

PRESETS.update(
    {
        "ptb-char-fs-lstm-2": _fs_lstm(
            "ptb-char",
            700,
            400,
            2,
            0.35,
            0.5,
            0.1,
            128,
            150,
            2e-3,
            200,
            _PTB_RULE,
            _FS_SOURCE + "FS-LSTM-2 on Penn Treebank characters: fast cells 700, slow cell 400, layer norm, "
            "zoneout 0.5 (cells) / 0.1 (hidden), dropout 0.35; 1.19 BPC in the paper.",
        ),
        "ptb-char-fs-lstm-4": _fs_lstm(
            "ptb-char",
            500,
            400,
            4,
            0.35,
            0.5,
            0.1,
            128,
            150,
            2e-3,
            200,
            _PTB_RULE,
            _FS_SOURCE + "FS-LSTM-4 on Penn Treebank characters: four fast cells of 500, slow cell 400; "
            "1.193 BPC in the paper.",
        ),
        "enwik8-fs-lstm-2": _fs_lstm(
            "enwik8",
            900,
            1500,
            2,
            0.2,
            0.3,
            0.05,
            256,
            150,
            1e-3,
            35,
            _ENWIK8_RULE,
            _FS_SOURCE + "FS-LSTM-2 on enwik8: fast cells 900, slow cell 1500, dropout 0.2, zoneout 0.3 / "
            "0.05; 1.290 BPC in the paper.",
        ),
        "enwik8-fs-lstm-4": _fs_lstm(
            "enwik8",
            730,
            1500,
            4,
            0.2,
            0.3,
            0.05,
            256,
            150,
            1e-3,
            35,
            _ENWIK8_RULE,
            _FS_SOURCE + "FS-LSTM-4 on enwik8: four fast cells of 730, slow cell 1500; 1.277 BPC in the paper.",
        ),
        "enwik8-large-fs-lstm-4": _fs_lstm(
            "enwik8",
            1200,
            1500,
            4,
            0.25,
            0.3,
            0.05,
            256,
            100,
            1e-3,
            50,
            _ENWIK8_RULE,
            _FS_SOURCE + "Large FS-LSTM-4 on enwik8: four fast cells of 1200, slow cell 1500, dropout 0.25, "
            "100 steps; 1.245 BPC in the paper.",
        ),
    }
)
for _name in (
    "ptb-char-fs-lstm-2",
    "ptb-char-fs-lstm-4",
    "enwik8-fs-lstm-2",
    "enwik8-fs-lstm-4",
    "enwik8-large-fs-lstm-4",
):
    PRESETS[_name]["out"] = f"runs/{_name}.npz"


def _hornn(pooling, corpus="ptb"):
    """Soltani & Jiang 2016, Section 4: a 3rd-order HORNN of sigmoid units on PTB words (400 units,
    Section 4.1) or text8 words (500 units, Section 4.2)."""
    ptb = corpus == "ptb"
    H = 400 if ptb else 500
    schedule = (
        "halved when the validation loss does not improve"
        if ptb
        else "5 epochs at the initial rate, then halved after every epoch"
    )
    table = (
        "Table 2 (order 3): plain 108, max 109, FOFE 101, gated 100 test perplexity"
        if ptb
        else "Table 4 (order 3): plain 172, max 163, FOFE 154, gated 144 test perplexity (text8, 44k words)"
    )
    return {
        "about": f"Soltani & Jiang 2016, Section {'4.1' if ptb else '4.2'} (needs --data-path): a 3rd-order {pooling} "
        f"HORNN, one layer of {H} sigmoid units, embedding {H}, SGD lr 0.05 with momentum 0.9 (the "
        f"paper's 0.5 without momentum, docs/training.md), {schedule}, batch 20, BPTT 30, gradients "
        "clipped to [-5, 5]. Full softmax: a preset cannot give the class head its class sizes (they come "
        "from the corpus's counts; train from Python with head='class', docs/models/hornn.md). Not "
        "included: the paper's N(0, 0.1^2) initialisation (call msr.init.gaussian), weight decay (value "
        f"not given) and column normalisation (Trainer(constraint=...)). {table}.",
        "model": "hornn",
        "embed_size": H,
        "hidden_sizes": [H],
        "data": f"{corpus}-word",
        "options": {
            "order": 3,
            "pooling": pooling,
            "activation": "sigmoid",
            **({"alpha": 0.6} if pooling == "fofe" else {}),
        },
        "epochs": 20 if ptb else 10,
        "batch_size": 20,
        "bptt": 30,
        "optimizer": "sgd",
        "lr": 0.05,
        "momentum": 0.9,
        "clip_norm": None,
        "clip_value": 5.0,
        "lr_factor": 2.0,
        **({"lr_schedule": "plateau", "patience": 0} if ptb else {"lr_schedule": "halve", "halve_after": 5}),
        "out": f"runs/{corpus}-word-hornn-{pooling}.npz",
    }


PRESETS.update(
    {f"{c}-word-hornn-{p}": _hornn(p, c) for c in ("ptb", "text8") for p in ("plain", "max", "fofe", "gated")}
)

DEFAULT_PRESET = "quick"


def get_preset(name: str) -> Dict[str, Any]:
    """A copy of the named preset (without its ``about`` text)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return {k: v for k, v in PRESETS[name].items() if k != "about"}


def _vc(model, data, hidden, target, about, data_options=None, epochs=10):
    """A setting of Jernite et al. 2017 (Section 5): one VC layer, embedding = hidden size, the symmetric l1
    penalty towards m_bar, sharpness 0.1 + 0.1 per epoch up to 1. The paper gives no optimiser, batch,
    penalty weight or epoch count: Adam 2e-3, batch 32, 100 steps, clip 1, weight 0.01, 10 epochs (where
    the sharpness reaches 1) are this package's choices."""
    return {
        "about": "Jernite et al. 2017, " + about,
        "model": model,
        "embed_size": hidden,
        "hidden_sizes": [hidden],
        "data": data,
        "data_options": data_options or {},
        "options": {"target": target, "penalty": "l1", "penalty_weight": 0.01},
        "anneal": {"sharpness": [0.1, 1.0, 0.1]},
        "epochs": epochs,
        "batch_size": 32,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 2.0,
        "patience": 0,
    }


PRESETS.update(
    {
        "ptb-char-vcrnn": _vc(
            "vcrnn",
            "ptb-char",
            1024,
            0.3,
            "Table 3 (needs --data-path): VCRNN-1024 on Penn Treebank characters; 1.46 bpc at RNN-d 760 "
            "in the paper (m_bar not given; 0.3 here).",
        ),
        "ptb-char-vcgru": _vc(
            "vcgru",
            "ptb-char",
            1024,
            0.3,
            "Table 3 (needs --data-path): VCGRU-1024 on Penn Treebank characters; 1.42 bpc at RNN-d 648 "
            "in the paper (m_bar not given; 0.3 here).",
        ),
        "ptb-bits-vcrnn": _vc(
            "vcrnn",
            "ptb-bits",
            1000,
            0.3,
            "Table 3 and Figure 2 (needs --data-path): VCRNN-1000 on Penn Treebank bits with 8 buffer "
            "bits after each character (0 and 24 in the paper's other panels: set data_options); "
            "0.215-0.231 bits per bit at RNN-d 340-460 without buffer in the paper.",
            data_options={"buffer_bits": 8},
        ),
        "nottingham-vcrnn": _vc(
            "vcrnn",
            "nottingham",
            500,
            0.3,
            "Table 1 (needs --data-path to the nottingham_abc folder): a VCRNN on folk tunes in ABC "
            "notation, one symbol per (pitch, length), standing in for the paper's Irish tunes "
            "(the paper: VCRNN-500 at RNN-d 233, test perplexity 8.51 on its own corpus).",
        ),
        **{
            f"text8-vcgru-{t}": _vc(
                "vcgru",
                "text8",
                1024,
                t,
                f"Table 3 (needs --data-path): VCGRU-1024 on text8 characters with m_bar = {t}; "
                + {0.3: "1.69 bpc at RNN-d 464", 0.4: "1.64 bpc at RNN-d 648", 0.5: "1.63 bpc at RNN-d 820"}[t]
                + " in the paper.",
            )
            for t in (0.3, 0.4, 0.5)
        },
    }
)
