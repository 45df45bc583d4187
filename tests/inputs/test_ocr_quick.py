"""OCR's quick checks: a missing extra or missing language data is named plainly.

The OCR runs themselves are in ``test_ocr.py`` (slow tier).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PIL import Image

from flexmatch.errors import MissingExtraError
from flexmatch.inputs.parsing import ocr, parse_file


@pytest.fixture
def no_ocr(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if the 'ocr' extra were not installed."""
    monkeypatch.setitem(sys.modules, "tesserocr", None)  # import fails
    monkeypatch.setattr(ocr, "_local", type(ocr._local)())  # no Tesseract loaded yet


def test_without_the_extra_an_image_fails_naming_it(tmp_path: Path, no_ocr: None) -> None:
    picture = tmp_path / "scan.png"
    Image.new("L", (200, 100), 255).save(picture)
    with pytest.raises(MissingExtraError) as caught:
        parse_file(picture)
    message = str(caught.value)
    assert message.startswith(f"{picture}: ") and "pip install 'flexmatch[ocr]'" in message


def test_missing_language_data_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ocr, "TESSDATA_DIRS", (str(tmp_path),))
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))
    with pytest.raises(MissingExtraError, match=r"tesseract-ocr-eng.*TESSDATA_PREFIX"):
        ocr.tessdata_dir()
