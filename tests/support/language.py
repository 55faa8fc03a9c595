"""A tiny language-conditioned checkpoint: LeRobot's `multi_task_dit` on a tiny random CLIP (test-only,
offline).

`multi_task_dit` (LeRobot 0.6.1) conditions on the task string: its preprocessor tokenizes the
transition's `task` with `AutoTokenizer.from_pretrained(config.text_encoder_name)`
(`TokenizerProcessorStep`), and the model encodes the tokens with
`CLIPTextModel.from_pretrained(config.text_encoder_name)` (and images with `CLIPVisionModel`).
The real names (`openai/clip-vit-base-patch16`) would download weights, so `make_tiny_clip` writes
a local folder (its name must contain "clip", the config checks it) with:
- a `CLIPConfig` of one-layer 32-wide text and vision towers, random weights (`save_pretrained`);
- a real `CLIPTokenizer` (byte-level BPE, lower-casing) on a handwritten vocabulary: every byte as
  a symbol, alone and with the end-of-word mark `</w>`, and no merges, so a task becomes one token
  per character and decodes back to itself (lower-cased).

`make_dit_checkpoint` saves a random `MultiTaskDiTPolicy` pointing at that folder, with its pre/post
processors, the way a trained checkpoint is saved (`policy.save_pretrained` + both pipelines'
`save_pretrained`). Two DDIM steps per chunk and 32x32 images for CLIP keep a forward pass in
milliseconds on a CPU. The DiT's adaLN-Zero modulation starts at zero (an untrained DiT ignores its
conditioning), so it gets random weights here: the task then changes the actions, as in a trained
checkpoint. DDIM predicts the clean sample (`prediction_type="sample"`), so the actions are the
model's output rather than clipped noise.
"""

from __future__ import annotations

from pathlib import Path

STATE_DIM = 6


def make_tiny_clip(directory: Path, *, image_size: int = 32, seed: int = 0) -> Path:
    """A tiny random CLIP model and its tokenizer in `directory` (a name containing "clip")."""
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    directory = Path(directory)
    assert "clip" in directory.name.lower(), "multi_task_dit accepts only CLIP model names"
    symbols = sorted(ByteLevel.alphabet())  # the 256 byte symbols of byte-level BPE
    vocab = {s: i for i, s in enumerate(symbols + [s + "</w>" for s in symbols])}
    vocab |= {"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1}
    directory.mkdir(parents=True, exist_ok=True)
    CLIPTokenizer(vocab=vocab, merges=[]).save_pretrained(directory)  # vocab.json, merges.txt, tokenizer.json

    tower = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    config = CLIPConfig(
        text_config=dict(tower, vocab_size=len(vocab), max_position_embeddings=64,
                         bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
                         pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(tower, image_size=image_size, patch_size=16),
        projection_dim=32)
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(directory)
    return directory


def make_dit_checkpoint(directory: Path, cameras: dict[str, tuple[int, int]], *, clip: Path | None = None,
                        state_dim: int = STATE_DIM, action_dim: int = STATE_DIM, n_action_steps: int = 4,
                        seed: int = 0) -> Path:
    """Save a random `multi_task_dit` policy for `cameras` {name: (height, width)} (one shape for
    all, as the policy requires) into `directory`; its CLIP is `clip`, else a new tiny one in
    `directory/tiny-clip`."""
    import torch
    from lerobot.policies.multi_task_dit.configuration_multi_task_dit import MultiTaskDiTConfig
    from lerobot.policies.multi_task_dit.modeling_multi_task_dit import MultiTaskDiTPolicy

    from .act import policy_features, save_with_processors

    directory = Path(directory)
    clip = Path(clip) if clip else make_tiny_clip(directory / "tiny-clip", seed=seed)
    inputs, outputs = policy_features(cameras, state_dim, action_dim)
    cfg = MultiTaskDiTConfig(
        input_features=inputs,
        output_features=outputs,
        n_obs_steps=1, horizon=8, n_action_steps=n_action_steps,
        noise_scheduler_type="DDIM", num_train_timesteps=10, num_inference_steps=2, prediction_type="sample",
        hidden_dim=32, num_layers=1, num_heads=2, timestep_embed_dim=32, dropout=0.0,
        vision_encoder_name=str(clip.resolve()), text_encoder_name=str(clip.resolve()),
        image_resize_shape=(32, 32), image_crop_shape=None, tokenizer_max_length=48,
        device="cpu")
    torch.manual_seed(seed)
    policy = MultiTaskDiTPolicy(cfg)
    for name, param in policy.named_parameters():
        # The DiT zero-initialises its adaLN modulation (adaLN-Zero), so an untrained model ignores its
        # conditioning (state, images, task); a trained one does not: give it random weights.
        if ".adaLN_modulation." in name:
            torch.nn.init.normal_(param, std=0.5)
    stats = {"observation.state": {"min": torch.zeros(state_dim), "max": torch.full((state_dim,), 40.0),
                                   "mean": torch.full((state_dim,), 20.0), "std": torch.full((state_dim,), 10.0)},
             "action": {"min": torch.full((action_dim,), -40.0), "max": torch.full((action_dim,), 40.0),
                        "mean": torch.zeros(action_dim), "std": torch.full((action_dim,), 20.0)}}
    return save_with_processors(policy, cfg, stats, cameras, directory)
