"""Token streams the training tests learn from: the cycle 0, 1, ..., V-1 repeated, with a share of its
symbols replaced by uniform random ones (seeded), so a model can learn it but not perfectly."""

import numpy as np


def noisy_cycle(n: int, vocab_size: int, noise: float, seed: int) -> np.ndarray:
    """``n`` int32 ids: the cycle over ``vocab_size`` symbols with each symbol replaced, with probability
    ``noise``, by a uniform draw."""
    rng = np.random.default_rng(seed)
    ids = np.tile(np.arange(vocab_size), n // vocab_size + 1)[:n]
    flip = rng.random(n) < noise
    ids[flip] = rng.integers(0, vocab_size, flip.sum())
    return ids.astype(np.int32)
