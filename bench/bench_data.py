"""Data generation speed: the synthetic hierarchy generator (characters per second).

python bench/bench_data.py [--chars 20000] [--repeats 5]
"""

import argparse
import time

from multiscale_rnn import data


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    best = float("inf")
    for r in range(args.repeats):
        t0 = time.perf_counter()
        data.synthetic_hierarchy(n_chars=args.chars, seed=r)
        best = min(best, time.perf_counter() - t0)
    print(
        f"synthetic_hierarchy({args.chars} chars): best of {args.repeats} {best * 1e3:.1f} ms, "
        f"{args.chars / best:,.0f} chars/s"
    )


if __name__ == "__main__":
    main()
