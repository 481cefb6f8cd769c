"""A toy registry of fast stages (make, double, sum, ...) and its base workflow, for the runner's tests."""
from __future__ import annotations

from pathlib import Path

from phrase_rescore.app.workflow import Registry, StageDef

CALLS: list[str] = []


def _read_ints(p: Path) -> list[int]:
    return [int(x) for x in p.read_text().split()]


def _write_ints(p: Path, xs) -> None:
    p.write_text("".join(f"{x}\n" for x in xs))


def make(ctx):
    CALLS.append("make")
    _write_ints(ctx.output("numbers"), range(1, ctx.params["n"] + 1))
    return {"n": ctx.params["n"]}


def double(ctx):
    CALLS.append("double")
    _write_ints(ctx.output("doubled"), [2 * x for x in _read_ints(ctx.input("numbers"))])


def power(ctx):
    CALLS.append(ctx.stage.name)
    _write_ints(ctx.output(ctx.stage.name), [x ** ctx.params["power"] for x in _read_ints(ctx.input("numbers"))])


def total(ctx):
    CALLS.append("sum")
    xs = _read_ints(ctx.input("doubled")) + _read_ints(ctx.input("squares"))
    if ctx.input("cubes") is not None:
        xs += _read_ints(ctx.input("cubes"))
    if ctx.params["fail"]:
        (ctx.dir / "partial.txt").write_text("half done")
        raise RuntimeError("stage crashed")
    if ctx.resume:
        CALLS.append("sum resumed from " + (ctx.dir / "partial.txt").read_text())
    out = ctx.output("total")
    out.mkdir(exist_ok=True)
    (out / "value.txt").write_text(f"{ctx.params['label']}{sum(xs)}\n")
    return {"sum": sum(xs)}


def registry() -> Registry:
    return Registry([
        StageDef("make", "make", make, {"n": 3}, produces={"numbers": "numbers.txt"}),
        StageDef("double", "double", double, {}, consumes=("numbers",), produces={"doubled": "doubled.txt"}),
        StageDef("squares", "power", power, {"power": 2}, consumes=("numbers",), produces={"squares": "out/sq.txt"}),
        StageDef("cubes", "power", power, {"power": 3}, consumes=("numbers",), produces={"cubes": "cubes.txt"}),
        StageDef("sum", "sum", total, {"label": "", "fail": False},
                 consumes=("doubled", "squares", "cubes"), optional=frozenset({"cubes"}),
                 produces={"total": "total"}, resumable=True),
    ])


BASE = {"workflow": {"name": "t", "stages": ["make", "double", "squares", "sum"]}}
