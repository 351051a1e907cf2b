"""Helpers shared by the evaluation tests."""

from __future__ import annotations

import struct

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_valid_png(path) -> None:
    """``path`` is a PNG image that decodes, of a plausible plot size."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR", f"{path} is not a PNG file"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100
    import matplotlib.image

    assert matplotlib.image.imread(path).shape[:2] == (height, width)
