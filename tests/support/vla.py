"""A tiny chunked VLA: LeRobot's SmolVLA on a tiny random SmolVLM backbone (test-only, offline).

SmolVLA (LeRobot 0.6.1) builds its vision-language backbone from `config.vlm_model_name`: with
`load_vlm_weights=False` it reads only the backbone's config (`AutoConfig.from_pretrained`) and
builds a randomly initialised `SmolVLMForConditionalGeneration`, and it always loads the
backbone's processor (`AutoProcessor.from_pretrained`; the tokenizer's `fake_image_token_id` and
`global_image_token_id` mark the image tokens); its preprocessor tokenizes the task with the same
name (`TokenizerProcessorStep`). The real name (`HuggingFaceTB/SmolVLM2-500M-Video-Instruct`)
would download, so `make_tiny_smolvlm` writes a local folder with:
- a `SmolVLMConfig` of a one-layer 32-wide vision tower (32x32 images, 16-pixel patches) and a
  two-layer 32-wide Llama text model (random weights are the checkpoint's, saved by SmolVLA);
- a real fast tokenizer (`tokenizers` WordLevel on a handwritten vocabulary of single characters
  plus SmolVLM's special tokens), so a task becomes one token per character;
- SmolVLM's image and video processors at 32 pixels.

`make_smolvla_checkpoint` saves a random `SmolVLAPolicy` pointing at that folder, with its pre/post
processors, as a trained checkpoint is saved. SmolVLA supports RTC (`supports_rtc()`, and its
`predict_action_chunk` takes `inference_delay` and `prev_chunk_left_over`); two flow-matching steps
per chunk keep a forward pass in tens of milliseconds on a CPU.
"""

from __future__ import annotations

from pathlib import Path

STATE_DIM = 6
SPECIAL = ["<pad>", "<unk>", "<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>",
           "<global-img>", "<image>", "<video>"]


def make_tiny_smolvlm(directory: Path, *, image_size: int = 32) -> Path:
    """A tiny SmolVLM config, tokenizer and processors in `directory` (no weights: SmolVLA
    builds the backbone from the config and saves its weights in its own checkpoint)."""
    import string

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        SmolVLMConfig,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    symbols = SPECIAL + sorted(set(string.printable) - set(string.whitespace) | {" ", "\n"})
    vocab = {s: i for i, s in enumerate(symbols)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        extra_special_tokens={"fake_image_token": "<fake_token_around_image>", "global_image_token": "<global-img>",
                              "image_token": "<image>", "video_token": "<video>",
                              "end_of_utterance_token": "<end_of_utterance>"})
    size = {"longest_edge": image_size}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(size=size, max_image_size=size),
        image_seq_len=1)
    processor.save_pretrained(directory)
    config = SmolVLMConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=image_size, patch_size=16),
        text_config=dict(model_type="llama", vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=256, pad_token_id=vocab["<pad>"]),
        scale_factor=2, image_token_id=vocab["<image>"], pad_token_id=vocab["<pad>"])
    config.save_pretrained(directory)
    return directory


def make_smolvla_checkpoint(directory: Path, cameras: dict[str, tuple[int, int]], *, vlm: Path | None = None,
                            state_dim: int = STATE_DIM, action_dim: int = STATE_DIM, chunk_size: int = 20,
                            n_action_steps: int = 20, seed: int = 0) -> Path:
    """Save a random SmolVLA for `cameras` {name: (height, width)} into `directory`; its backbone
    is `vlm`, else a new tiny one in `directory/tiny-smolvlm`."""
    import torch
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    from .act import policy_features, save_with_processors

    directory = Path(directory)
    vlm = Path(vlm) if vlm else make_tiny_smolvlm(directory / "tiny-smolvlm")
    inputs, outputs = policy_features(cameras, state_dim, action_dim)
    cfg = SmolVLAConfig(
        input_features=inputs, output_features=outputs,
        chunk_size=chunk_size, n_action_steps=n_action_steps, num_steps=2,
        max_state_dim=8, max_action_dim=8, resize_imgs_with_padding=(32, 32),
        vlm_model_name=str(vlm.resolve()), load_vlm_weights=False, num_vlm_layers=2,
        tokenizer_max_length=16, prefix_length=-1, device="cpu")
    torch.manual_seed(seed)
    policy = SmolVLAPolicy(cfg)
    stats = {"observation.state": {"mean": torch.full((state_dim,), 20.0), "std": torch.full((state_dim,), 10.0)},
             "action": {"mean": torch.zeros(action_dim), "std": torch.full((action_dim,), 20.0)}}
    return save_with_processors(policy, cfg, stats, cameras, directory)


def save_vla_in_subprocess(directory: Path, cameras: dict[str, tuple[int, int]]) -> Path:
    """`make_smolvla_checkpoint(directory, cameras)` by a separate interpreter (as
    `support.act.save_acts_in_subprocess`: the `orchestrator` under test must register SmolVLA's
    config type on its own)."""
    import json
    import subprocess
    import sys

    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); from support.vla import make_smolvla_checkpoint; "
            "make_smolvla_checkpoint(sys.argv[2], {k: tuple(v) for k, v in json.loads(sys.argv[3]).items()})")
    tests = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code, str(tests), str(directory), json.dumps(cameras)],
                   check=True, capture_output=True, timeout=300)
    assert (Path(directory) / "config.json").is_file(), directory
    return Path(directory)
