"""An embedded, Moses-compatible SMT toolkit in Python (no C++ toolchain needed): build, decode, tune.

Imports the core and the rest of the Moses side, never torch, the neural side or the application.

Part 1 (building a system from a parallel corpus), one idea per module:

- :mod:`.tokenizer`      Moses tokenization (sacremoses) and lowercasing / truecasing
- :mod:`.clean`          clean-corpus-n.perl's filtering rules
- :mod:`.align`          eflomal word alignment and grow-diag-final-and symmetrization
- :mod:`.extract`        Moses's consistent phrase-pair extraction
- :mod:`.phrase_scoring` lexical tables and the four phrase-table scores, written as Moses does
- :mod:`.lm`             interpolated modified Kneser-Ney n-gram LM written as ARPA
- :mod:`.build`          ``build_smt``: all of the above, plus moses.ini and a manifest

Part 2 (decoding, MERT, tuning) lives in sibling modules of this package.
"""
