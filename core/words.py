"""Words as Moses sees them: tokens separated by runs of spaces and tabs.

Moses splits a phrase, an input sentence and an n-best hypothesis into words with ``Tokenize``
(``moses/Util.h``), whose delimiters are ``" \\t"``; every other character is part of a word, the other
Unicode spaces included (no-break space, U+2028, U+3000, ...). Python's ``str.split()`` and pyarrow's
``utf8_split_whitespace`` split at those too, so a phrase ``a\\u00a0b`` would be two words here and one
in Moses: its unknown-word count and its neural score would belong to another phrase than the one Moses
decodes with. Every reader of tokenized text splits with :func:`words` (or, vectorised, with
:data:`SEPARATOR_PATTERN`).
"""
from __future__ import annotations

import re

#: Moses's word delimiters (``Tokenize``'s default)
SEPARATORS = " \t"
#: a run of them, as a regular expression (for pyarrow's ``split_pattern_regex``)
SEPARATOR_PATTERN = "[ \t]+"

_SEPARATOR_RUN = re.compile(SEPARATOR_PATTERN)


def words(text: str) -> list[str]:
    """The words of ``text`` as Moses reads them: split at runs of spaces and tabs, none empty."""
    return [w for w in _SEPARATOR_RUN.split(text) if w]
