"""The static report: the dashboard page with its script, style and the whole run's data
inlined, so one HTML file shows the same plots with no server and no network."""
from __future__ import annotations

import os

from .server import SCRIPT_TAG, data_block, static_file

__all__ = ["render_report", "write_report"]

STYLE_TAG = '<link rel="stylesheet" href="static/style.css">'


def render_report(state: dict) -> str:
    """The report's HTML for ``state`` (:meth:`Dashboard.state` with the full history)."""
    page = static_file("index.html").decode()
    style = static_file("style.css").decode()
    script = static_file("app.js").decode()
    if STYLE_TAG not in page or SCRIPT_TAG not in page:
        raise RuntimeError("dashboard page template lacks its style or script tag")
    page = page.replace(STYLE_TAG, f"<style>\n{style}</style>")
    return page.replace(SCRIPT_TAG, f'{data_block(state, "pyfw-data")}\n'
                                    f'<script>\n{script}</script>')


def write_report(state: dict, path: str) -> str:
    """Write the report atomically (a reader never sees half a file); returns ``path``."""
    html = render_report(state)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(html)
    os.replace(tmp, path)
    return path
