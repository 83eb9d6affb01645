"""LSTM, GRU and Elman RNN equal torch.nn.LSTM / GRU / RNN with copied weights: logits, loss,
gradients and final state, in float64."""

import numpy as np
import pytest

import multiscale_rnn as msr

torch = pytest.importorskip("torch")

CASES = [(msr.LSTM, "LSTM"), (msr.GRU, "GRU"), (msr.ElmanRNN, "RNN")]


class TorchLM(torch.nn.Module):
    def __init__(self, kind, V, E, H, L):
        super().__init__()
        self.embedding = torch.nn.Embedding(V, E)
        self.rnn = getattr(torch.nn, kind)(E, H, num_layers=L, batch_first=True)
        self.decoder = torch.nn.Linear(H, V)

    def forward(self, x, state=None):
        y, state = self.rnn(self.embedding(x), state)
        return self.decoder(y), state


def copy_weights(ours, theirs):
    named = dict(theirs.named_parameters())
    for name, value in ours.parameters().items():
        tname = name if name.startswith(("embedding", "decoder")) else "rnn." + name
        with torch.no_grad():
            named[tname].copy_(torch.from_numpy(np.ascontiguousarray(value)))
    return named


@pytest.mark.parametrize("cls,kind", CASES)
def test_matches_torch(cls, kind):
    torch.manual_seed(0)
    V, E, H, L, B, T = 13, 6, 8, 2, 3, 7
    ours = cls(vocab_size=V, embed_size=E, hidden_sizes=(H,) * L, dtype="float64", seed=1)
    theirs = TorchLM(kind, V, E, H, L).double()
    named = copy_weights(ours, theirs)
    rng = np.random.default_rng(4)
    tok, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))

    # Two chunks with the state carried, as in truncated BPTT.
    s_ours, s_torch = None, None
    for chunk in (slice(0, 4), slice(4, T)):
        logits, _ = ours.forward(tok[:, chunk], s_ours)
        loss, grads, s_ours = ours.loss_and_grad(tok[:, chunk], tgt[:, chunk], s_ours)
        theirs.zero_grad()
        z, s_new = theirs(torch.from_numpy(tok[:, chunk]), s_torch)
        tl = torch.nn.functional.cross_entropy(z.reshape(-1, V), torch.from_numpy(tgt[:, chunk]).reshape(-1))
        tl.backward()
        s_torch = tuple(s.detach() for s in s_new) if isinstance(s_new, tuple) else s_new.detach()
        np.testing.assert_allclose(logits, z.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert loss == pytest.approx(tl.item(), rel=1e-12)
        for name, g in grads.items():
            tname = name if name.startswith(("embedding", "decoder")) else "rnn." + name
            np.testing.assert_allclose(g, named[tname].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)

    h_torch = (s_torch[0] if isinstance(s_torch, tuple) else s_torch).numpy()
    for l in range(L):
        np.testing.assert_allclose(s_ours[f"h_l{l}"], h_torch[l], rtol=1e-10, atol=1e-12)
    if kind == "LSTM":
        for l in range(L):
            np.testing.assert_allclose(s_ours[f"c_l{l}"], s_torch[1][l].numpy(), rtol=1e-10, atol=1e-12)


def test_float32_close_to_torch_float32():
    torch.manual_seed(0)
    V, E, H = 20, 16, 32
    ours = msr.LSTM(vocab_size=V, embed_size=E, hidden_sizes=(H, H), seed=2)
    theirs = TorchLM("LSTM", V, E, H, 2)
    named = copy_weights(ours, theirs)
    tok = np.random.default_rng(0).integers(0, V, (4, 30))
    loss, grads, _ = ours.loss_and_grad(tok[:, :-1], tok[:, 1:])
    z, _ = theirs(torch.from_numpy(tok[:, :-1]))
    tl = torch.nn.functional.cross_entropy(z.reshape(-1, V), torch.from_numpy(tok[:, 1:]).reshape(-1))
    tl.backward()
    assert loss == pytest.approx(tl.item(), rel=1e-5)
    g = grads["weight_hh_l0"]
    np.testing.assert_allclose(g, named["rnn.weight_hh_l0"].grad.numpy(), rtol=1e-3, atol=1e-5)
