"""transformers' loading reports and progress bars off while polymask loads a model (errors still raise)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' logging at error level and its progress bars off inside the block, restored after."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
