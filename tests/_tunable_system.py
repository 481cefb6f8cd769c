"""A small system MERT can improve: each source word has a right and a wrong translation, and the start
weights prefer the wrong one."""


N_WORDS = 12


def write_tunable_system(d, rng):
    """Each source word sI has a right translation gI (the reference's) and a wrong one bI.
    Column 1 prefers the wrong one, column 3 the right one; the start weights trust column 1."""
    lines = []
    for i in range(N_WORDS):
        lines.append(f"s{i} ||| b{i} ||| 0.6 0.5 0.3 0.5 ||| 0-0 ||| 1 1 1")
        lines.append(f"s{i} ||| g{i} ||| 0.4 0.5 0.7 0.5 ||| 0-0 ||| 1 1 1")
    (d / "phrase-table").write_text("\n".join(lines) + "\n")
    words = [f"{p}{i}" for p in "bg" for i in range(N_WORDS)]
    arpa = ["\\data\\", f"ngram 1={len(words) + 3}", "ngram 2=1", "", "\\1-grams:", "-1.0\t<unk>", "-99\t<s>\t0", "-1.0\t</s>"]
    arpa += [f"-1.5\t{w}\t0" for w in words]
    arpa += ["", "\\2-grams:", "-1.5\t<s> b0", "", "\\end\\", ""]   # kenlm needs a bigram; this one is neutral
    (d / "lm.arpa").write_text("\n".join(arpa))
    (d / "moses.ini").write_text(
        "# generated for a test\n[distortion-limit]\n0\n\n[feature]\nUnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={d / 'phrase-table'} "
        "input-factor=0 output-factor=0\nDistortion\n"
        f"KENLM name=LM0 factor=0 path={d / 'lm.arpa'} order=2\n\n[weight]\nUnknownWordPenalty0= 1\n"
        "WordPenalty0= -1\nPhrasePenalty0= 0.2\nTranslationModel0= 0.5 0.1 0.05 0.1\nDistortion0= 0.3\nLM0= 0.5\n")
    src, ref = [], []
    for _ in range(30):
        ids = rng.integers(0, N_WORDS, rng.integers(4, 8))
        src.append(" ".join(f"s{i}" for i in ids))
        ref.append(" ".join(f"g{i}" for i in ids))
    (d / "dev.src").write_text("\n".join(src) + "\n")
    (d / "dev.ref").write_text("\n".join(ref) + "\n")
    return ref
