"""The Moses side: its formats and conventions (phrase table, moses.ini, n-best, numbers), a real Moses, the embedded toolkit.

Imports the core only, never torch, the neural side (pipeline) or the application (app).
"""

if __name__ != "phrase_rescore.moses_integration":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.moses_integration: import it under that name")
