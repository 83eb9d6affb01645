"""bfloat16 inference against float32 on Penn Treebank characters: LSTMs of one and two layers of 256 units
(embedding 64) trained for one pass over the first 1.5M training characters (Adam 2e-3, batch 32, BPTT 100,
seed 0, one thread), then the test BPC of the first 200,000 test characters in float32, with the emulated
bfloat16 path and with every bfloat16 kernel that runs here (AMX, AVX512-BF16) and the portable model of the
AVX512-BF16 kernel (on any CPU). The target: each within 0.01 BPC of float32.

    python bench/bf16_accuracy.py --data-path ../shared/data/ptb
"""

from __future__ import annotations

import argparse
import json

import multiscale_rnn as msr
from multiscale_rnn.testing import kernel_switches


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-path", required=True, help="the folder of ptb.char.{train,valid,test}.txt")
    ap.add_argument("--train-chars", type=int, default=1_500_000)
    ap.add_argument("--test-chars", type=int, default=200_000)
    args = ap.parse_args(argv)
    msr.set_num_threads(1)
    corpus = msr.data.load("ptb-char", path=args.data_path)
    test = corpus.test[: args.test_chars]
    print(f"ISA {msr.ISA}, bfloat16 kernel here: {msr.bf16_kernel()}")
    for layers in ((256,), (256, 256)):
        m = msr.LSTM(vocab_size=corpus.vocab_size, embed_size=64, hidden_sizes=layers, seed=0)
        trainer = msr.Trainer(m, optimizer=msr.optim.Adam(2e-3), clip_norm=1.0, batch_size=32, bptt=100, seed=0)
        trainer.fit(corpus.train[: args.train_chars], epochs=1)
        row = {}
        labels = {"float32": "float32", "bfloat16-emulated": "bfloat16-emulated"}  # precision -> column
        if msr.bf16_kernel():
            labels["bfloat16"] = f"bfloat16 ({msr.bf16_kernel()})"
        for precision, label in labels.items():
            m.inference_precision = precision
            row[label] = msr.evaluate(m, test)["bpc"]
        with kernel_switches(bf16_model_kernel=True):
            m.inference_precision = "bfloat16"
            row["bfloat16 (model of the avx512-bf16 kernel)"] = msr.evaluate(m, test)["bpc"]
        m.inference_precision = "float32"
        worst = max(abs(v - row["float32"]) for v in row.values())
        print(f"LSTM {layers}: test BPC {json.dumps(row)}; largest difference from float32 {worst:.2e}", flush=True)


if __name__ == "__main__":
    main()
