"""A tiny dependency-free bar-chart writer (PNG via zlib + struct, 5x7 bitmap font).

Used by ``bench.run`` when matplotlib is not installed.  It draws one panel per metric,
one bar per agent, with the value printed above each bar.  Text is upper-cased.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

Color = tuple[int, int, int]

WHITE: Color = (255, 255, 255)
BLACK: Color = (30, 30, 30)
GRID: Color = (220, 220, 220)
PALETTE: Sequence[Color] = ((230, 126, 34), (52, 120, 198), (120, 120, 120), (46, 160, 90))

# 5x7 glyphs, one string of 7 rows per character ("#" = ink).
_GLYPH_ROWS: dict[str, str] = {
    " ": ".....|.....|.....|.....|.....|.....|.....",
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.",
    "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####",
    "3": "####.|....#|....#|.###.|....#|....#|####.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.",
    "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.",
    "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.",
    "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "A": ".###.|#...#|#...#|#####|#...#|#...#|#...#",
    "B": "####.|#...#|#...#|####.|#...#|#...#|####.",
    "C": ".###.|#...#|#....|#....|#....|#...#|.###.",
    "D": "###..|#..#.|#...#|#...#|#...#|#..#.|###..",
    "E": "#####|#....|#....|####.|#....|#....|#####",
    "F": "#####|#....|#....|####.|#....|#....|#....",
    "G": ".###.|#...#|#....|#.###|#...#|#...#|.####",
    "H": "#...#|#...#|#...#|#####|#...#|#...#|#...#",
    "I": ".###.|..#..|..#..|..#..|..#..|..#..|.###.",
    "J": "..###|...#.|...#.|...#.|...#.|#..#.|.##..",
    "K": "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#",
    "L": "#....|#....|#....|#....|#....|#....|#####",
    "M": "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#",
    "N": "#...#|#...#|##..#|#.#.#|#..##|#...#|#...#",
    "O": ".###.|#...#|#...#|#...#|#...#|#...#|.###.",
    "P": "####.|#...#|#...#|####.|#....|#....|#....",
    "Q": ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#",
    "R": "####.|#...#|#...#|####.|#.#..|#..#.|#...#",
    "S": ".####|#....|#....|.###.|....#|....#|####.",
    "T": "#####|..#..|..#..|..#..|..#..|..#..|..#..",
    "U": "#...#|#...#|#...#|#...#|#...#|#...#|.###.",
    "V": "#...#|#...#|#...#|#...#|#...#|.#.#.|..#..",
    "W": "#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.",
    "X": "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#",
    "Y": "#...#|#...#|.#.#.|..#..|..#..|..#..|..#..",
    "Z": "#####|....#|...#.|..#..|.#...|#....|#####",
    ".": ".....|.....|.....|.....|.....|.##..|.##..",
    ",": ".....|.....|.....|.....|.##..|..#..|.#...",
    ":": ".....|.##..|.##..|.....|.##..|.##..|.....",
    "/": ".....|....#|...#.|..#..|.#...|#....|.....",
    "-": ".....|.....|.....|#####|.....|.....|.....",
    "_": ".....|.....|.....|.....|.....|.....|#####",
    "%": "##...|##..#|...#.|..#..|.#...|#..##|...##",
    "(": "...#.|..#..|.#...|.#...|.#...|..#..|...#.",
    ")": ".#...|..#..|...#.|...#.|...#.|..#..|.#...",
    "+": ".....|..#..|..#..|#####|..#..|..#..|.....",
    "=": ".....|.....|#####|.....|#####|.....|.....",
    "?": ".###.|#...#|....#|...#.|..#..|.....|..#..",
}
_GLYPHS: dict[str, list[str]] = {ch: rows.split("|") for ch, rows in _GLYPH_ROWS.items()}
GLYPH_W, GLYPH_H = 5, 7


class Canvas:
    """An RGB raster with rectangle and text drawing, serializable as PNG."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x0 >= x1:
            return
        run = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start : start + len(run)] = run

    @staticmethod
    def text_width(text: str, scale: int = 1) -> int:
        return max(0, len(text) * (GLYPH_W + 1) - 1) * scale

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 1) -> None:
        """Draw ``text`` with its top-left corner at (x, y)."""
        for ch in text.upper():
            rows = _GLYPHS.get(ch, _GLYPHS["?"])
            for gy, row in enumerate(rows):
                for gx, cell in enumerate(row):
                    if cell == "#":
                        px, py = x + gx * scale, y + gy * scale
                        self.rect(px, py, px + scale, py + scale, color)
            x += (GLYPH_W + 1) * scale

    def text_centered(
        self, cx: int, y: int, text: str, color: Color = BLACK, scale: int = 1
    ) -> None:
        self.text(cx - self.text_width(text, scale) // 2, y, text, color, scale)

    def png(self) -> bytes:
        stride = self.width * 3
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * stride : (y + 1) * stride]) for y in range(self.height)
        )

        def chunk(tag: bytes, data: bytes) -> bytes:
            crc = zlib.crc32(tag + data) & 0xFFFFFFFF
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


@dataclass(frozen=True)
class Panel:
    """One bar group: a title and (label, value) pairs; None values are drawn as "n/a"."""

    title: str
    bars: Sequence[tuple[str, float | None]]
    colors: Sequence[Color] = PALETTE
    log_scale: bool = False

    def height_fraction(self, value: float) -> float:
        """Bar height as a fraction of the plot height (linear or log10)."""
        positive = [v for _, v in self.bars if v is not None and v > 0]
        if not positive or value <= 0:
            return 0.0
        top = max(positive)
        if not self.log_scale:
            return value / top
        floor = 10 ** math.floor(math.log10(min(positive)) - 0.3)
        return (math.log10(value) - math.log10(floor)) / (math.log10(top) - math.log10(floor))


def format_value(value: float) -> str:
    if value >= 10_000_000:
        return f"{value / 1e6:.0f}M"
    if value >= 1_000_000:
        return f"{value / 1e6:.1f}M"
    if value >= 10_000:
        return f"{value / 1e3:.0f}k"
    if value >= 1_000:
        return f"{value / 1e3:.1f}k"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _draw_panel(canvas: Canvas, panel: Panel, x0: int, y0: int, w: int, h: int) -> None:
    scale = 2
    line_h = (GLYPH_H + 3) * scale
    canvas.text_centered(x0 + w // 2, y0 + 8, panel.title, BLACK, scale)
    plot_top = y0 + 8 + line_h + line_h  # room for the title and value labels
    plot_bottom = y0 + h - line_h - 10
    canvas.rect(x0 + 20, plot_bottom, x0 + w - 20, plot_bottom + 2, BLACK)
    n = max(1, len(panel.bars))
    slot = (w - 40) // n
    bar_w = max(8, slot * 3 // 5)
    for i, (label, value) in enumerate(panel.bars):
        cx = x0 + 20 + slot * i + slot // 2
        color = panel.colors[i % len(panel.colors)]
        if value is None:
            canvas.text_centered(cx, plot_bottom - line_h, "n/a", BLACK, scale)
        else:
            bar_h = round((plot_bottom - plot_top) * panel.height_fraction(value))
            canvas.rect(cx - bar_w // 2, plot_bottom - bar_h, cx + bar_w // 2, plot_bottom, color)
            label_y = plot_bottom - bar_h - line_h
            canvas.text_centered(cx, label_y, format_value(value), BLACK, scale)
        canvas.text_centered(cx, plot_bottom + 8, label, color, scale)


def render_panels(panels: Sequence[Panel], title: str, columns: int = 2) -> bytes:
    """Render panels on a grid and return the PNG bytes."""
    panel_w, panel_h, head = 460, 300, 44
    rows = (len(panels) + columns - 1) // columns
    canvas = Canvas(panel_w * columns, head + panel_h * rows)
    canvas.text_centered(canvas.width // 2, 12, title, BLACK, 3)
    for index, panel in enumerate(panels):
        px, py = (index % columns) * panel_w, head + (index // columns) * panel_h
        canvas.rect(px + 4, py + 4, px + panel_w - 4, py + 6, GRID)
        _draw_panel(canvas, panel, px, py + 6, panel_w, panel_h - 6)
    return canvas.png()


def write_chart(path: Path, panels: Sequence[Panel], title: str) -> None:
    path.write_bytes(render_panels(panels, title))
