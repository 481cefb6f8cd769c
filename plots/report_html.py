"""``report.html``: Table 1 (the Markdown report ``evaluate`` writes, converted), its hashes and signatures,
and the pictures, in one self-contained page: the images are embedded as ``data:`` URIs and the style is
inline, so the page needs nothing but itself and opens in any browser, offline.

The Markdown converted is the subset the report uses: ``#`` headings, pipe tables (with their alignment
row), ``-`` lists, paragraphs, `` `code` `` and ``**bold**``; anything else is kept as escaped text.
"""
from __future__ import annotations

import base64
import html
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError

#: the background of table header cells (a browser test looks for it in a screenshot)
HEADER_BG = "#1f4e79"
STYLE = f"""
body {{ font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #1a1a1a; background: #ffffff; line-height: 1.4; padding: 0 1em; }}
h1 {{ font-size: 1.6em; margin-bottom: 0.2em; }}
h2 {{ font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #cccccc; }}
table {{ border-collapse: collapse; margin: 0.8em 0; }}
th {{ background: {HEADER_BG}; color: #ffffff; padding: 0.35em 0.8em; text-align: left; }}
td {{ border-bottom: 1px solid #d0d0d0; padding: 0.3em 0.8em; }}
td.num, th.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
code {{ font-family: "DejaVu Sans Mono", monospace; font-size: 0.85em; word-break: break-all; }}
figure {{ margin: 1.2em 0; }}
figure img {{ max-width: 100%; height: auto; border: 1px solid #dddddd; }}
figcaption {{ font-size: 0.9em; color: #444444; }}
"""


@dataclass
class Picture:
    """One embedded PNG: a caption and the file."""

    caption: str
    path: Path


def _inline(text: str) -> str:
    """Escape ``text``, then `code` and **bold**."""
    parts = text.split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 1 and i < len(parts) - 1:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            esc = html.escape(part if i % 2 == 0 else "`" + part)
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", esc))
    return "".join(out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


_ALIGN = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def markdown_to_html(md: str) -> str:
    """The report's Markdown as HTML (see the module's docstring for the subset)."""
    lines = md.splitlines()
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush():
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
        elif stripped.startswith("#"):
            flush()
            level = min(len(stripped) - len(stripped.lstrip("#")), 6)
            out.append(f"<h{level + 1}>{_inline(stripped[level:].strip())}</h{level + 1}>")
            i += 1
        elif stripped.startswith("|") and i + 1 < len(lines) and _ALIGN.match(lines[i + 1].strip()):
            flush()
            head = _cells(stripped)
            numeric = [c.endswith(":") and not c.startswith(":") for c in _cells(lines[i + 1])]
            numeric += [False] * (len(head) - len(numeric))
            cls = [' class="num"' if n else "" for n in numeric]
            out.append("<table>")
            out.append("<thead><tr>" + "".join(f"<th{cls[j]}>{_inline(c)}</th>" for j, c in enumerate(head))
                       + "</tr></thead>")
            out.append("<tbody>")
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                row = _cells(lines[i])
                row += [""] * (len(head) - len(row))
                out.append("<tr>" + "".join(f"<td{cls[j] if j < len(cls) else ''}>{_inline(c)}</td>"
                                            for j, c in enumerate(row)) + "</tr>")
                i += 1
            out.append("</tbody></table>")
        elif stripped.startswith("- "):
            flush()
            out.append("<ul>")
            while i < len(lines) and lines[i].strip().startswith("- "):
                out.append("<li>" + _inline(lines[i].strip()[2:]) + "</li>")
                i += 1
            out.append("</ul>")
        else:
            para.append(stripped)
            i += 1
    flush()
    return "\n".join(out)


def png_size(data: bytes, origin: str | os.PathLike = "<png>") -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise PhraseRescoreError("not a PNG file: expected the PNG signature and an IHDR chunk", origin)
    return struct.unpack(">II", data[16:24])


def report_page(title: str, markdown: str, pictures: Sequence[Picture], intro: str = "") -> str:
    """The whole page as text: ``title``, ``intro``, the converted ``markdown``, then each picture embedded."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    if intro:
        body.append(f"<p>{_inline(intro)}</p>")
    body.append('<section id="table1">')
    body.append(markdown_to_html(markdown))
    body.append("</section>")
    if pictures:
        body.append('<section id="pictures">')
        body.append("<h2>Pictures</h2>")
        for k, pic in enumerate(pictures, start=1):
            data = Path(pic.path).read_bytes()
            w, h = png_size(data, pic.path)
            uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
            body.append(f'<figure id="figure-{k}"><img src="{uri}" width="{w}" height="{h}" '
                        f'alt="{html.escape(pic.caption)}">'
                        f"<figcaption>Figure {k}. {_inline(pic.caption)} ({html.escape(Path(pic.path).name)}, "
                        f"{w}&times;{h})</figcaption></figure>")
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def write_report(markdown_path: str | os.PathLike, pictures: Sequence[Picture], out_html: str | os.PathLike,
                 title: str = "phrase-rescore: Table 1", intro: str = "") -> int:
    """Write :func:`report_page` of the Markdown report at ``markdown_path`` to ``out_html``; returns its bytes."""
    try:
        md = Path(markdown_path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PhraseRescoreError("report file not found", markdown_path) from None
    except UnicodeDecodeError as e:
        raise PhraseRescoreError(f"invalid UTF-8 ({e.reason}): expected the Markdown report", markdown_path) from None
    for pic in pictures:
        if not Path(pic.path).is_file():
            raise PhraseRescoreError("picture not found", pic.path)
    data = report_page(title, md, pictures, intro).encode("utf-8")
    with atomic_open(out_html, "wb") as f:
        f.write(data)
    return len(data)
