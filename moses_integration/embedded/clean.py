"""Corpus cleaning with the rules of Moses's ``clean-corpus-n.perl`` (min 1, max 80, ratio 9).

For each sentence pair, in this order (as the Perl script):

1. ``|`` characters are deleted from both sides (the corpus is not factored; Moses reads ``|`` as a
   factor separator). Tokens that were only ``|`` disappear. Such pairs are counted, not dropped.
2. the pair is dropped when either side is empty,
3. or has more than ``max_len`` (or fewer than ``min_len``) tokens,
4. or the token-count ratio in either direction exceeds ``ratio``.

Every dropped pair is counted by reason, and the 1-based input line numbers of the kept pairs are
returned (Moses's optional "lines retained" file), so nothing is lost silently.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence


@dataclass
class CleanConfig:
    """clean-corpus-n.perl's settings as train-model.perl's baseline uses them."""

    min_len: int = 1
    max_len: int = 80
    ratio: float = 9.0


@dataclass
class CleanStats:
    """How many pairs were read, kept, and dropped for each reason."""

    input_pairs: int = 0
    kept: int = 0
    dropped_empty: int = 0
    dropped_too_long: int = 0
    dropped_too_short: int = 0
    dropped_ratio: int = 0
    pairs_with_pipes_removed: int = 0
    kept_line_numbers: list[int] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        """One line for the CLI."""
        return (f"clean: {self.input_pairs} pairs in, {self.kept} kept; dropped {self.dropped_empty} empty, "
                f"{self.dropped_too_long} too long, {self.dropped_too_short} too short, "
                f"{self.dropped_ratio} over the length ratio; '|' removed in {self.pairs_with_pipes_removed}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("kept_line_numbers")
        return d


def strip_pipes(tokens: Sequence[str]) -> tuple[list[str], bool]:
    """``tokens`` with every ``|`` deleted and the tokens left empty dropped (Moses reads ``|`` as a
    factor separator), and whether anything changed: the rule for every corpus the system sees."""
    if not any("|" in t for t in tokens):
        return list(tokens), False
    out = [t.replace("|", "") for t in tokens]
    return [t for t in out if t], True


def clean_pairs(src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]],
                config: CleanConfig | None = None) -> tuple[list[list[str]], list[list[str]], CleanStats]:
    """Filter tokenized sentence pairs with clean-corpus-n.perl's rules.

    :param src: tokenized source sentences.
    :param tgt: tokenized target sentences, same length as ``src``.
    :returns: (kept source sentences, kept target sentences, statistics incl. kept line numbers).
    """
    config = config or CleanConfig()
    assert len(src) == len(tgt), (len(src), len(tgt))
    stats = CleanStats(input_pairs=len(src))
    out_s: list[list[str]] = []
    out_t: list[list[str]] = []
    for line_no, (s, t) in enumerate(zip(src, tgt), start=1):
        s, s_changed = strip_pipes(s)
        t, t_changed = strip_pipes(t)
        if s_changed or t_changed:
            stats.pairs_with_pipes_removed += 1
        ns, nt = len(s), len(t)
        if ns == 0 or nt == 0:
            stats.dropped_empty += 1
        elif ns > config.max_len or nt > config.max_len:
            stats.dropped_too_long += 1
        elif ns < config.min_len or nt < config.min_len:
            stats.dropped_too_short += 1
        elif nt / ns > config.ratio or ns / nt > config.ratio:
            stats.dropped_ratio += 1
        else:
            out_s.append(s)
            out_t.append(t)
            stats.kept_line_numbers.append(line_no)
    stats.kept = len(out_s)
    return out_s, out_t, stats
