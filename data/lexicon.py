"""The hand-written English-French lexicon of the demo corpus generator.

Nouns, adjectives and verbs with every inflected form the grammar in :mod:`phrase_rescore.data.demo_corpus`
needs: English singular/plural and present/3rd-person/past forms; French gender, plural,
the four adjective forms (plus the masculine pre-vowel form of beau/nouveau/vieux), the present
tense of every person, the future stem, the past participle and the auxiliary (avoir or être).
Regular French forms are derived by rule; irregular ones are written out.

Semantic tags keep sentences sensible: a verb names the tags its subject and object may have,
an adjective the tags of the nouns it may describe.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Tags: person, animal, food, drink, place, thing, text, vehicle, openable, mass (a mass noun
# takes the partitive: "some bread" -> "du pain"), building, surface (on/under make sense), song.

VOWELS = set("aeiouyàâäéèêëîïôöûùüœæ")
H_ASPIRE: frozenset[str] = frozenset()  # no aspirated-h word is in the lexicon; listed for the elision rule


def fr_vowel_initial(word: str) -> bool:
    """True when a French word starts with a vowel sound (so le/la/de/ne/je/que elide before it)."""
    w = word.lower()
    return bool(w) and (w[0] in VOWELS or (w[0] == "h" and w not in H_ASPIRE))


def _en_plural(w: str) -> str:
    if w.endswith("y") and w[-2] not in "aeiou":
        return w[:-1] + "ies"
    if w.endswith(("s", "sh", "ch", "x")):
        return w + "es"
    return w + "s"


def _fr_plural(w: str) -> str:
    if w.endswith(("s", "x", "z")):
        return w
    if w.endswith(("eau", "eu")):
        return w + "x"
    if w.endswith("al"):
        return w[:-2] + "aux"
    return w + "s"


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str  # "m" or "f"
    tags: frozenset[str]


def N(en: str, fr: str, gender: str, tags: str, en_pl: str | None = None, fr_pl: str | None = None) -> Noun:
    return Noun(en, en_pl or _en_plural(en), fr, fr_pl or _fr_plural(fr), gender, frozenset(tags.split()))


NOUNS: list[Noun] = [
    # people
    N("man", "homme", "m", "person", en_pl="men"),
    N("woman", "femme", "f", "person", en_pl="women"),
    N("child", "enfant", "m", "person", en_pl="children"),
    N("boy", "garçon", "m", "person"),
    N("girl", "fille", "f", "person"),
    N("teacher", "professeur", "m", "person"),
    N("student", "étudiant", "m", "person"),
    N("student", "étudiante", "f", "person"),
    N("doctor", "médecin", "m", "person"),
    N("friend", "ami", "m", "person"),
    N("friend", "amie", "f", "person"),
    N("neighbour", "voisin", "m", "person"),
    N("neighbour", "voisine", "f", "person"),
    N("brother", "frère", "m", "person"),
    N("sister", "sœur", "f", "person"),
    N("father", "père", "m", "person"),
    N("mother", "mère", "f", "person"),
    N("son", "fils", "m", "person"),
    N("daughter", "fille", "f", "person"),
    N("grandmother", "grand-mère", "f", "person", fr_pl="grands-mères"),
    N("grandfather", "grand-père", "m", "person", fr_pl="grands-pères"),
    N("baker", "boulanger", "m", "person"),
    N("cook", "cuisinier", "m", "person"),
    N("farmer", "fermier", "m", "person"),
    N("king", "roi", "m", "person"),
    N("queen", "reine", "f", "person"),
    N("writer", "écrivain", "m", "person"),
    N("driver", "chauffeur", "m", "person"),
    N("singer", "chanteuse", "f", "person"),
    N("lawyer", "avocat", "m", "person"),
    N("nurse", "infirmière", "f", "person"),
    N("waiter", "serveur", "m", "person"),
    N("actor", "acteur", "m", "person"),
    N("actress", "actrice", "f", "person"),
    # animals
    N("dog", "chien", "m", "animal"),
    N("cat", "chat", "m", "animal"),
    N("bird", "oiseau", "m", "animal"),
    N("horse", "cheval", "m", "animal"),
    N("cow", "vache", "f", "animal"),
    N("mouse", "souris", "f", "animal", en_pl="mice"),
    N("rabbit", "lapin", "m", "animal"),
    N("sheep", "mouton", "m", "animal", en_pl="sheep"),
    N("pig", "cochon", "m", "animal"),
    N("duck", "canard", "m", "animal"),
    N("hen", "poule", "f", "animal"),
    N("lion", "lion", "m", "animal"),
    N("bear", "ours", "m", "animal"),
    N("wolf", "loup", "m", "animal", en_pl="wolves"),
    N("fox", "renard", "m", "animal"),
    N("elephant", "éléphant", "m", "animal"),
    N("goat", "chèvre", "f", "animal"),
    # food and drink
    N("bread", "pain", "m", "food mass"),
    N("cheese", "fromage", "m", "food mass"),
    N("apple", "pomme", "f", "food"),
    N("cake", "gâteau", "m", "food"),
    N("soup", "soupe", "f", "food mass"),
    N("meat", "viande", "f", "food mass"),
    N("egg", "œuf", "m", "food"),
    N("rice", "riz", "m", "food mass"),
    N("fish", "poisson", "m", "food animal", en_pl="fish"),
    N("chocolate", "chocolat", "m", "food mass"),
    N("tomato", "tomate", "f", "food", en_pl="tomatoes"),
    N("potato", "pomme de terre", "f", "food", en_pl="potatoes", fr_pl="pommes de terre"),
    N("carrot", "carotte", "f", "food"),
    N("orange", "orange", "f", "food"),
    N("strawberry", "fraise", "f", "food"),
    N("salad", "salade", "f", "food"),
    N("pie", "tarte", "f", "food"),
    N("water", "eau", "f", "drink mass"),
    N("milk", "lait", "m", "drink mass"),
    N("coffee", "café", "m", "drink mass"),
    N("tea", "thé", "m", "drink mass"),
    N("wine", "vin", "m", "drink mass"),
    N("juice", "jus", "m", "drink mass"),
    N("beer", "bière", "f", "drink mass"),
    # places
    N("house", "maison", "f", "place building"),
    N("school", "école", "f", "place building"),
    N("market", "marché", "m", "place"),
    N("garden", "jardin", "m", "place"),
    N("park", "parc", "m", "place"),
    N("station", "gare", "f", "place building"),
    N("church", "église", "f", "place building"),
    N("hospital", "hôpital", "m", "place building"),
    N("library", "bibliothèque", "f", "place building"),
    N("city", "ville", "f", "place"),
    N("village", "village", "m", "place"),
    N("beach", "plage", "f", "place"),
    N("forest", "forêt", "f", "place"),
    N("river", "rivière", "f", "place"),
    N("mountain", "montagne", "f", "place"),
    N("restaurant", "restaurant", "m", "place building"),
    N("shop", "magasin", "m", "place building"),
    N("office", "bureau", "m", "place building"),
    N("kitchen", "cuisine", "f", "place"),
    N("street", "rue", "f", "place"),
    N("bank", "banque", "f", "place building"),
    N("museum", "musée", "m", "place building"),
    N("hotel", "hôtel", "m", "place building"),
    N("cinema", "cinéma", "m", "place building"),
    N("farm", "ferme", "f", "place building"),
    N("bakery", "boulangerie", "f", "place building"),
    N("airport", "aéroport", "m", "place building"),
    N("island", "île", "f", "place"),
    N("lake", "lac", "m", "place"),
    N("field", "champ", "m", "place"),
    N("bridge", "pont", "m", "place building"),
    N("castle", "château", "m", "place building"),
    N("room", "chambre", "f", "place"),
    # things
    N("book", "livre", "m", "thing text openable"),
    N("letter", "lettre", "f", "thing text openable"),
    N("newspaper", "journal", "m", "thing text"),
    N("story", "histoire", "f", "text"),
    N("car", "voiture", "f", "vehicle thing openable"),
    N("bike", "vélo", "m", "vehicle thing"),
    N("train", "train", "m", "vehicle"),
    N("bus", "bus", "m", "vehicle", en_pl="buses"),
    N("boat", "bateau", "m", "vehicle thing"),
    N("table", "table", "f", "thing surface"),
    N("chair", "chaise", "f", "thing surface"),
    N("door", "porte", "f", "thing openable"),
    N("window", "fenêtre", "f", "thing openable"),
    N("key", "clé", "f", "thing"),
    N("bag", "sac", "m", "thing openable"),
    N("hat", "chapeau", "m", "thing"),
    N("shirt", "chemise", "f", "thing"),
    N("shoe", "chaussure", "f", "thing"),
    N("dress", "robe", "f", "thing"),
    N("phone", "téléphone", "m", "thing"),
    N("computer", "ordinateur", "m", "thing"),
    N("photo", "photo", "f", "thing"),
    N("flower", "fleur", "f", "thing"),
    N("tree", "arbre", "m", "thing"),
    N("ball", "ballon", "m", "thing"),
    N("glass", "verre", "m", "thing"),
    N("cup", "tasse", "f", "thing"),
    N("plate", "assiette", "f", "thing"),
    N("knife", "couteau", "m", "thing", en_pl="knives"),
    N("box", "boîte", "f", "thing openable"),
    N("gift", "cadeau", "m", "thing openable"),
    N("map", "carte", "f", "thing text"),
    N("clock", "horloge", "f", "thing"),
    N("bed", "lit", "m", "thing surface"),
    N("lamp", "lampe", "f", "thing"),
    N("pen", "stylo", "m", "thing"),
    N("ticket", "billet", "m", "thing"),
    N("song", "chanson", "f", "text song"),
    N("umbrella", "parapluie", "m", "thing openable"),
    N("watch", "montre", "f", "thing"),
    N("coat", "manteau", "m", "thing"),
    N("ring", "bague", "f", "thing"),
    N("picture", "tableau", "m", "thing"),
]

# Proper names: the same word on both sides, with a gender for agreement.
NAMES: list[tuple[str, str]] = [
    ("Marie", "f"), ("Paul", "m"), ("Pierre", "m"), ("Sophie", "f"), ("Julien", "m"),
    ("Claire", "f"), ("Thomas", "m"), ("Anne", "f"), ("Luc", "m"), ("Emma", "f"),
    ("Hugo", "m"), ("Léa", "f"), ("Louis", "m"), ("Chloé", "f"),
]


@dataclass(frozen=True)
class Adjective:
    en: str
    m: str
    f: str
    m_pl: str
    f_pl: str
    prenominal: bool  # French position: before the noun (grand, petit, bon, ...) or after
    m_vowel: str  # masculine singular before a vowel: bel, nouvel, vieil (else = m)
    tags: frozenset[str]  # the noun tags it may describe


_ANY = "person animal food drink place thing text vehicle"


def A(en: str, m: str, tags: str = _ANY, f: str | None = None, m_pl: str | None = None,
      f_pl: str | None = None, pre: bool = False, m_vowel: str | None = None) -> Adjective:
    f = f or (m if m.endswith("e") else m + "e")
    m_pl = m_pl or (m if m.endswith(("s", "x")) else m + "s")
    f_pl = f_pl or f + "s"
    return Adjective(en, m, f, m_pl, f_pl, pre, m_vowel or m, frozenset(tags.split()))


ADJECTIVES: list[Adjective] = [
    A("big", "grand", "person animal place thing vehicle", pre=True),
    A("small", "petit", "person animal place thing vehicle food", pre=True),
    A("good", "bon", "person food drink text", f="bonne", pre=True),
    A("new", "nouveau", "place thing text vehicle", f="nouvelle", m_pl="nouveaux", pre=True, m_vowel="nouvel"),
    A("old", "vieux", "person animal place thing vehicle", f="vieille", m_pl="vieux", pre=True, m_vowel="vieil"),
    A("beautiful", "beau", "person animal place thing", f="belle", m_pl="beaux", pre=True, m_vowel="bel"),
    A("young", "jeune", "person animal", pre=True),
    A("pretty", "joli", "person animal place thing", pre=True),
    A("bad", "mauvais", "food drink text", pre=True),
    A("long", "long", "text thing place", f="longue", pre=True),
    A("red", "rouge", "thing vehicle food"),
    A("blue", "bleu", "thing vehicle"),
    A("green", "vert", "thing vehicle food"),
    A("black", "noir", "thing vehicle animal"),
    A("white", "blanc", "thing vehicle animal", f="blanche"),
    A("yellow", "jaune", "thing vehicle food"),
    A("grey", "gris", "thing vehicle animal", f="grise"),
    A("brown", "brun", "thing animal"),
    A("happy", "heureux", "person animal", f="heureuse"),
    A("sad", "triste", "person animal text"),
    A("tired", "fatigué", "person animal"),
    A("sick", "malade", "person animal"),
    A("rich", "riche", "person"),
    A("poor", "pauvre", "person"),
    A("clever", "intelligent", "person animal"),
    A("kind", "gentil", "person animal", f="gentille"),
    A("funny", "drôle", "person animal text"),
    A("calm", "calme", "person animal place"),
    A("brave", "courageux", "person", f="courageuse"),
    A("shy", "timide", "person animal"),
    A("famous", "célèbre", "person place text"),
    A("busy", "occupé", "person place"),
    A("hot", "chaud", "food drink"),
    A("cold", "froid", "food drink"),
    A("delicious", "délicieux", "food drink", f="délicieuse"),
    A("fresh", "frais", "food drink", f="fraîche"),
    A("sweet", "sucré", "food drink"),
    A("expensive", "cher", "thing vehicle food drink", f="chère"),
    A("heavy", "lourd", "thing"),
    A("light", "léger", "thing", f="légère"),
    A("empty", "vide", "thing place"),
    A("clean", "propre", "thing place vehicle"),
    A("dirty", "sale", "thing place vehicle animal"),
    A("quiet", "tranquille", "place person animal"),
    A("modern", "moderne", "place thing vehicle"),
    A("dark", "sombre", "place thing"),
    A("round", "rond", "thing"),
    A("broken", "cassé", "thing vehicle"),
    A("strange", "étrange", "person animal thing text place"),
    A("fast", "rapide", "vehicle animal"),
    A("slow", "lent", "vehicle animal"),
]

FR_PERSONS = ("je", "tu", "il", "nous", "vous", "ils")  # index = grammatical person 0..5
FUTURE_ENDINGS = ("ai", "as", "a", "ons", "ez", "ont")


@dataclass(frozen=True)
class Verb:
    en: str  # base form ("eat")
    en_3sg: str  # "eats"
    en_past: str  # "ate"
    fr: str  # infinitive
    present: tuple[str, ...]  # six persons
    future_stem: str  # "mangera" = future_stem + "a"
    participle: str
    aux: str  # "avoir" or "être"
    kind: str  # "trans", "intrans" or "motion" (takes "to the X" -> "à la X")
    subj: frozenset[str]
    obj: frozenset[str] = field(default_factory=frozenset)
    en_particle: str = ""  # "wait for", "look for": the English preposition after the verb

    def fr_future(self, person: int) -> str:
        return self.future_stem + FUTURE_ENDINGS[person]


def _er_present(inf: str) -> tuple[str, ...]:
    stem = inf[:-2]
    nous = stem + ("e" if stem.endswith("g") else "") + "ons"
    if stem.endswith("c"):
        nous = stem[:-1] + "çons"
    return (stem + "e", stem + "es", stem + "e", nous, stem + "ez", stem + "ent")


def V(en: tuple[str, str, str], fr: str, kind: str, subj: str, obj: str = "", aux: str = "avoir",
      present: str | None = None, future_stem: str | None = None, participle: str | None = None,
      particle: str = "") -> Verb:
    """A verb; French forms are derived for regular -er/-ir(finir)/-re verbs unless given.

    ``present`` is six space-separated forms; ``future_stem`` the stem the future endings attach to.
    """
    if present is not None:
        pres = tuple(present.split())
        assert len(pres) == 6, fr
    elif fr.endswith("er"):
        pres = _er_present(fr)
    elif fr.endswith("ir"):
        s = fr[:-2]
        pres = (s + "is", s + "is", s + "it", s + "issons", s + "issez", s + "issent")
    elif fr.endswith("re"):
        s = fr[:-2]
        pres = (s + "s", s + "s", s, s + "ons", s + "ez", s + "ent")
    else:
        raise ValueError(fr)
    if future_stem is None:
        future_stem = fr[:-1] if fr.endswith("re") else fr
    if participle is None:
        participle = {"er": fr[:-2] + "é", "ir": fr[:-2] + "i", "re": fr[:-2] + "u"}[fr[-2:]]
    return Verb(en[0], en[1], en[2], fr, pres, future_stem, participle, aux, kind,
                frozenset(subj.split()), frozenset(obj.split()), particle)


_ANIM = "person animal"
_THINGS = "thing text vehicle food drink"

VERBS: list[Verb] = [
    # transitive
    V(("eat", "eats", "ate"), "manger", "trans", _ANIM, "food"),
    V(("drink", "drinks", "drank"), "boire", "trans", _ANIM, "drink",
      present="bois bois boit buvons buvez boivent", future_stem="boir", participle="bu"),
    V(("see", "sees", "saw"), "voir", "trans", _ANIM, _ANY,
      present="vois vois voit voyons voyez voient", future_stem="verr", participle="vu"),
    V(("watch", "watches", "watched"), "regarder", "trans", "person", "person animal thing vehicle"),
    V(("buy", "buys", "bought"), "acheter", "trans", "person", _THINGS,
      present="achète achètes achète achetons achetez achètent", future_stem="achèter"),
    V(("sell", "sells", "sold"), "vendre", "trans", "person", _THINGS),
    V(("read", "reads", "read"), "lire", "trans", "person", "text",
      present="lis lis lit lisons lisez lisent", future_stem="lir", participle="lu"),
    V(("write", "writes", "wrote"), "écrire", "trans", "person", "text",
      present="écris écris écrit écrivons écrivez écrivent", future_stem="écrir", participle="écrit"),
    V(("like", "likes", "liked"), "aimer", "trans", _ANIM, _ANY),
    V(("prefer", "prefers", "preferred"), "préférer", "trans", "person", _THINGS,
      present="préfère préfères préfère préférons préférez préfèrent"),
    V(("take", "takes", "took"), "prendre", "trans", "person", "thing text vehicle food",
      present="prends prends prend prenons prenez prennent", future_stem="prendr", participle="pris"),
    V(("find", "finds", "found"), "trouver", "trans", _ANIM, "thing text person animal"),
    V(("open", "opens", "opened"), "ouvrir", "trans", "person", "openable",
      present="ouvre ouvres ouvre ouvrons ouvrez ouvrent", participle="ouvert"),
    V(("close", "closes", "closed"), "fermer", "trans", "person", "openable"),
    V(("carry", "carries", "carried"), "porter", "trans", _ANIM, "thing text food"),
    V(("cook", "cooks", "cooked"), "cuisiner", "trans", "person", "food"),
    V(("prepare", "prepares", "prepared"), "préparer", "trans", "person", "food drink"),
    V(("clean", "cleans", "cleaned"), "nettoyer", "trans", "person", "thing place vehicle",
      present="nettoie nettoies nettoie nettoyons nettoyez nettoient", future_stem="nettoier"),
    V(("visit", "visits", "visited"), "visiter", "trans", "person", "place"),
    V(("know", "knows", "knew"), "connaître", "trans", "person", "person place text",
      present="connais connais connaît connaissons connaissez connaissent", future_stem="connaîtr",
      participle="connu"),
    V(("call", "calls", "called"), "appeler", "trans", "person", "person animal",
      present="appelle appelles appelle appelons appelez appellent", future_stem="appeller"),
    V(("help", "helps", "helped"), "aider", "trans", "person", "person animal"),
    V(("wait", "waits", "waited"), "attendre", "trans", _ANIM, "person vehicle", particle="for"),
    V(("look", "looks", "looked"), "chercher", "trans", _ANIM, "thing text person animal", particle="for"),
    V(("hear", "hears", "heard"), "entendre", "trans", _ANIM, "person animal text"),
    V(("lose", "loses", "lost"), "perdre", "trans", "person", "thing text"),
    V(("want", "wants", "wanted"), "vouloir", "trans", _ANIM, _THINGS,
      present="veux veux veut voulons voulez veulent", future_stem="voudr", participle="voulu"),
    V(("paint", "paints", "painted"), "peindre", "trans", "person", "thing place",
      present="peins peins peint peignons peignez peignent", future_stem="peindr", participle="peint"),
    V(("wash", "washes", "washed"), "laver", "trans", "person", "thing animal vehicle"),
    V(("draw", "draws", "drew"), "dessiner", "trans", "person", _ANY),
    V(("meet", "meets", "met"), "rencontrer", "trans", "person", "person"),
    V(("forget", "forgets", "forgot"), "oublier", "trans", "person", "thing text person"),
    V(("bring", "brings", "brought"), "apporter", "trans", "person", _THINGS),
    V(("finish", "finishes", "finished"), "finir", "trans", "person", "food drink text"),
    V(("choose", "chooses", "chose"), "choisir", "trans", "person", _THINGS),
    V(("fill", "fills", "filled"), "remplir", "trans", "person", "openable"),
    V(("build", "builds", "built"), "construire", "trans", "person", "building",
      present="construis construis construit construisons construisez construisent",
      future_stem="construir", participle="construit"),
    V(("follow", "follows", "followed"), "suivre", "trans", _ANIM, "person animal vehicle",
      present="suis suis suit suivons suivez suivent", future_stem="suivr", participle="suivi"),
    V(("sing", "sings", "sang"), "chanter", "trans", "person", "song"),
    V(("love", "loves", "loved"), "adorer", "trans", _ANIM, _ANY),
    # intransitive
    V(("sleep", "sleeps", "slept"), "dormir", "intrans", _ANIM,
      present="dors dors dort dormons dormez dorment"),
    V(("walk", "walks", "walked"), "marcher", "intrans", _ANIM),
    V(("work", "works", "worked"), "travailler", "intrans", "person"),
    V(("sing", "sings", "sang"), "chanter", "intrans", _ANIM),
    V(("dance", "dances", "danced"), "danser", "intrans", "person"),
    V(("swim", "swims", "swam"), "nager", "intrans", _ANIM),
    V(("laugh", "laughs", "laughed"), "rire", "intrans", "person",
      present="ris ris rit rions riez rient", future_stem="rir", participle="ri"),
    V(("cry", "cries", "cried"), "pleurer", "intrans", "person"),
    V(("play", "plays", "played"), "jouer", "intrans", _ANIM),
    V(("run", "runs", "ran"), "courir", "intrans", _ANIM,
      present="cours cours court courons courez courent", future_stem="courr", participle="couru"),
    V(("wait", "waits", "waited"), "attendre", "intrans", _ANIM),
    V(("eat", "eats", "ate"), "manger", "intrans", _ANIM),
    V(("read", "reads", "read"), "lire", "intrans", "person",
      present="lis lis lit lisons lisez lisent", future_stem="lir", participle="lu"),
    V(("travel", "travels", "travelled"), "voyager", "intrans", "person"),
    V(("fall", "falls", "fell"), "tomber", "intrans", _ANIM, aux="être"),
    V(("stay", "stays", "stayed"), "rester", "intrans", _ANIM, aux="être"),
    V(("leave", "leaves", "left"), "partir", "intrans", "person animal vehicle", aux="être",
      present="pars pars part partons partez partent"),
    # motion: "go to the market" -> "aller au marché"
    V(("go", "goes", "went"), "aller", "motion", _ANIM, aux="être",
      present="vais vas va allons allez vont", future_stem="ir", participle="allé"),
    V(("come", "comes", "came"), "venir", "motion", _ANIM, aux="être",
      present="viens viens vient venons venez viennent", future_stem="viendr", participle="venu"),
    V(("return", "returns", "returned"), "retourner", "motion", _ANIM, aux="être"),
    V(("arrive", "arrives", "arrived"), "arriver", "motion", "person animal vehicle", aux="être"),
]

ETRE_PRESENT = ("suis", "es", "est", "sommes", "êtes", "sont")
ETRE_FUTURE_STEM = "ser"
AVOIR_PRESENT = ("ai", "as", "a", "avons", "avez", "ont")
EN_BE_PRESENT = ("am", "are", "is", "are", "are", "are")
EN_BE_PAST = ("was", "were", "was", "were", "were", "were")
EN_PRONOUNS = ("I", "you", "he", "we", "you", "they")

# Prepositions for a phrase after the verb: (English, French, tags of the noun it takes).
PREPOSITIONS: list[tuple[str, str, str]] = [
    ("in", "dans", "place"),
    ("near", "près de", "place building thing"),
    ("behind", "derrière", "place building thing person"),
    ("in front of", "devant", "place building thing person"),
    ("on", "sur", "surface"),
    ("under", "sous", "surface"),
    ("with", "avec", "person animal"),
    ("without", "sans", "person animal"),
    ("for", "pour", "person"),
    ("at", "à", "building"),
    ("from", "de", "place"),
]

# Time adverbs by tense: (English, French). They go at the end of the sentence on both sides.
TIME_ADVERBS: dict[str, list[tuple[str, str]]] = {
    "present": [("today", "aujourd'hui"), ("now", "maintenant"), ("every day", "tous les jours"),
                ("this evening", "ce soir")],
    "past": [("yesterday", "hier"), ("last week", "la semaine dernière"), ("this morning", "ce matin"),
             ("last year", "l'année dernière")],
    "future": [("tomorrow", "demain"), ("next week", "la semaine prochaine"), ("tonight", "ce soir"),
               ("next year", "l'année prochaine")],
}
# Frequency adverbs: English before the main verb, French after the conjugated verb.
FREQ_ADVERBS: list[tuple[str, str]] = [("often", "souvent"), ("always", "toujours"), ("sometimes", "parfois")]

NUMBERS: list[tuple[str, str]] = [("two", "deux"), ("three", "trois"), ("four", "quatre"), ("five", "cinq")]

# Possessive determiners: English, then French (m sg, f sg, plural).
POSSESSIVES: list[tuple[str, tuple[str, str, str]]] = [
    ("my", ("mon", "ma", "mes")),
    ("your", ("ton", "ta", "tes")),
    ("your", ("votre", "votre", "vos")),
    ("his", ("son", "sa", "ses")),
    ("her", ("son", "sa", "ses")),
    ("our", ("notre", "notre", "nos")),
    ("their", ("leur", "leur", "leurs")),
]


def vocabulary_size() -> tuple[int, int]:
    """Distinct English and French word forms the lexicon can produce (content words only)."""
    en: set[str] = set()
    fr: set[str] = set()
    for n in NOUNS:
        en.update([n.en, n.en_pl])
        fr.update([n.fr, n.fr_pl])
    for a in ADJECTIVES:
        en.add(a.en)
        fr.update([a.m, a.f, a.m_pl, a.f_pl, a.m_vowel])
    for v in VERBS:
        en.update([v.en, v.en_3sg, v.en_past])
        fr.update(v.present)
        fr.update(v.fr_future(p) for p in range(6))
        fr.add(v.participle)
    return len(en), len(fr)
