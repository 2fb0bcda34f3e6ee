"""The explorer page in Firefox: opened from disk by headless ``firefox-esr``, no driver.

Playwright drives only its own build of Firefox, so Debian's ``firefox-esr`` is run
as a program (``--headless --screenshot``) and the picture is checked: the level is
drawn, in the colours of explorer.css. Without firefox-esr these tests skip, except
under CI (the CI environment variable set), where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from graphviz_autograd import explore

from .explore_models import tiny_gpt2

# Fills from explorer.css: a module's box, an op, and the page's white canvas.
BOX_FILL = (0xFF, 0xFA, 0xCD)
OP_FILL = (0xE2, 0xE2, 0xE2)
WHITE = (0xFF, 0xFF, 0xFF)
WINDOW = (1200, 800)


def firefox_path() -> str | None:
    for candidate in (os.environ.get("FIREFOX"), shutil.which("firefox-esr"), "/usr/bin/firefox-esr"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def firefox() -> str:
    executable = firefox_path()
    reason = None
    if executable is None:
        reason = "no firefox-esr found on PATH"
    elif shutil.which("dot") is None:
        reason = "Graphviz 'dot' is not installed"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the Firefox tests (README's set-up installs firefox-esr).")
        pytest.skip(reason)
    assert executable is not None
    return executable


@pytest.fixture(scope="module")
def gpt2_file(tmp_path_factory) -> Path:
    logits, recorder = tiny_gpt2(4)
    return explore(logits, recorder=recorder).save(tmp_path_factory.mktemp("firefox") / "gpt2.html")


def screenshot(firefox: str, url: str, folder: Path) -> list[tuple[int, int, int]]:
    """The pixels of ``url`` as headless Firefox draws it, in a fresh profile, offline."""
    profile = folder / "profile"
    profile.mkdir()
    # Nothing may be fetched: the page is one file. These keep Firefox itself quiet too.
    (profile / "user.js").write_text(
        'user_pref("network.proxy.type", 1);\n'
        'user_pref("network.proxy.http", "127.0.0.1");\n'
        'user_pref("network.proxy.http_port", 9);\n'
        'user_pref("network.proxy.ssl", "127.0.0.1");\n'
        'user_pref("network.proxy.ssl_port", 9);\n'
        'user_pref("app.update.enabled", false);\n'
        'user_pref("browser.shell.checkDefaultBrowser", false);\n'
        'user_pref("datareporting.policy.dataSubmissionEnabled", false);\n'
        'user_pref("toolkit.telemetry.enabled", false);\n',
        encoding="utf-8",
    )
    picture = folder / "shot.png"
    environment = {**os.environ, "HOME": str(folder), "MOZ_HEADLESS": "1"}
    subprocess.run(
        [firefox, "--headless", "--no-remote", "-profile", str(profile), "--screenshot", str(picture),
         f"--window-size={WINDOW[0]},{WINDOW[1]}", url],
        env=environment, capture_output=True, timeout=120, check=False,
    )
    assert picture.exists(), "firefox-esr --screenshot wrote no picture"
    return png_pixels(picture.read_bytes())


def png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit RGB or RGBA PNG without interlacing (what Firefox writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, []
    width = height = channels = 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "an unexpected PNG format"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    previous = bytearray(stride)
    pixels = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                a, b, c = abs(guess - left), abs(guess - up), abs(guess - corner)
                line[i] = (line[i] + (left if a <= b and a <= c else up if b <= c else corner)) & 0xFF
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return pixels


def test_firefox_draws_the_top_level_from_disk(firefox, gpt2_file, tmp_path):
    pixels = screenshot(firefox, gpt2_file.as_uri(), tmp_path)
    assert len(pixels) == WINDOW[0] * WINDOW[1]
    colours = Counter(pixels)
    assert colours[WHITE] < 0.95 * len(pixels), "the page is blank"
    # Two module boxes (transformer, lm_head), each well over 100 x 40 pixels of fill.
    assert colours[BOX_FILL] > 2 * 100 * 40


def test_firefox_draws_the_expanded_view(firefox, gpt2_file, tmp_path):
    # The address asks for the top level expanded, as the page writes it after pressing e.
    pixels = screenshot(firefox, gpt2_file.as_uri() + "#&expanded", tmp_path)
    colours = Counter(pixels)
    # Op boxes from inside the blocks, and no module box left closed.
    assert colours[OP_FILL] > 2000
    assert colours[BOX_FILL] < 100
