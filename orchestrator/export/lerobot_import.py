"""Importing LeRobot's dataset code for an export, without the two libraries it never uses.

`lerobot.datasets` imports `lerobot.processor` (its tokenizer step imports `transformers`) and
`lerobot.configs` imports `lerobot.optim` (its diffuser scheduler imports `diffusers`): 2.5 of
the 6.6 s of CPU that importing LeRobot's writer and decoder took on the shared machine
(docs/benchmarks.md, Export), for a tokenizer and a learning-rate scheduler an export never
calls. Both imports are guarded in LeRobot by its availability flags
(`lerobot.utils.import_utils._transformers_available`, `_diffusers_available`), which it reads
once, when those two modules are imported.

`import_lerobot_datasets` imports LeRobot's dataset modules with both flags off, then puts the
flags back and gives the two modules what the skipped import would have given them, loaded on
first use (`Deferred`): the tokenizer step and the scheduler work in this process as they would
have (tests/test_export_import.py), and any LeRobot module imported later reads the real flags.
When LeRobot's dataset code is imported already, nothing changes."""

from __future__ import annotations

import importlib
import sys
from typing import Any

# (module imported in the window, its global, the module and name the skipped import binds)
SKIPPED = (
    ("lerobot.processor.tokenizer_processor", "AutoTokenizer", "transformers", "AutoTokenizer"),
    ("lerobot.processor.tokenizer_processor", "AutoProcessor", "transformers", "AutoProcessor"),
    ("lerobot.optim.schedulers", "get_scheduler", "diffusers.optimization", "get_scheduler"),
)
FLAGS = {"_transformers_available": ("lerobot.processor.tokenizer_processor",),
         "_diffusers_available": ("lerobot.optim.schedulers",)}


class Deferred:
    """`module.name`, imported when first used: called, or one of its attributes read."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def target(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.target(), attr)


def import_lerobot_datasets() -> None:
    """Import `lerobot.datasets` (the writer, the dataset, the decoder) as the module docstring says."""
    if "lerobot.datasets" in sys.modules:
        return
    from lerobot.utils import import_utils

    saved = {flag: getattr(import_utils, flag) for flag in FLAGS}
    for flag in FLAGS:
        setattr(import_utils, flag, False)
    try:
        importlib.import_module("lerobot.datasets.lerobot_dataset")
        importlib.import_module("lerobot.datasets.dataset_writer")
    finally:
        for flag, value in saved.items():
            setattr(import_utils, flag, value)
            for name in FLAGS[flag]:
                if name in sys.modules:
                    setattr(sys.modules[name], flag, value)
        for name, attr, module, target in SKIPPED:
            loaded = sys.modules.get(name)
            if loaded is not None and vars(loaded).get(attr) is None and saved[_flag_of(name)]:
                setattr(loaded, attr, Deferred(module, target))


def _flag_of(module: str) -> str:
    return next(flag for flag, modules in FLAGS.items() if module in modules)
