"""The demo corpus generator: grammar examples realized exactly, determinism, splits, noise rate."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.data import lexicon as L
from phrase_rescore.data.demo_corpus import NP, Clause, generate, generate_splits, realize_en, realize_fr


def noun(fr: str) -> L.Noun:
    return next(n for n in L.NOUNS if n.fr == fr)


def adj(m: str) -> L.Adjective:
    return next(a for a in L.ADJECTIVES if a.m == m)


def verb(fr: str, kind: str) -> L.Verb:
    return next(v for v in L.VERBS if v.fr == fr and v.kind == kind)


def prep(en: str) -> int:
    return next(i for i, p in enumerate(L.PREPOSITIONS) if p[0] == en)


def the(fr: str, plural: bool = False, det: str = "def", a=None, bare: bool = False, det_index: int = 0) -> NP:
    n = noun(fr)
    return NP("noun", 5 if plural else 2, n.gender, noun=n, det=det, adj=a, bare=bare, det_index=det_index)


def pron(person: int, gender: str = "m") -> NP:
    return NP("pron", person, gender)


CASES = [
    # articles, elision, contraction (à+le=au, de+le=du, à+les=aux)
    (Clause("motion", the("homme"), verb=verb("aller", "motion"), pp=(-1, the("marché"))),
     "The man goes to the market.", "L'homme va au marché."),
    (Clause("motion", the("femme", True), verb=verb("aller", "motion"), pp=(-1, the("magasin", True)),
            tense="past"),
     "The women went to the shops.", "Les femmes sont allées aux magasins."),
    (Clause("intrans", pron(0, "f"), verb=verb("dormir", "intrans"), pp=(prep("near"), the("parc"))),
     "I sleep near the park.", "Je dors près du parc."),
    (Clause("intrans", pron(2, "f"), verb=verb("travailler", "intrans"), pp=(prep("near"), the("hôpital", True))),
     "She works near the hospitals.", "Elle travaille près des hôpitaux."),
    (Clause("motion", the("enfant"), verb=verb("aller", "motion"), pp=(-1, the("hôtel"))),
     "The child goes to the hotel.", "L'enfant va à l'hôtel."),
    # partitive, and "pas de" / "pas d'" under negation
    (Clause("trans", pron(3), verb=verb("manger", "trans"), obj=the("pain", det="part")),
     "We eat some bread.", "Nous mangeons du pain."),
    (Clause("trans", pron(2), verb=verb("boire", "trans"), obj=the("eau", det="part")),
     "He drinks some water.", "Il boit de l'eau."),
    (Clause("trans", pron(0), verb=verb("boire", "trans"), obj=the("eau", det="part"), neg=True),
     "I do not drink any water.", "Je ne bois pas d'eau."),
    (Clause("trans", pron(2, "f"), verb=verb("acheter", "trans"), obj=the("pomme", det="indef"), neg=True,
            tense="past"),
     "She did not buy an apple.", "Elle n'a pas acheté de pomme."),
    (Clause("trans", pron(0), verb=verb("aimer", "trans"), obj=the("chat"), neg=True),
     "I do not like the cat.", "Je n'aime pas le chat."),
    # gender and number agreement, adjectives after the noun, pre-nominal exceptions (bel, vieil)
    (Clause("copula", the("maison"), adj=adj("grand")), "The house is big.", "La maison est grande."),
    (Clause("copula", the("fille", True), adj=adj("heureux"), tense="future"),
     "The girls will be happy.", "Les filles seront heureuses."),
    (Clause("trans", the("chat", a=adj("noir")), verb=verb("voir", "trans"), obj=the("voiture", det="indef", a=adj("rouge"))),
     "The black cat sees a red car.", "Le chat noir voit une voiture rouge."),
    (Clause("trans", the("homme", a=adj("vieux")), verb=verb("trouver", "trans"),
            obj=the("arbre", det="indef", a=adj("beau")), tense="past"),
     "The old man found a beautiful tree.", "Le vieil homme a trouvé un bel arbre."),
    (Clause("trans", pron(5, "f"), verb=verb("vendre", "trans"), obj=the("chat", True, det="indef", a=adj("petit"))),
     "They sell some small cats.", "Elles vendent de petits chats."),
    (Clause("trans", pron(1), verb=verb("aimer", "trans"), obj=the("école", det="poss", det_index=0)),
     "You like my school.", "Tu aimes mon école."),
    (Clause("trans", pron(4), verb=verb("regarder", "trans"), obj=the("ordinateur", det="dem")),
     "You watch this computer.", "Vous regardez cet ordinateur."),
    (Clause("trans", pron(4), verb=verb("ouvrir", "trans"), obj=the("sac", det="dem")),
     "You open this bag.", "Vous ouvrez ce sac."),
    # tenses: passé composé with avoir and with être (agreement), futur
    (Clause("intrans", NP("name", 2, "f", name="Marie"), verb=verb("tomber", "intrans"), tense="past"),
     "Marie fell.", "Marie est tombée."),
    (Clause("trans", pron(3), verb=verb("finir", "trans"), obj=the("soupe"), tense="future"),
     "We will finish the soup.", "Nous finirons la soupe."),
    (Clause("trans", pron(0), verb=verb("voir", "trans"), obj=the("ours"), tense="past", time=("yesterday", "hier")),
     "I saw the bear yesterday.", "J'ai vu l'ours hier."),
    (Clause("intrans", pron(5), verb=verb("partir", "intrans"), tense="past", neg=True),
     "They did not leave.", "Ils ne sont pas partis."),
    # questions and "il y a"
    (Clause("trans", the("chien"), verb=verb("manger", "trans"), obj=the("viande"), question="yn"),
     "Does the dog eat the meat?", "Est-ce que le chien mange la viande ?"),
    (Clause("trans", pron(2, "f"), verb=verb("acheter", "trans"), tense="past", question="what"),
     "What did she buy?", "Qu'est-ce qu'elle a acheté ?"),
    (Clause("intrans", the("homme"), verb=verb("travailler", "intrans"), question="where"),
     "Where does the man work?", "Où est-ce que l'homme travaille ?"),
    (Clause("trans", pron(2), verb=verb("lire", "trans"), obj=the("journal"), tense="future", question="who"),
     "Who will read the newspaper?", "Qui lira le journal ?"),
    (Clause("there", the("chat", det="indef"), pp=(prep("in"), the("jardin")), neg=True),
     "There is no cat in the garden.", "Il n'y a pas de chat dans le jardin."),
    (Clause("trans", pron(2, "f"), verb=verb("manger", "trans"), obj=the("pain", det="part", bare=True),
            freq=("often", "souvent")),
     "She often eats bread.", "Elle mange souvent du pain."),
    (Clause("trans", pron(0), verb=verb("attendre", "trans"), obj=the("train")),
     "I wait for the train.", "J'attends le train."),
]


@pytest.mark.parametrize("clause,en,fr", CASES, ids=[c[1] for c in CASES])
def test_grammar_examples(clause, en, fr):
    assert realize_en(clause) == en
    assert realize_fr(clause) == fr


def test_lexicon_has_a_few_hundred_words():
    n_en, n_fr = L.vocabulary_size()
    assert len(L.NOUNS) + len(L.ADJECTIVES) + len(L.VERBS) >= 250
    assert n_en >= 400 and n_fr >= 700


def test_deterministic_by_seed_and_splits_disjoint():
    a = generate_splits(600, 60, 60, seed=7)
    b = generate_splits(600, 60, 60, seed=7)
    c = generate_splits(600, 60, 60, seed=8)
    assert a == b
    assert a["train"] != c["train"]
    assert [len(a[s]) for s in ("train", "dev", "test")] == [600, 60, 60]
    en = {s: [p.en for p in a[s]] for s in a}
    for s in en:
        assert len(set(en[s])) == len(en[s])
    assert not set(en["train"]) & set(en["dev"])
    assert not set(en["train"]) & set(en["test"])
    assert not set(en["dev"]) & set(en["test"])
    assert all(p.noise == "" for s in ("dev", "test") for p in a[s])


def test_noise_rate_within_bounds():
    n, rate = 4000, 0.05
    train = generate_splits(n, 0, 0, seed=3, noise_rate=rate)["train"]
    noisy = [p for p in train if p.noise]
    # binomial(4000, 0.05): mean 200, sd 13.8; a pair whose "noise" changed nothing stays clean
    assert abs(len(noisy) - n * rate) < 5 * math.sqrt(n * rate * (1 - rate))
    assert {p.noise for p in noisy} == {"misaligned", "substitution", "omission"}
    clean = generate_splits(n, 0, 0, seed=3, noise_rate=0.0)["train"]
    assert [p.en for p in clean] == [p.en for p in train]
    for c, p in zip(clean, train, strict=True):
        assert (c.fr != p.fr) == bool(p.noise)
    assert not any(p.noise for p in clean)


def test_generate_writes_files_and_reuses_them(tmp_path):
    paths = generate(tmp_path / "d", n_train=300, n_dev=20, n_test=25, seed=5)
    lines = {k: p.read_text(encoding="utf-8").split("\n") for k, p in paths.items() if k != "manifest"}
    assert {k: len(v) - 1 for k, v in lines.items()} == {
        "train.en": 300, "train.fr": 300, "dev.en": 20, "dev.fr": 20, "test.en": 25, "test.fr": 25}
    assert all(v[-1] == "" and all(v[:-1]) for v in lines.values())
    mtime = paths["train.en"].stat().st_mtime_ns
    again = generate(tmp_path / "d", n_train=300, n_dev=20, n_test=25, seed=5)
    assert again == paths and paths["train.en"].stat().st_mtime_ns == mtime  # current: not rewritten
    paths["dev.fr"].write_text("changed\n", encoding="utf-8")
    generate(tmp_path / "d", n_train=300, n_dev=20, n_test=25, seed=5)  # a damaged file is regenerated
    assert paths["dev.fr"].read_text(encoding="utf-8").split("\n") == lines["dev.fr"]


def test_cli_make_demo_data(tmp_path):
    r = CliRunner().invoke(main, ["--quiet", "make-demo-data", "--out", str(tmp_path), "--train", "200",
                                  "--dev", "10", "--test", "10", "--seed", "2"])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "demo-data.json").read_text())
    assert m["params"]["n_train"] == 200 and m["params"]["seed"] == 2
    assert (tmp_path / "test.fr").read_text().count("\n") == 10
