"""The export imports LeRobot's dataset code without transformers and diffusers
(`export.lerobot_import`), and LeRobot's tokenizer step and diffuser scheduler still work in that
process afterwards: each check in a fresh process, beside a plain import of LeRobot as the
positive control (which does import both)."""

from __future__ import annotations

import json
import subprocess
import sys

SKIPPING = """
import json, sys
from orchestrator.export.lerobot_import import import_lerobot_datasets
import_lerobot_datasets()
import orchestrator.export.video_check, orchestrator.export.remux_writer
loaded = {m: m in sys.modules for m in ("transformers", "diffusers", "lerobot.datasets.dataset_writer")}

import torch
from lerobot.optim.schedulers import DiffuserSchedulerConfig
from lerobot.processor.tokenizer_processor import TokenizerProcessorStep
from lerobot.utils import import_utils

class Tokenizer:                      # the step only stores a tokenizer object it is given
    pass

step = TokenizerProcessorStep(tokenizer=Tokenizer())
optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
scheduler = DiffuserSchedulerConfig(name="cosine", num_warmup_steps=2).build(optimizer, 10)
import transformers
from lerobot.processor import tokenizer_processor
print(json.dumps({**loaded, "flags": [import_utils._transformers_available, import_utils._diffusers_available],
                  "step": type(step.input_tokenizer).__name__, "scheduler": type(scheduler).__name__,
                  "warmup_lr": optimizer.param_groups[0]["lr"],
                  "auto_tokenizer": tokenizer_processor.AutoTokenizer.from_pretrained.__func__
                  is transformers.AutoTokenizer.from_pretrained.__func__}))
"""

PLAIN = """
import json, sys
import lerobot.datasets.lerobot_dataset, lerobot.datasets.dataset_writer
print(json.dumps({m: m in sys.modules for m in ("transformers", "diffusers")}))
"""


def run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_export_imports_lerobot_without_transformers_and_diffusers_and_both_still_work():
    assert run(PLAIN) == {"transformers": True, "diffusers": True}          # positive control
    out = run(SKIPPING)
    assert (out["transformers"], out["diffusers"], out["lerobot.datasets.dataset_writer"]) == (False, False, True)
    assert out["flags"] == [True, True]
    assert out["step"] == "Tokenizer" and out["scheduler"] == "LambdaLR"
    assert out["warmup_lr"] == 0.0                       # diffusers' cosine schedule, step 0 of a 2-step warmup
    assert out["auto_tokenizer"] is True
