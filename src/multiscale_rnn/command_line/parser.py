"""The command line's parser: ``train`` with its flags by group, ``evaluate`` and ``sample`` of a checkpoint,
``presets``, ``reproduce``; one-line errors."""

from __future__ import annotations

import argparse
from typing import List, Optional

from .. import presets as _presets
from .._checks import closest
from ..plot.figures import kinds as figure_kinds
from .commands import cmd_evaluate, cmd_plot, cmd_presets, cmd_reproduce, cmd_sample
from .settings import parse_value, sizes
from .train import cmd_train

__all__ = ["Parser", "bind_dash_values", "build_parser", "refuse_unknown"]


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``multiscale-rnn train: error: argument --hidden-sizes: ...`` and where
    to find the flags, instead of the whole usage text (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _command_parser(parser: argparse.ArgumentParser, argv: List[str]) -> Optional[argparse.ArgumentParser]:
    """The parser of the command ``argv`` names first (``train``, ``sample``, ...), or None."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers[0].choices.get(argv[0]) if subparsers and argv else None


def refuse_unknown(parser: argparse.ArgumentParser, argv: List[str], extras: List[str]) -> None:
    """Exit with one error line for the arguments no flag took (``extras`` of ``parse_known_args``), from the
    command's own parser so that it names the command, with the nearest flag of that command for a
    mistyped one (``--prime``: did you mean ``--prompt``?), and, for a positional argument given as a flag
    (``--checkpoint``), that it goes without the flag."""
    target = _command_parser(parser, argv) or parser
    flags = [o for o in target._option_string_actions if o.startswith("--")]
    positional = {a.dest: str(a.metavar or a.dest) for a in target._actions if not a.option_strings}
    hints = []
    for a in extras:
        name = a.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        word = positional.get(name[2:].replace("-", "_"))
        if word:
            hints.append(f"{name}: the {word} is given without a flag, as in {target.prog} {word.upper()}")
        elif near := closest(name, flags):
            hints.append(f"{name}: did you mean {near}?")
    target.error(f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else ""))


def bind_dash_values(parser: argparse.ArgumentParser, argv: List[str]) -> List[str]:
    """``--hidden-sizes -32,32`` -> ``--hidden-sizes=-32,32``: a value that starts with ``-`` and is no
    flag goes to the flag before it, so the flag's own check names the value (argparse would take it for
    a flag and answer "expected one argument")."""
    sub = _command_parser(parser, argv)
    if sub is None:
        return argv
    flags = set(sub._option_string_actions)
    takes_value = {
        o
        for o, a in sub._option_string_actions.items()
        if a.nargs is None
        and a.option_strings
        and not isinstance(
            a, (argparse._StoreConstAction, argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction)
        )
    }
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.extend(argv[i:])
            break
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if (
            a in takes_value
            and nxt is not None
            and nxt.startswith("-")
            and nxt != "--"
            and nxt.split("=", 1)[0] not in flags
        ):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``multiscale-rnn``: its commands, each with its flags and the function it runs (``func``)."""
    p = Parser(prog="multiscale-rnn", description="Train, evaluate and sample multiscale recurrent language models.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{train,evaluate,sample,plot,presets,reproduce}")
    S = argparse.SUPPRESS  # flags not given stay out of the namespace, so presets and configs show through

    t = sub.add_parser("train", help="train a model, write a checkpoint and its history", argument_default=S)
    t.add_argument("--config", help="TOML file of settings (flags override it)")
    t.add_argument("--preset", help=f"named settings (default {_presets.DEFAULT_PRESET}; see 'presets')")
    _model_and_data_flags(t)
    g = t.add_argument_group("training")
    _optimisation_flags(g)
    _run_flags(g)
    t.set_defaults(func=cmd_train)
    _checkpoint_commands(sub)
    _plot_command(sub)
    pr = sub.add_parser("presets", help="list the named presets; NAME: print one as a TOML config")
    pr.add_argument(
        "name", nargs="?", metavar="NAME", help="print this preset as a TOML config (save it, edit it, train --config)"
    )
    pr.set_defaults(func=cmd_presets)
    _reproduce_command(sub)
    return p


def _plot_command(sub) -> None:
    """``plot``: a figure of a checkpoint's model reading a text (``multiscale_rnn.plot.figure``)."""
    c = sub.add_parser("plot", help="draw a checkpoint's figure of a text (boundaries, heatmap, profile) to PNG or SVG")
    c.add_argument("checkpoint", help="a .npz checkpoint")
    every = "; ".join(f"{k} ({', '.join(v)})" for k, v in figure_kinds().items())
    c.add_argument(
        "--kind",
        required=True,
        help=f"the figure, one the model's family draws: {every}; of a pen-stroke HM-LSTM: figure5, computation; "
        "of any run: training (its curves, from the CSV and history beside the checkpoint; no --text)",
    )
    c.add_argument("--text", help="the text the model reads (text models)")
    c.add_argument("--text-file", metavar="PATH", help="a UTF-8 text file the model reads, in place of --text")
    c.add_argument("--index", type=int, default=0, help="pen-stroke models: the drawing of --split to draw")
    c.add_argument("--split", choices=["train", "valid", "test"], default="valid", help="pen-stroke models")
    c.add_argument("--out", help="the file, .png or .svg (default: beside the checkpoint, NAME-KIND.png)")
    c.add_argument("--best", action="store_true", help="use the best parameters (lowest validation loss)")
    c.add_argument("--threads", type=int)
    c.add_argument(
        "--allow-unknown",
        action="store_true",
        help="read text symbols the vocabulary lacks as its unknown symbol (default: refuse them)",
    )
    c.add_argument("--data", help="corpus whose vocabulary to use when the checkpoint stores none")
    c.add_argument("--data-path", help="local copy of the corpus; alone, beside a built-in corpus: your own text")
    c.add_argument("--data-option", action="append", metavar="NAME=VALUE", help="corpus option (repeatable)")
    c.set_defaults(func=cmd_plot)


def _reproduce_command(sub) -> None:
    """``reproduce``: rerun a paper's table or figure (``multiscale_rnn.reproduce``), or list them."""
    r = sub.add_parser("reproduce", help="rerun a paper's table or figure and write its report (--list: which)")
    r.add_argument("name", nargs="?", help="the reproduction (see --list)")
    r.add_argument("--list", action="store_true", help="list the reproductions, their budgets and scales")
    r.add_argument("--budget", type=float, metavar="MINUTES", help="time for the whole run (default: its own)")
    r.add_argument("--out", help="folder of checkpoints, results and REPORT.md (default runs/reproduce/NAME)")
    r.add_argument("--data-path", help="folder of the data the reproduction needs (see --list)")
    r.add_argument("--threads", type=int)
    r.add_argument("--max-units", type=int, metavar="N", help="stop this call after N newly finished models")
    r.add_argument("--report", action="store_true", help="print the report of --out without training")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.set_defaults(func=cmd_reproduce)


def _model_and_data_flags(t) -> None:
    """``train``'s flags of the model and of the data."""
    g = t.add_argument_group("model")
    g.add_argument("--model", help="lstm, gru, rnn, or any registered family")
    g.add_argument("--embed-size", type=int)
    g.add_argument("--hidden-sizes", type=sizes, help="comma-separated, one per layer, e.g. 512,512")
    g.add_argument("--dropout", type=float)
    g.add_argument("--dtype", choices=["float32", "float64"])
    g.add_argument(
        "--init-std",
        type=parse_value,
        metavar="STD",
        help="draw every parameter from N(0, STD^2) (the HORNN paper's 0.1; default: the model's own initialisation)",
    )
    g.add_argument("--option", action="append", metavar="NAME=VALUE", help="model option (repeatable)")
    g = t.add_argument_group("data")
    g.add_argument(
        "--data",
        help="embedded, synthetic, ptb-char, ptb-word, text8, enwik8, shakespeare, ... or "
        "the path of your own text file (or folder)",
    )
    g.add_argument(
        "--data-path",
        help="local copy of the corpus (no download); alone: your own text file, or a "
        "folder of train.txt, valid.txt, test.txt",
    )
    g.add_argument(
        "--data-option",
        action="append",
        metavar="NAME=VALUE",
        help="corpus option (repeatable), e.g. unit=word or level=byte for your own text",
    )


def _optimisation_flags(g) -> None:
    """``train``'s flags of the optimisation: epochs, batch, optimiser, clipping, guard, schedules."""
    g.add_argument("--epochs", type=int)
    g.add_argument("--batch-size", type=int)
    g.add_argument("--bptt", type=int)
    g.add_argument("--optimizer", choices=["adam", "sgd"])
    g.add_argument("--lr", type=float)
    g.add_argument("--momentum", type=float)
    g.add_argument("--weight-decay", type=float)
    g.add_argument("--clip-norm", type=parse_value, help="max global gradient norm ('none' to switch off)")
    g.add_argument("--clip-value", type=parse_value, help="clamp gradient elements ('none' to switch off)")
    g.add_argument(
        "--column-norm",
        type=parse_value,
        metavar="MAX_NORM",
        help="after every update, scale each weight column whose norm exceeds this down to it (off by default)",
    )
    g.add_argument(
        "--divergence",
        type=parse_value,
        metavar="BITS",
        help="stop when validation bits per token exceed the best by more than this, keeping the best "
        "parameters (e.g. 0.1; off by default)",
    )
    g.add_argument(
        "--early-stopping",
        type=parse_value,
        metavar="PATIENCE",
        help="stop once the validation loss has not improved for this many epochs, and keep the best "
        "epoch's parameters (off by default; --patience is the plateau schedule's)",
    )
    g.add_argument(
        "--min-delta",
        type=float,
        metavar="NATS",
        help="early stopping: how much lower the validation loss must be to count as better (default 0)",
    )
    g.add_argument("--lr-schedule", choices=["constant", "halve", "plateau", "newbob", "multistep"])
    g.add_argument(
        "--lr-factor", type=float, help="divide the learning rate by this (halve, plateau, newbob, multistep)"
    )
    g.add_argument("--patience", type=int, help="plateau: epochs without improvement before dividing")
    g.add_argument("--halve-after", type=int, help="halve: epochs at the initial learning rate")
    g.add_argument("--lr-milestones", type=sizes, help="multistep: comma-separated epoch counts, e.g. 180")
    g.add_argument("--lr-every", choices=["epoch", "step"], help="halve / multistep count epochs (default) or updates")
    g.add_argument(
        "--anneal",
        action="append",
        metavar="NAME=START,END,RATE[,step]",
        help="anneal a model option linearly per epoch (repeatable), e.g. slope=1,5,0.04; with ',step' "
        "the rate is per update",
    )


def _run_flags(g) -> None:
    """``train``'s flags of the run: stopping, checkpoints, resuming, distribution, seeds, threads, output."""
    g.add_argument("--max-chunks", type=int, help="stop after this many chunks (resume later)")
    g.add_argument("--checkpoint-every", type=int, help="also checkpoint every K chunks")
    g.add_argument("--eval-batch-size", type=int)
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in --out with its settings "
        "(flags may change the epochs, clipping, evaluation and checkpointing)",
    )
    g.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over MPI: start with 'mpirun -n K'; the batch's streams are shared by the "
        'K ranks (needs mpi4py: pip install "multiscale-rnn[mpi]")',
    )
    g.add_argument("--seed", type=int)
    g.add_argument(
        "--restarts",
        type=int,
        help="train this many runs (seeds --seed, --seed + 1, ...) and keep the "
        "one with the lowest validation loss (default 1)",
    )
    g.add_argument(
        "--select-after",
        type=parse_value,
        help="with --restarts: compare the runs after this many "
        "epochs and train only the kept one on to --epochs; 'none': at the end; 'auto' (default): where "
        "the model says (an HM-LSTM of 3 or more layers: before its last boundary detector starts; "
        "others at the end)",
    )
    g.add_argument(
        "--select",
        choices=["loss", "agreement"],
        help="with --restarts: keep the run of lowest validation loss (loss, the default) or the one whose "
        "boundaries the other runs agree with most (agreement; models that mark boundaries: the HM-LSTM)",
    )
    g.add_argument("--threads", type=int)
    g.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also write TensorBoard event files of the run's figures to DIR (needs "
        "pip install \"multiscale-rnn[tensorboard]\"; 'none' for none)",
    )
    g.add_argument(
        "--out",
        help="checkpoint path (.npz); the history (.history.json) and the CSV of every step (.csv) go beside "
        "it; default from the preset (and the corpus when it is not the preset's)",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the checkpoint at --out even when it holds another model or data",
    )
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _checkpoint_commands(sub) -> None:
    """``evaluate`` and ``sample``: the commands that read a checkpoint, with their flags."""
    for name, helptext, func in (
        ("evaluate", "loss and bits per token of a checkpoint on a split", cmd_evaluate),
        ("sample", "generate text from a checkpoint", cmd_sample),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("checkpoint", help="a .npz checkpoint written by train")
        c.add_argument("--best", action="store_true", help="use the best parameters (lowest validation loss)")
        c.add_argument("--threads", type=int)
        c.add_argument(
            "--precision",
            choices=["float32", "bfloat16", "bfloat16-emulated"],
            default="float32",
            help="arithmetic of the LSTM layers' products (bfloat16: AMX tiles, else AVX512-BF16, float32 "
            "accumulation; float32 LSTM models only)",
        )
        c.set_defaults(func=func)
        c.add_argument(
            "--data",
            help="corpus, or the path of your own text (default: the one the model was "
            "trained on, as the checkpoint records it)"
            if name == "evaluate"
            else "corpus whose vocabulary to use when the checkpoint stores none (the one the model was trained on)",
        )
        c.add_argument("--data-path", help="local copy of the corpus; alone, beside a built-in corpus: your own text")
        c.add_argument("--data-option", action="append", metavar="NAME=VALUE", help="corpus option (repeatable)")
        if name == "evaluate":
            c.add_argument(
                "--split",
                choices=["train", "valid", "test", "all"],
                default="test",
                help="the split to score; all: train, valid and test in turn as one text (your own file: all of it)",
            )
            c.add_argument("--batch-size", type=int)
            c.add_argument("--bptt", type=int)
            c.add_argument("--json", action="store_true", help="print one JSON line")
        else:
            c.add_argument("--prompt", default="")
            c.add_argument("--length", type=int, default=200, help="symbols (pen offsets for a stroke model)")
            c.add_argument("--temperature", type=float, default=1.0)
            c.add_argument("--top-k", type=int, help="draw only from the K most likely symbols at each step")
            c.add_argument(
                "--top-p",
                type=float,
                help="draw only from the smallest set of most likely symbols whose probability reaches P (0 < P <= 1)",
            )
            c.add_argument(
                "--num-samples", type=int, default=1, help="samples of the prompt, seeded --seed, --seed + 1, ..."
            )
            c.add_argument("--seed", type=int, default=0)
            c.add_argument(
                "--bias",
                type=float,
                default=0.0,
                help="pen-stroke models: Graves' sampling bias b >= 0 (narrower Gaussians, likelier components)",
            )
            c.add_argument("--out", help="pen-stroke models: the drawing (.png or .svg; default beside the checkpoint)")
            c.add_argument(
                "--allow-unknown",
                action="store_true",
                help="read prompt symbols the vocabulary lacks as its unknown symbol (default: refuse them)",
            )
