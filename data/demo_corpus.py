"""A generated English-French parallel corpus: the project's demo data.

A small grammar over the lexicon in :mod:`phrase_rescore.data.lexicon` draws a clause (subject, verb, object,
prepositional phrase, adverbs, tense, negation, question form) and realizes it in both languages:

* French articles and their contractions (à+le=au, à+les=aux, de+le=du, de+les=des), elision
  (l', d', n', j', qu'), partitives (du pain, de l'eau) and "pas de" after a negation;
* gender and number agreement of articles, adjectives and past participles after être;
* adjectives after the noun, except the usual pre-nominal ones (grand, petit, bon, nouveau/nouvel, ...);
* negation ne ... pas around the conjugated verb; subject pronouns; present, passé composé and
  futur (English present, simple past and will);
* prepositional phrases, "il y a", yes/no questions with est-ce que and where/when/what/who questions.

Training pairs carry controlled noise, as real parallel data does: a few percent are misaligned
(the French of another sentence) or loosely translated (one word translated as another word of its
class, or one phrase left out). Such pairs make count-based phrase probabilities wrong for the
rare phrases they create; the dev and test sets are clean, as reference translations are.

Everything is a deterministic function of the seed. :func:`generate` writes
``train.en train.fr dev.en dev.fr test.en test.fr`` (untokenized, natural casing and punctuation,
one sentence per line) and ``demo-data.json``; when that manifest already matches the request
and the files' hashes, nothing is regenerated.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, replace
from pathlib import Path

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file

from . import lexicon as L

GENERATOR_VERSION = 1
SPLITS = ("train", "dev", "test")
MANIFEST = "demo-data.json"
NOISE_KINDS = ("misaligned", "substitution", "omission")
# Shares of the noisy pairs that are of each kind.
NOISE_SHARES = {"misaligned": 0.4, "substitution": 0.4, "omission": 0.2}
TENSES = ("present", "past", "future")


@dataclass(frozen=True)
class NP:
    """A noun phrase. ``kind`` is "pron", "name" or "noun"; person is 2 (3rd sg) or 5 (3rd pl) unless a pronoun."""
    kind: str
    person: int
    gender: str
    noun: L.Noun | None = None
    name: str = ""
    det: str = "def"  # def, indef, part (partitive, mass nouns), poss, dem, num, neg (French "de" after pas)
    det_index: int = 0  # which possessive / number
    bare: bool = False  # English plural indefinite or partitive without "some"
    adj: L.Adjective | None = None

    @property
    def plural(self) -> bool:
        return self.person >= 3


@dataclass(frozen=True)
class Clause:
    """One sentence before realization. ``kind``: trans, intrans, motion, copula, there."""
    kind: str
    subj: NP | None
    verb: L.Verb | None = None
    obj: NP | None = None
    adj: L.Adjective | None = None  # copula complement
    pp: tuple[int, NP] | None = None  # (index into PREPOSITIONS, or -1 for a motion "to"), noun phrase
    time: tuple[str, str] | None = None
    freq: tuple[str, str] | None = None
    tense: str = "present"
    neg: bool = False
    question: str = ""  # "", "yn", "where", "when", "what", "who"


@dataclass(frozen=True)
class Pair:
    """A sentence pair; ``noise`` is "" for a faithful translation or one of NOISE_KINDS."""
    en: str
    fr: str
    noise: str = ""


# ----------------------------------------------------------------------------- sampling

def _nouns_with(tags: frozenset[str]) -> list[L.Noun]:
    return [n for n in L.NOUNS if n.tags & tags]


def _sample_person(rng: random.Random) -> NP | None:
    """A subject pronoun (28%) or a person's name (12%) in place of a noun phrase; None for a noun phrase."""
    r = rng.random()
    if r < 0.28:
        person = rng.randrange(6)
        return NP("pron", person, rng.choice("mf"))
    if r < 0.4:
        name, gender = rng.choice(L.NAMES)
        return NP("name", 2, gender, name=name)
    return None


def _sample_det(rng: random.Random, role: str, mass: bool) -> str:
    """A determiner for a noun in ``role`` (a mass noun takes the partitive for an indefinite or a number)."""
    if role == "pp":
        det = rng.choices(["def", "poss", "dem"], [0.75, 0.15, 0.1])[0]
    elif role == "obj":
        det = rng.choices(["def", "indef", "poss", "dem", "num"], [0.4, 0.3, 0.15, 0.07, 0.08])[0]
    else:
        det = rng.choices(["def", "indef", "poss", "dem", "num"], [0.55, 0.12, 0.18, 0.08, 0.07])[0]
    if mass and det in ("indef", "num"):
        det = "part"
    return det


def _sample_adj(rng: random.Random, noun: L.Noun) -> L.Adjective | None:
    """An adjective fitting ``noun`` for 30% of noun phrases, else None."""
    if rng.random() < 0.3:
        cands = [a for a in L.ADJECTIVES if a.tags & noun.tags]
        return rng.choice(cands) if cands else None
    return None


def _sample_np(rng: random.Random, tags: frozenset[str], role: str) -> NP:
    """A noun phrase whose head has one of ``tags``; role "subj", "obj" or "pp" restricts determiners."""
    if role == "subj" and "person" in tags:
        person = _sample_person(rng)
        if person is not None:
            return person
    noun = rng.choice(_nouns_with(tags))
    mass = "mass" in noun.tags
    det = _sample_det(rng, role, mass)
    plural = det == "num" or (det != "part" and not mass and rng.random() < 0.3)
    det_index = rng.randrange(len(L.POSSESSIVES) if det == "poss" else len(L.NUMBERS))
    bare = det in ("indef", "part") and (plural or mass) and rng.random() < 0.5
    adj = _sample_adj(rng, noun)
    return NP("noun", 5 if plural else 2, noun.gender, noun=noun, det=det, det_index=det_index,
              bare=bare, adj=adj)


def _np_tags(np_: NP) -> frozenset[str]:
    return np_.noun.tags if np_.kind == "noun" else frozenset({"person"})


def _sample_pp(rng: random.Random, exclude: str = "") -> tuple[int, NP]:
    i = rng.randrange(len(L.PREPOSITIONS))
    while L.PREPOSITIONS[i][0] == exclude:
        i = rng.randrange(len(L.PREPOSITIONS))
    return i, _sample_np(rng, frozenset(L.PREPOSITIONS[i][2].split()), "pp")


def _sample_there(rng: random.Random, tense: str, time: tuple[str, str] | None) -> Clause:
    """An existential clause ("there is a cat under the table"): not in the past tense."""
    if tense == "past":
        tense = "present"
        time = None
    subj = _sample_np(rng, frozenset({"animal", "thing", "food", "drink", "person", "vehicle"}), "obj")
    if subj.det not in ("indef", "part", "num"):
        subj = replace(subj, det="indef" if "mass" not in subj.noun.tags else "part")
    pp_i = rng.choice([i for i, p in enumerate(L.PREPOSITIONS) if p[0] in ("in", "on", "under", "near", "behind")])
    pp = (pp_i, _sample_np(rng, frozenset(L.PREPOSITIONS[pp_i][2].split()), "pp"))
    neg = rng.random() < 0.2 and subj.det != "num"
    return Clause("there", subj, pp=pp, tense=tense, neg=neg, time=time)


def _sample_copula(rng: random.Random, tense: str, time: tuple[str, str] | None) -> Clause:
    """A clause of "to be" and an adjective ("the cat is small"), or a "where is ..." question."""
    subj = _sample_np(rng, frozenset({"person", "animal", "place", "thing", "vehicle", "food", "drink"}), "subj")
    cands = [a for a in L.ADJECTIVES if a.tags & _np_tags(subj)]
    adj = rng.choice(cands)
    if subj.adj is adj:
        subj = replace(subj, adj=None)
    q = rng.choice(["yn", "where"]) if rng.random() < 0.15 else ""
    if q == "where" and subj.kind == "pron":
        q = "yn"  # "Où suis-je ?" needs inversion, which the grammar does not do
    if q == "where":
        return Clause("copula", subj, tense="present", question="where")
    neg = not q and rng.random() < 0.2
    return Clause("copula", subj, adj=adj, tense=tense, neg=neg, time=time, question=q)


def _sample_verb_pp(rng: random.Random, verb: L.Verb) -> tuple[int, NP] | None:
    """The prepositional phrase of a verb's clause: always the goal of a motion verb, else sometimes one."""
    if verb.kind == "motion":
        return (-1, _sample_np(rng, frozenset({"place"}), "pp"))
    if rng.random() < (0.25 if verb.kind == "trans" else 0.6):
        return _sample_pp(rng, exclude="for" if verb.en_particle == "for" else "")
    return None


def _sample_question(rng: random.Random, verb: L.Verb, pp: tuple[int, NP] | None) -> str:
    """The question form of a verb's clause (18% are questions), "" for a statement."""
    if rng.random() < 0.18:
        opts = ["yn", "who"] + (["what"] if verb.kind == "trans" else []) + \
               (["where", "when"] if verb.kind == "intrans" and pp is None else [])
        return rng.choice(opts)
    return ""


def _sample_verb_clause(rng: random.Random, kind: str, tense: str, time: tuple[str, str] | None) -> Clause:
    """A clause of a transitive ("trans") or other verb, with its subject, object, phrase and question form."""
    verbs = [v for v in L.VERBS if (v.kind == "trans") == (kind == "trans")]
    verb = rng.choice(verbs)
    subj = _sample_np(rng, verb.subj, "subj")
    obj = _sample_np(rng, verb.obj, "obj") if verb.kind == "trans" else None
    pp = _sample_verb_pp(rng, verb)
    question = _sample_question(rng, verb, pp)
    if question == "who":
        subj = NP("pron", 2, "m")  # placeholder subject: "who" takes the 3rd person singular
    if question == "what":
        obj = None
    if question in ("where", "when"):
        time = None
    neg = not question and rng.random() < 0.18
    freq = rng.choice(L.FREQ_ADVERBS) if (tense == "present" and not neg and not question
                                          and time is None and rng.random() < 0.15) else None
    return Clause(verb.kind, subj, verb=verb, obj=obj, pp=pp, time=time, freq=freq,
                  tense=tense, neg=neg, question=question)


def sample_clause(rng: random.Random) -> Clause:
    """Draw one clause from the grammar."""
    kind = rng.choices(["trans", "intrans", "copula", "there"], [0.5, 0.28, 0.15, 0.07])[0]
    tense = rng.choices(TENSES, [0.5, 0.3, 0.2])[0]
    time = rng.choice(L.TIME_ADVERBS[tense]) if rng.random() < 0.25 else None
    if kind == "there":
        return _sample_there(rng, tense, time)
    if kind == "copula":
        return _sample_copula(rng, tense, time)
    return _sample_verb_clause(rng, kind, tense, time)


# ----------------------------------------------------------------------------- English

def _en_article(next_word: str) -> str:
    return "an" if next_word[:1].lower() in "aeiou" else "a"


def en_np(np_: NP, subject: bool = False, negated: bool = False) -> list[str]:
    """English words of a noun phrase; ``negated``: an object under "not" takes "any", not "some"."""
    if np_.kind == "pron":
        if np_.person == 2:
            return ["he" if np_.gender == "m" else "she"]
        return [L.EN_PRONOUNS[np_.person]] if subject else [["me", "you", "him", "us", "you", "them"][np_.person]]
    if np_.kind == "name":
        return [np_.name]
    n = np_.noun
    words = ([np_.adj.en] if np_.adj else []) + [n.en_pl if np_.plural else n.en]
    if np_.det == "def":
        det = ["the"]
    elif np_.det in ("indef", "part", "neg"):
        if np_.plural or np_.det != "indef":
            det = [] if np_.bare else ["any" if negated else "some"]
        else:
            det = [_en_article(words[0])]
    elif np_.det == "poss":
        det = [L.POSSESSIVES[np_.det_index][0]]
    elif np_.det == "dem":
        det = ["these" if np_.plural else "this"]
    else:
        det = [L.NUMBERS[np_.det_index][0]]
    return det + words


def _en_pp(pp: tuple[int, NP]) -> list[str]:
    i, np_ = pp
    prep = "to" if i < 0 else L.PREPOSITIONS[i][0]
    return prep.split() + en_np(np_)


def _en_finish(words: list[str], question: bool) -> str:
    s = " ".join(words)
    s = s[0].upper() + s[1:]
    return s + ("?" if question else ".")


def _en_there(c: Clause) -> str:
    """English of an existential clause: "there is a cat under the table", "there are no cats ..."."""
    subj = c.subj
    be = {"present": "are" if subj.plural else "is", "future": "will be"}[c.tense]
    if c.neg:
        np_words = ["no"] + en_np(replace(subj, det="def"))[1:]
        words = ["there"] + be.split() + np_words + _en_pp(c.pp)
    else:
        words = ["there"] + be.split() + en_np(subj) + _en_pp(c.pp)
    return _en_finish(words + (c.time[0].split() if c.time else []), False)


def _en_copula(c: Clause, subj: list[str], time: list[str]) -> str:
    """English of a clause of "to be" and an adjective, or of a "where is ..." question."""
    person = c.subj.person
    if c.question == "where":
        return _en_finish(["where", L.EN_BE_PRESENT[person]] + subj, True)
    if c.tense == "future":
        aux, rest = ["will"], ["be"]
    else:
        aux, rest = [(L.EN_BE_PRESENT if c.tense == "present" else L.EN_BE_PAST)[person]], []
    if c.neg:
        aux = aux + ["not"]
    if c.question == "yn":
        return _en_finish(aux + subj + rest + [c.adj.en] + time, True)
    return _en_finish(subj + aux + rest + [c.adj.en] + time, False)


def _en_do(c: Clause) -> str:
    """The auxiliary "do" of a question or negation, in the clause's tense and person ("will" in the future)."""
    return {"present": "does" if c.subj.person == 2 else "do", "past": "did", "future": "will"}[c.tense]


def _en_statement_verb(c: Clause) -> list[str]:
    """The verb of an English statement: its tense, "do not" of a negation, a frequency adverb before it."""
    v, person = c.verb, c.subj.person
    if c.neg:
        verb = [_en_do(c), "not", v.en]
    elif c.tense == "future":
        verb = ["will", v.en]
    else:
        verb = [v.en_past if c.tense == "past" else (v.en_3sg if person == 2 else v.en)]
    if c.freq:
        verb = [c.freq[0]] + verb
    return verb


def _en_verb_clause(c: Clause, subj: list[str], time: list[str]) -> str:
    """English of a verb's clause: a statement, a "who" question, or a question with "do"."""
    v = c.verb
    after = ([v.en_particle] if v.en_particle else [])
    after += en_np(c.obj, negated=c.neg) if c.obj is not None else []
    after += _en_pp(c.pp) if c.pp is not None else []
    after += time
    if c.question == "who":
        finite = {"present": [v.en_3sg], "past": [v.en_past], "future": ["will", v.en]}[c.tense]
        return _en_finish(["who"] + finite + after, True)
    if c.question:
        wh = {"yn": [], "where": ["where"], "when": ["when"], "what": ["what"]}[c.question]
        return _en_finish(wh + [_en_do(c)] + subj + [v.en] + after, True)
    return _en_finish(subj + _en_statement_verb(c) + after, False)


def realize_en(c: Clause) -> str:
    """The English sentence of a clause."""
    if c.kind == "there":
        return _en_there(c)
    subj = en_np(c.subj, subject=True)
    time = c.time[0].split() if c.time else []
    if c.kind == "copula":
        return _en_copula(c, subj, time)
    return _en_verb_clause(c, subj, time)


# ----------------------------------------------------------------------------- French

ELIDING = {"le": "l'", "la": "l'", "de": "d'", "ne": "n'", "je": "j'", "que": "qu'"}
CONTRACTIONS = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des"}


def fr_fix(tokens: list[str]) -> str:
    """Apply French elision then article contraction to a list of words and join them.

    Elision first, so "à le hôtel" becomes "à l'hôtel" and only a remaining "à le" becomes "au".
    Multi-word tokens ("pomme de terre") are split first so each word is seen.
    """
    words = " ".join(tokens).split()
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w.lower() in ELIDING and nxt and L.fr_vowel_initial(nxt):
            e = ELIDING[w.lower()]
            out.append((e[0].upper() + e[1:] if w[0].isupper() else e) + nxt)
            i += 2
            continue
        out.append(w)
        i += 1
    merged: list[str] = []
    for w in out:
        if merged and (merged[-1].lower(), w) in CONTRACTIONS:
            c = CONTRACTIONS[(merged[-1].lower(), w)]
            merged[-1] = c[0].upper() + c[1:] if merged[-1][0].isupper() else c
        else:
            merged.append(w)
    return " ".join(merged)


def _fr_adj_form(a: L.Adjective, gender: str, plural: bool, before: str = "") -> str:
    if plural:
        return a.f_pl if gender == "f" else a.m_pl
    if gender == "f":
        return a.f
    return a.m_vowel if before and L.fr_vowel_initial(before) else a.m


def _fr_person(np_: NP) -> list[str]:
    """French of a subject pronoun or a name."""
    if np_.kind == "pron":
        if np_.person in (2, 5):
            base = "il" if np_.gender == "m" else "elle"
            return [base + ("s" if np_.person == 5 else "")]
        return [L.FR_PERSONS[np_.person]]
    return [np_.name]


def _fr_det(np_: NP, pre: bool, vowel: bool) -> list[str]:
    """The French determiner of a noun phrase, agreeing in gender and number; ``pre``: a pre-nominal adjective
    follows it, ``vowel``: the next word starts with a vowel sound."""
    g, pl = np_.gender, np_.plural
    if np_.det == "def":
        det = ["les"] if pl else ["le" if g == "m" else "la"]
    elif np_.det == "indef":
        # "des" becomes "de" before a plural pre-nominal adjective (de petits chats)
        det = (["de"] if pre else ["des"]) if pl else ["un" if g == "m" else "une"]
    elif np_.det == "part":
        det = ["de"] if pl else ["de", "le" if g == "m" else "la"]
    elif np_.det == "neg":
        det = ["de"]
    elif np_.det == "poss":
        m, f, p = L.POSSESSIVES[np_.det_index][1]
        det = [p if pl else (m if g == "m" or vowel else f)]
    elif np_.det == "dem":
        det = ["ces" if pl else ("cette" if g == "f" else ("cet" if vowel else "ce"))]
    else:
        det = [L.NUMBERS[np_.det_index][1]]
    return det


def fr_np(np_: NP) -> list[str]:
    """French words of a noun phrase (before elision/contraction)."""
    if np_.kind in ("pron", "name"):
        return _fr_person(np_)
    n, g, pl = np_.noun, np_.gender, np_.plural
    noun = n.fr_pl if pl else n.fr
    pre: list[str] = []
    post: list[str] = []
    if np_.adj is not None:
        if np_.adj.prenominal:
            pre = [_fr_adj_form(np_.adj, g, pl, before=noun)]
        else:
            post = [_fr_adj_form(np_.adj, g, pl)]
    first = (pre or [noun])[0]
    return _fr_det(np_, bool(pre), L.fr_vowel_initial(first)) + pre + [noun] + post


def _fr_pp(pp: tuple[int, NP]) -> list[str]:
    i, np_ = pp
    prep = "à" if i < 0 else L.PREPOSITIONS[i][1]
    return prep.split() + fr_np(np_)


def _agree(participle: str, gender: str, plural: bool) -> str:
    return participle + ("e" if gender == "f" else "") + ("s" if plural and not participle.endswith("s") else "")


def _fr_finish(tokens: list[str], question: bool) -> str:
    s = fr_fix(tokens)
    s = s[0].upper() + s[1:]
    return s + (" ?" if question else ".")


def _fr_there(c: Clause, time: list[str]) -> str:
    """French of an existential clause: "il y a un chat sous la table", "il n'y a pas de chat ..."."""
    verb = {"present": ["a"], "future": ["aura"]}[c.tense]
    subj = replace(c.subj, det="neg") if c.neg and c.subj.det in ("indef", "part") else c.subj
    head = ["il", "ne", "y"] + verb + ["pas"] if c.neg else ["il", "y"] + verb
    return _fr_finish(head + fr_np(subj) + _fr_pp(c.pp) + time, False)


def _fr_copula(c: Clause, subj: list[str], time: list[str]) -> str:
    """French of a clause of "être" and an agreeing adjective, or of a "où est ..." question."""
    person, gender, plural = c.subj.person, c.subj.gender, c.subj.plural
    if c.question == "where":
        return _fr_finish(["où", L.ETRE_PRESENT[person]] + subj, True)
    adj = [_fr_adj_form(c.adj, gender, plural)]
    if c.tense == "present":
        verb, rest = [L.ETRE_PRESENT[person]], []
    elif c.tense == "past":
        verb, rest = [L.AVOIR_PRESENT[person]], ["été"]
    else:
        verb, rest = [L.ETRE_FUTURE_STEM + L.FUTURE_ENDINGS[person]], []
    if c.neg:
        verb = ["ne"] + verb + ["pas"]
    body = subj + verb + rest + adj + time
    return _fr_finish((["est-ce", "que"] if c.question == "yn" else []) + body, c.question == "yn")


def _fr_verb(c: Clause, person: int, gender: str, plural: bool) -> tuple[list[str], list[str]]:
    """``(finite verb, past participle)`` of a verb's clause: the participle of the passé composé agrees with
    the subject after être; ne ... pas goes around the finite verb, a frequency adverb after it."""
    v = c.verb
    if c.tense == "present":
        finite, rest = [v.present[person]], []
    elif c.tense == "future":
        finite, rest = [v.fr_future(person)], []
    else:
        aux = L.ETRE_PRESENT if v.aux == "être" else L.AVOIR_PRESENT
        part = _agree(v.participle, gender, plural) if v.aux == "être" else v.participle
        finite, rest = [aux[person]], [part]
    if c.neg:
        finite = ["ne"] + finite + ["pas"]
    if c.freq:
        finite = finite + [c.freq[1]]
    return finite, rest


def _fr_verb_clause(c: Clause, subj: list[str], time: list[str]) -> str:
    """French of a verb's clause: a statement, or a question with qui or est-ce que."""
    person, gender, plural = c.subj.person, c.subj.gender, c.subj.plural
    if c.question == "who":
        person, gender, plural, subj = 2, "m", False, ["qui"]
    finite, rest = _fr_verb(c, person, gender, plural)
    obj: list[str] = []
    if c.obj is not None:
        o = c.obj
        if c.neg and o.det in ("indef", "part"):
            o = replace(o, det="neg")  # je ne mange pas de pain
        obj = fr_np(o)
    after = obj + (_fr_pp(c.pp) if c.pp is not None else []) + time
    lead = {"": [], "who": [], "yn": ["est-ce", "que"], "where": ["où", "est-ce", "que"],
            "when": ["quand", "est-ce", "que"], "what": ["qu'est-ce", "que"]}[c.question]
    return _fr_finish(lead + subj + finite + rest + after, bool(c.question))


def realize_fr(c: Clause) -> str:
    """The French sentence of a clause."""
    time = [c.time[1]] if c.time else []
    if c.kind == "there":
        return _fr_there(c, time)
    subj = fr_np(c.subj)
    if c.kind == "copula":
        return _fr_copula(c, subj, time)
    return _fr_verb_clause(c, subj, time)


# ----------------------------------------------------------------------------- noise

def _omissions(c: Clause) -> list:
    """The ways to leave one optional phrase of ``c`` out (each a function giving the changed clause): a
    prepositional phrase (not a motion verb's goal nor an existential's), a time or frequency adverb, an
    adjective of the object or of a noun subject."""
    options = []
    if c.pp is not None and c.kind not in ("there",) and c.verb is not None and c.verb.kind != "motion":
        options.append(lambda: replace(c, pp=None))
    if c.time is not None:
        options.append(lambda: replace(c, time=None))
    if c.freq is not None:
        options.append(lambda: replace(c, freq=None))
    if c.obj is not None and c.obj.adj is not None:
        options.append(lambda: replace(c, obj=replace(c.obj, adj=None)))
    if c.subj is not None and c.subj.kind == "noun" and c.subj.adj is not None:
        options.append(lambda: replace(c, subj=replace(c.subj, adj=None)))
    return options


def _noun_swaps(c: Clause, rng: random.Random) -> list:
    """The ways to translate the subject's or object's noun as another noun (mass for mass, count for count)."""
    options = []
    for role in ("subj", "obj"):
        np_ = getattr(c, role)
        if np_ is not None and np_.kind == "noun":
            others = [n for n in L.NOUNS if n.fr != np_.noun.fr and ("mass" in n.tags) == ("mass" in np_.noun.tags)]
            if others:
                options.append(lambda np_=np_, role=role, others=others: replace(
                    c, **{role: replace(np_, noun=(o := rng.choice(others)), gender=o.gender, adj=None)}))
    return options


def _substitutions(c: Clause, rng: random.Random) -> list:
    """The ways to translate one content word of ``c`` as another word of its class (each a function drawing
    the other word from ``rng`` when called); only words that have another of their class are candidates (a
    rare verb kind may have a single member)."""
    options = _noun_swaps(c, rng)
    if c.verb is not None:
        others = [v for v in L.VERBS if v.kind == c.verb.kind and v.fr != c.verb.fr]
        if others:
            options.append(lambda others=others: replace(c, verb=rng.choice(others)))
    if c.adj is not None:
        others = [a for a in L.ADJECTIVES if a.m != c.adj.m]
        if others:
            options.append(lambda others=others: replace(c, adj=rng.choice(others)))
    return options


def _loosen(c: Clause, rng: random.Random, kind: str) -> tuple[Clause, str]:
    """A loose French rendering of ``c``: one word swapped for another of its class, or one phrase omitted.

    :returns: the changed clause and the kind of change made ("substitution" when an omission
        was asked for but the clause has nothing optional to leave out).
    """
    if kind == "omission":
        options = _omissions(c)
        if options:
            return rng.choice(options)(), "omission"
    options = _substitutions(c, rng)
    if not options:  # nothing to swap: the caller sees an unchanged sentence and keeps the pair clean
        return c, "substitution"
    return rng.choice(options)(), "substitution"


def _noisy(pairs: list[tuple[Clause, Pair]], rng: random.Random, noise_rate: float) -> list[Pair]:
    out: list[Pair] = []
    kinds, shares = zip(*NOISE_SHARES.items())
    for i, (clause, pair) in enumerate(pairs):
        if rng.random() >= noise_rate:
            out.append(pair)
            continue
        kind = rng.choices(kinds, shares)[0]
        if kind == "misaligned":
            j = rng.randrange(len(pairs) - 1)
            j += j >= i
            fr = pairs[j][1].fr
        else:
            loose, kind = _loosen(clause, rng, kind)
            fr = realize_fr(loose)
        if fr == pair.fr:  # an omission or swap that changed nothing is no noise
            out.append(pair)
            continue
        out.append(Pair(pair.en, fr, kind))
    return out


# ----------------------------------------------------------------------------- corpus

def generate_splits(n_train: int, n_dev: int, n_test: int, seed: int = 1,
                    noise_rate: float = 0.04) -> dict[str, list[Pair]]:
    """The three splits as lists of pairs; no English sentence occurs in two splits (or twice).

    Noise (at ``noise_rate``, each train pair independently) is applied to the train split only.
    """
    if min(n_train, n_dev, n_test) < 0 or not 0.0 <= noise_rate <= 1.0:
        raise PhraseRescoreError(f"bad demo corpus sizes or noise rate: train={n_train} dev={n_dev} "
                                 f"test={n_test} noise_rate={noise_rate} (expected sizes >= 0, 0 <= rate <= 1)")
    total = n_train + n_dev + n_test
    rng = random.Random(seed)
    seen: set[str] = set()
    drawn: list[tuple[Clause, Pair]] = []
    attempts = 0
    while len(drawn) < total:
        attempts += 1
        if attempts > 20 * total + 1000:
            raise PhraseRescoreError(f"the demo grammar cannot make {total} distinct sentences "
                                     f"(got {len(drawn)}); ask for fewer")
        c = sample_clause(rng)
        en = realize_en(c)
        if en in seen:
            continue
        seen.add(en)
        drawn.append((c, Pair(en, realize_fr(c))))
    test, dev, train = drawn[:n_test], drawn[n_test:n_test + n_dev], drawn[n_test + n_dev:]
    noise_rng = random.Random(f"{seed}-noise")
    return {"train": _noisy(train, noise_rng, noise_rate) if train else [],
            "dev": [p for _, p in dev], "test": [p for _, p in test]}


def _file_names() -> list[str]:
    return [f"{s}.{lang}" for s in SPLITS for lang in ("en", "fr")]


def generate(out_dir: str | os.PathLike, n_train: int = 10000, n_dev: int = 500, n_test: int = 500,
             seed: int = 1, noise_rate: float = 0.04) -> dict[str, Path]:
    """Write the demo corpus into ``out_dir`` unless an identical one is already there.

    :returns: the paths of ``train.en train.fr dev.en dev.fr test.en test.fr`` by file name, plus
        ``"manifest"`` (demo-data.json: the parameters, generator version, noise counts, file hashes).
    """
    out = Path(out_dir)
    params = {"generator_version": GENERATOR_VERSION, "n_train": n_train, "n_dev": n_dev,
              "n_test": n_test, "seed": seed, "noise_rate": noise_rate}
    paths = {name: out / name for name in _file_names()}
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        try:
            old = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            old = {}
        if old.get("params") == params and all(
                p.exists() and sha256_file(p) == old.get("sha256", {}).get(name) for name, p in paths.items()):
            return {**paths, "manifest": manifest_path}
    splits = generate_splits(n_train, n_dev, n_test, seed, noise_rate)
    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        for lang in ("en", "fr"):
            with atomic_open(paths[f"{split}.{lang}"], "w") as f:
                for p in pairs:
                    f.write(getattr(p, lang) + "\n")
    noise = {k: sum(p.noise == k for p in splits["train"]) for k in NOISE_KINDS}
    manifest = {"params": params, "noise_counts": noise,
                "sha256": {name: sha256_file(p) for name, p in paths.items()}}
    with atomic_open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return {**paths, "manifest": manifest_path}
