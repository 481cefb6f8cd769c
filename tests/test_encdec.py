"""The encoder-decoder against model/reference.py's pair-at-a-time ``log_p``, gradcheck, sizes, step API."""
import numpy as np
import pytest
import torch

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.model import reference as ref
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder, count_weight_parameters

VS, VT = 11, 13


def tiny_model(gru="paper", bias=False, seed=0, dtype=torch.float64, std=0.5):
    torch.manual_seed(seed)
    cfg = EncDecConfig(VS, VT, emb_dim=4, hidden_dim=5, maxout_units=3, maxout_pieces=2, rank=2,
                       gru=gru, bias=bias)
    model = RNNEncoderDecoder(cfg).to(dtype)
    with torch.no_grad():  # weights far from the tiny init so the output is not near-uniform
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


def random_pairs(n, seed=0):
    """Phrase pairs of 1-7 words plus eos (id 0), including unk (id 1) and repeated sources."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        src = list(rng.integers(1, VS, rng.integers(1, 8))) + [0]
        tgt = list(rng.integers(1, VT, rng.integers(1, 8))) + [0]
        pairs.append((src, tgt))
    pairs.append((pairs[0][0], pairs[1][1]))  # same source, another target
    return pairs


def pad(seqs):
    T = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = True
    return ids, mask


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
@pytest.mark.parametrize("bias", [False, True])
def test_batched_log_prob_equals_pair_at_a_time_reference(gru, bias):
    model = tiny_model(gru, bias)
    P = ref.reference_params(model)
    pairs = random_pairs(9)
    s, sm = pad([p[0] for p in pairs])
    t, tm = pad([p[1] for p in pairs])
    got = model.log_prob(s, sm, t, tm).detach().numpy()
    want = [ref.log_p(a, b, P, reset=gru) for a, b in pairs]
    assert len(got) == len(want)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    assert np.all(np.array(want) < 0) and np.ptp(want) > 1.0  # non-degenerate scores


def test_float32_model_matches_float64_reference_to_1e4():
    model = tiny_model(dtype=torch.float32, std=0.3)
    P = ref.reference_params(model)
    pairs = random_pairs(12, seed=3)
    s, sm = pad([p[0] for p in pairs])
    t, tm = pad([p[1] for p in pairs])
    got = model.log_prob(s, sm, t, tm).detach().numpy()
    np.testing.assert_allclose(got, [ref.log_p(a, b, P) for a, b in pairs], rtol=0, atol=1e-4)


def test_score_does_not_depend_on_batch_neighbours():
    model = tiny_model()
    pairs = random_pairs(6, seed=5)
    s, sm = pad([p[0] for p in pairs])
    t, tm = pad([p[1] for p in pairs])
    batched = model.log_prob(s, sm, t, tm)
    for i, (a, b) in enumerate(pairs):
        s1, sm1 = pad([a])
        t1, tm1 = pad([b])
        assert torch.allclose(model.log_prob(s1, sm1, t1, tm1)[0], batched[i], atol=1e-12)


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
def test_step_api_equals_teacher_forced_log_prob(gru):
    model = tiny_model(gru)
    pairs = random_pairs(4, seed=7)
    s, sm = pad([p[0] for p in pairs])
    t, tm = pad([p[1] for p in pairs])
    want = model.log_prob(s, sm, t, tm)
    ctx = model.decoder_init(model.encode(s, sm))
    state, prev, total = ctx.s0, None, torch.zeros(len(pairs), dtype=torch.float64)
    for j in range(t.shape[1]):
        state, logp = model.decoder_step(prev, state, ctx)
        total += torch.where(tm[:, j], logp.gather(1, t[:, j:j + 1]).squeeze(1), torch.zeros(()))
        prev = t[:, j]
    assert torch.allclose(total, want, atol=1e-12)
    # next-word distributions are normalised
    assert torch.allclose(logp.exp().sum(-1), torch.ones(len(pairs), dtype=torch.float64))


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
def test_whole_model_gradcheck(gru):
    model = tiny_model(gru, bias=True, std=0.3)
    pairs = random_pairs(2, seed=11)
    s, sm = pad([p[0] for p in pairs])
    t, tm = pad([p[1] for p in pairs])
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def f(*ps):
        out = torch.func.functional_call(model, dict(zip(names, ps)), (s, sm, t, tm))
        return out

    assert torch.autograd.gradcheck(f, params, fast_mode=True)  # random projections: every parameter, seconds


def test_paper_preset_weight_count_matches_seed():
    cfg = EncDecConfig.preset("paper", src_vocab_size=15001, tgt_vocab_size=15001)
    assert (cfg.emb_dim, cfg.hidden_dim, cfg.maxout_units, cfg.maxout_pieces, cfg.rank) == (100, 1000, 500, 2, 100)
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        n = count_weight_parameters(RNNEncoderDecoder(cfg))
    assert abs(n - 18.25e6) / 18.25e6 < 0.02, n


def test_config_round_trip_and_errors():
    cfg = EncDecConfig.preset("small", 30, 40, gru="cudnn")
    assert EncDecConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(PhraseRescoreError, match="unknown model preset 'huge'; expected one of \\['paper', 'small'\\]"):
        EncDecConfig.preset("huge", 3, 3)
    with pytest.raises(ValueError, match="gru must be one of"):
        EncDecConfig(3, 3, gru="lstm")
    with pytest.raises(ValueError, match="unknown EncDecConfig keys"):
        EncDecConfig.from_dict({**cfg.to_dict(), "dropout": 0.1})


def test_shape_errors_are_clear():
    model = tiny_model()
    with pytest.raises(ValueError, match="same shape"):
        model.encode(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool))
