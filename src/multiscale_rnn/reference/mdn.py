"""Reference mixture density head (Graves 2013, eq. 17-26) in PyTorch, written with
``torch.distributions`` rather than the closed forms of the core (cpp/include/msrnn/heads/mdn.hpp):
a ``MixtureSameFamily`` of bivariate ``MultivariateNormal`` s, built from their covariance matrices
[[s1^2, rho s1 s2], [rho s1 s2, s2^2]], times a ``Bernoulli`` end-of-stroke bit. The raw parameters
z (..., 6M + 1) are laid out as the core's: [e^; pi^ (M); mu1^ (M); mu2^ (M); sigma1^ (M); sigma2^ (M);
rho^ (M)], with e = 1 / (1 + exp(e^)), pi = softmax(pi^), sigma = exp(sigma^), rho = tanh(rho^)."""

from __future__ import annotations

from . import torch as _torch

__all__ = ["mixtures_of", "nll"]


def mixtures_of(z) -> int:
    """M of raw parameters with 6M + 1 entries in their last dimension (ValueError otherwise)."""
    R = int(z.shape[-1])
    if R < 7 or (R - 1) % 6:
        raise ValueError(f"mixture density parameters have 6M + 1 entries, got {R}")
    return (R - 1) // 6


def nll(z, x):
    """-log Pr(x | z) for raw parameters z (..., 6M + 1) and targets x (..., 3) = (dx, dy, pen bit):
    a tensor of the leading shape."""
    torch = _torch()
    D = torch.distributions
    M = mixtures_of(z)
    e_hat, pi_hat = z[..., 0], z[..., 1 : 1 + M]
    mu = torch.stack([z[..., 1 + M : 1 + 2 * M], z[..., 1 + 2 * M : 1 + 3 * M]], dim=-1)  # (..., M, 2)
    s1, s2 = torch.exp(z[..., 1 + 3 * M : 1 + 4 * M]), torch.exp(z[..., 1 + 4 * M : 1 + 5 * M])
    rho = torch.tanh(z[..., 1 + 5 * M : 1 + 6 * M])
    cov = torch.stack(
        [torch.stack([s1 * s1, rho * s1 * s2], dim=-1), torch.stack([rho * s1 * s2, s2 * s2], dim=-1)], dim=-2
    )  # (..., M, 2, 2)
    mixture = D.MixtureSameFamily(D.Categorical(logits=pi_hat), D.MultivariateNormal(mu, covariance_matrix=cov))
    pen = D.Bernoulli(logits=-e_hat)  # Pr(pen bit = 1) = e = sigmoid(-e^)
    return -(mixture.log_prob(x[..., :2]) + pen.log_prob(x[..., 2]))
