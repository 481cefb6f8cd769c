"""The application: the click commands (cli), the stage runner (workflow) and the workflow's stages (stages).

The only code that imports across sides (core, moses_integration, pipeline, data); nothing imports it.
"""

if __name__ != "phrase_rescore.app":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.app: import it under that name")
