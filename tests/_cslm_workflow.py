"""The smallest workflow of the +CSLM rows of Table 1 (train-cslm and evaluate over the tiny system)."""
from __future__ import annotations

from pathlib import Path

TABLE1 = """
[workflow]
name = "cslm-rows"
stages = ["train-cslm", "evaluate"]

[common]
backend = "embedded"
threads = 1

[train-cslm]
emb_dim = 4
hidden1 = 8
hidden2 = 8
max_steps = 20
valid_every = 10

[evaluate]
target_lang = "none"
bootstrap_samples = 20
nbest_size = 5
rerank_restarts = 2
"""


def cslm_rows_workflow(tmp_path: Path, max_steps: int = 20, evaluate_extra: str = "") -> Path:
    """A workflow file of train-cslm and evaluate over the tiny system, every tuned ini its own: the
    +CSLM rows' smallest run."""
    from _tiny_smt import make_tiny_system

    sys_ = make_tiny_system(tmp_path / "smt")
    (tmp_path / "corpus").write_text("the house is small\nthe house\nhouse is small\nthe small house\n" * 5)
    ins = {"tuned_baseline": sys_["ini"], "tuned_rnn": sys_["ini"], "tuned_rnn_wp": sys_["ini"],
           "train_tgt_tok": tmp_path / "corpus", "lm": tmp_path / "smt" / "lm.arpa", "dev_src_tok": sys_["src"],
           "phrase_table": tmp_path / "smt" / "phrase-table",
           "dev_ref_tok": sys_["ref"], "dev_ref": sys_["ref"], "test_src_tok": sys_["src"], "test_ref": sys_["ref"]}
    wf = tmp_path / "wf.toml"
    text = TABLE1.replace("max_steps = 20", f"max_steps = {max_steps}") + evaluate_extra
    wf.write_text(text + "\n[inputs]\n" + "".join(f'{k} = "{v}"\n' for k, v in ins.items()))
    return wf
