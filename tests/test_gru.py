"""The GRU: a textbook worked example, numpy-vs-torch equivalence for both forms, masking, gradcheck."""
import numpy as np
import pytest
import torch

from phrase_rescore.pipeline.model import reference as ref
from phrase_rescore.pipeline.model.gru import GRUCell

# A worked example of the textbook GRU (reference.GRU): N=1, T=3, D=2, H=2, O=2.
W_z, U_z = [[0.1, 0.2], [0.3, 0.4]], [[0.1, 0.0], [0.0, 0.1]]
W_r, U_r = [[0.2, 0.1], [0.4, 0.3]], [[0.1, 0.0], [0.0, 0.1]]
W_h, U_h = [[0.3, 0.1], [0.1, 0.3]], [[0.2, 0.0], [0.0, 0.2]]
X = np.array([[[1.0, 0.5], [0.5, 1.0], [0.0, 0.5]]])
# The document's printed results. Its step 2 has an arithmetic slip: it prints
# tanh([0.2705, 0.3691]) = [0.2638, 0.3539], but tanh gives [0.2641, 0.3532] (checked below), and
# the slip propagates to y_2, y_3 and h_3 (by at most 4.4e-4).
DOC_OUTPUTS = [[[0.3612, 0.3449], [0.4702, 0.4958], [0.3589, 0.3975]]]
DOC_FINAL = [[0.1469, 0.2240]]
# The same computation with the document's weights, inputs and equations, done without the slip.
OUTPUTS = [[[0.3612, 0.3449], [0.4700, 0.4954], [0.3588, 0.3972]]]
FINAL = [[0.1470, 0.2237]]


def worked_example_gru():
    g = ref.GRU(2, 2, 2, seed=0)
    stack = lambda U, W: np.hstack([np.array(U), np.array(W)])  # noqa: E731  (H, H+D) over [h; x]
    g.W_z, g.W_r, g.W_h = stack(U_z, W_z), stack(U_r, W_r), stack(U_h, W_h)
    g.W_y, g.b_y = np.array([[1.0, 0.5], [0.5, 1.0]]), np.array([0.1, 0.1])
    return g


def test_worked_example_intermediates():
    """Every intermediate the document prints for step 1, and step 2's pre-activations, to 4 decimals."""
    sig = ref.sigmoid
    x1, x2 = X[0, 0], X[0, 1]
    z1, r1 = sig(np.dot(W_z, x1)), sig(np.dot(W_r, x1))
    np.testing.assert_allclose(z1, [0.5500, 0.6225], atol=2.5e-4)  # sigmoid(0.2) = 0.54983; the doc prints 0.5500
    np.testing.assert_allclose(r1, [0.5622, 0.6341], atol=5e-5)
    h1 = z1 * np.tanh(np.dot(W_h, x1))
    np.testing.assert_allclose(np.tanh(np.dot(W_h, x1)), [0.3364, 0.2449], atol=5e-5)
    np.testing.assert_allclose(h1, [0.1850, 0.1524], atol=1e-4)
    r2 = sig(np.dot(W_r, x2) + np.dot(U_r, h1))
    np.testing.assert_allclose(np.dot(W_z, x2) + np.dot(U_z, h1), [0.2685, 0.5652], atol=5e-5)
    np.testing.assert_allclose(r2, [0.5544, 0.6260], atol=5e-5)
    pre2 = np.dot(W_h, x2) + np.dot(U_h, r2 * h1)
    np.testing.assert_allclose(pre2, [0.2705, 0.3691], atol=5e-5)
    # the document's slip: tanh of its own pre-activations is not what it prints
    assert abs(np.tanh(0.2705) - 0.2638) > 2e-4 and abs(np.tanh(0.3691) - 0.3539) > 5e-4


def test_reference_gru_reproduces_worked_example():
    out = worked_example_gru().forward(X)
    assert set(out) == {"outputs", "final_hidden_state"}
    assert out["outputs"].shape == (1, 3, 2) and out["outputs"].dtype == np.float64
    assert out["final_hidden_state"].shape == (1, 2)
    np.testing.assert_allclose(out["outputs"][:, 0], np.array(DOC_OUTPUTS)[:, 0], atol=5e-5)  # step 1 exact
    np.testing.assert_allclose(out["outputs"], OUTPUTS, atol=5e-5)
    np.testing.assert_allclose(out["final_hidden_state"], FINAL, atol=5e-5)
    np.testing.assert_allclose(out["outputs"], DOC_OUTPUTS, atol=5e-4)  # within the slip
    np.testing.assert_allclose(out["final_hidden_state"], DOC_FINAL, atol=5e-4)


def test_torch_paper_cell_reproduces_worked_example():
    # The textbook GRU puts z on the candidate; the paper's cell puts it on the old state. They are the
    # same model with z relabelled 1 - z = sigmoid(-a): negate the update gate's weights.
    cell = GRUCell(2, 2, reset="paper").double()
    with torch.no_grad():
        cell.W_x.copy_(torch.tensor(W_r + [[-v for v in row] for row in W_z] + W_h))
        cell.U.copy_(torch.tensor(U_r + [[-v for v in row] for row in U_z] + U_h))
    x = torch.tensor(X)
    states, last = cell.run(cell.input_terms(x), torch.ones(1, 3, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.float64))
    y = states @ torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64).t() + 0.1
    np.testing.assert_allclose(y.detach().numpy(), OUTPUTS, atol=5e-5)
    np.testing.assert_allclose(last.detach().numpy(), FINAL, atol=5e-5)


def _random_cell(reset, ctx_dim, bias, seed=0, D=3, H=4):
    torch.manual_seed(seed)
    cell = GRUCell(D, H, ctx_dim=ctx_dim, reset=reset, bias=bias).double()
    with torch.no_grad():
        for p in cell.parameters():
            p.normal_(0.0, 0.7)  # large enough that every nonlinearity is exercised
    return cell


@pytest.mark.parametrize("reset", ["paper", "cudnn"])
@pytest.mark.parametrize("ctx_dim,bias", [(0, False), (0, True), (5, False), (5, True)])
def test_torch_cell_matches_numpy_reference(reset, ctx_dim, bias):
    D, H, T = 3, 4, 6
    cell = _random_cell(reset, ctx_dim, bias, D=D, H=H)
    P = ref._cell_params(cell)
    rng = np.random.default_rng(1)
    lengths = [6, 1, 3, 4]
    x = rng.standard_normal((len(lengths), T, D))
    h0 = rng.standard_normal((len(lengths), H))
    c = rng.standard_normal((len(lengths), ctx_dim)) if ctx_dim else None
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    states, last = cell.run(cell.input_terms(torch.tensor(x)), mask, torch.tensor(h0),
                            None if c is None else cell.context_terms(torch.tensor(c)))
    for b, n in enumerate(lengths):
        h = h0[b]
        for t in range(T):
            if t < n:
                if ctx_dim:
                    step = ref.gru_step_ctx if reset == "paper" else ref.gru_step_ctx_cudnn
                    h = step(x[b, t], h, c[b], P)
                else:
                    step = ref.gru_step if reset == "paper" else ref.gru_step_cudnn
                    h = step(x[b, t], h, P)
            # padding steps leave the state unchanged
            np.testing.assert_allclose(states[b, t].detach().numpy(), h, rtol=0, atol=1e-10)
        np.testing.assert_allclose(last[b].detach().numpy(), h, rtol=0, atol=1e-10)


def test_two_reset_forms_are_different_functions():
    a, b = _random_cell("paper", 0, False), _random_cell("cudnn", 0, False)
    b.load_state_dict(a.state_dict())
    x, h = torch.randn(2, 12, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    assert not torch.allclose(a.step(x, h), b.step(x, h))


@pytest.mark.parametrize("reset", ["paper", "cudnn"])
def test_cell_gradcheck(reset):
    cell = _random_cell(reset, 2, True, D=2, H=3)
    x = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    c = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])

    def f(x, h0, c, *params):
        return cell.run(cell.input_terms(x), mask, h0, cell.context_terms(c))[0]

    assert torch.autograd.gradcheck(f, (x, h0, c) + tuple(cell.parameters()))


def test_unknown_reset_form_is_refused():
    with pytest.raises(ValueError, match="reset must be one of"):
        GRUCell(2, 2, reset="keras")
