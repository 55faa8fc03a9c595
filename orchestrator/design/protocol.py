"""Protocol and layout: the pre-registered description of an A/B campaign.

A protocol (YAML, docs/design.md section 5) names the layout of marked cube positions, the policies
to compare, the success test, the episode length and the analysis plan. It is validated
fully before anything runs; every problem is reported as `path:line:col: message`.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.core.errors import BadInput
from orchestrator.core.yamlsrc import load_yaml_mapping
from orchestrator.design.analysis_spec import Analysis
from orchestrator.design.audit import audit_problem
from orchestrator.design.identity import Identified as _Identified
from orchestrator.design.identity import policy_identity
from orchestrator.design.located_errors import format_validation_errors, load_validated, repeated_values
from orchestrator.design.reset_spec import ResetSpec
from orchestrator.design.start_check_spec import StartCheckSpec

# Reach of the SO-101 for a top-down pick, measured from the base (shoulder-pan) axis in the
# table plane. Upper arm 0.116 m + forearm 0.135 m + wrist to jaw tip ~0.10 m: a cube farther
# than ~0.30 m cannot be grasped from above; nearer than 0.10 m the gripper hits the base.
REACH_MIN_M = 0.10
REACH_MAX_M = 0.30
MAX_FAILURE_MODES = 9  # judge keys 1-9


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- layout


class Mark(_Strict):
    """A marked cube position in the robot base frame (metres, degrees)."""

    id: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")]
    x: float
    y: float
    yaw_deg: float = 0.0
    stratum: Annotated[str, Field(min_length=1)] = "all"

    @field_validator("x", "y", "yaw_deg")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class Table(_Strict):
    """The table top as a rectangle in the base frame; its surface is the plane z = 0."""

    x_min: float = 0.0
    x_max: float = 0.40
    y_min: float = -0.25
    y_max: float = 0.25

    @model_validator(mode="after")
    def _ordered(self) -> Table:
        if not (self.x_min < self.x_max and self.y_min < self.y_max):
            raise ValueError("table needs x_min < x_max and y_min < y_max")
        return self


class Cube(_Strict):
    size_m: Annotated[float, Field(gt=0.005, le=0.08)] = 0.03
    mass_kg: Annotated[float, Field(gt=0, le=1.0)] = 0.03


class Stratum(_Strict):
    """What a layout says of one of its strata: `held_out: true` for positions, objects or
    lighting that were not in the training data (`orchestrator compare` reports them apart)."""

    held_out: bool = False


class Layout(_Strict):
    name: str = "layout"
    table: Table = Table()
    cube: Cube = Cube()
    marks: Annotated[list[Mark], Field(min_length=1)]
    strata: dict[str, Stratum] = {}

    @model_validator(mode="after")
    def _check_marks(self) -> Layout:
        seen: set[str] = set()
        for mark in self.marks:
            if mark.id in seen:
                raise ValueError(f"mark id {mark.id!r} is used twice")
            seen.add(mark.id)
        unused = sorted(set(self.strata) - {mark.stratum for mark in self.marks})
        if unused:
            raise ValueError(f"strata {', '.join(map(repr, unused))} name no mark's stratum")
        return self

    def held_out(self, stratum: str) -> bool:
        """True when the layout marks `stratum` as held out of the training data."""
        entry = self.strata.get(stratum)
        return entry is not None and entry.held_out

    def mark(self, mark_id: str) -> Mark:
        for mark in self.marks:
            if mark.id == mark_id:
                return mark
        raise KeyError(mark_id)


# ---------------------------------------------------------------- protocol


class ScriptedPolicySpec(_Identified):
    """Scripted top-down pick aimed at the mark, plus Gaussian aim noise per axis (mm)."""

    type: Literal["scripted"]
    aim_noise_mm: Annotated[float, Field(ge=0, le=100)] = 0.0
    # Faults for testing raters (`auto` against physics): open the gripper this many seconds
    # into the episode (a drop), lift only this high (m; below the success height: a
    # half-lift), or close only to this opening (rig units; a loose, half grasp).
    release_s: Annotated[float, Field(gt=0)] | None = None
    lift_m: Annotated[float, Field(gt=0, le=0.2)] | None = None
    grip_pct: Annotated[float, Field(ge=0, le=100)] | None = None


class RTCSettings(_Strict):
    """LeRobot's `RTCConfig` (`lerobot/policies/rtc/configuration_rtc.py`), same names and
    defaults: `--inference.rtc.<name>` of lerobot-rollout."""

    execution_horizon: Annotated[int, Field(gt=0)] = 10
    max_guidance_weight: Annotated[float, Field(gt=0)] = 10.0
    prefix_attention_schedule: Literal["ZEROS", "ONES", "LINEAR", "EXP"] = "LINEAR"


class InferenceSettings(_Strict):
    """lerobot-rollout's `--inference.*` (`lerobot/rollout/inference/factory.py`):
    `type: sync` computes each action on the control thread (`SyncInferenceEngine`); `type: rtc`
    runs real-time chunking (`RTCInferenceEngine`: the next chunk is computed in a background thread
    while the current one executes, `rtc` its settings, a new chunk is started when at most
    `queue_threshold` actions are queued). `rtc` and `queue_threshold` belong to `type: rtc`."""

    type: Literal["sync", "rtc"] = "sync"
    rtc: RTCSettings = RTCSettings()
    queue_threshold: Annotated[int, Field(ge=0)] = 30

    @model_validator(mode="after")
    def _rtc_keys_need_rtc(self) -> InferenceSettings:
        extra = sorted({"rtc", "queue_threshold"} & self.model_fields_set)
        if self.type == "sync" and extra:
            raise ValueError(f"{', '.join(extra)} {'apply' if len(extra) > 1 else 'applies'} only with type: rtc")
        return self


class LeRobotPolicySpec(_Identified):
    """A LeRobot checkpoint: a Hub repo id or a local directory (relative to the protocol).

    The fields `lerobot-rollout` takes for one policy:
    - `device`: default the checkpoint's own (`config.device`), or what is available when that
      one is not (as lerobot-rollout resolves `--device`);
    - `rename_map`: `{"observation.images.<rig camera>": "observation.images.<policy camera>"}`
      (`--rename_map`), for checkpoints trained under other camera names;
    - `n_action_steps`, `temporal_ensemble_coeff`: overrides of the checkpoint's config
      (`--policy.n_action_steps=...`), where the policy type has them;
    - `task`: this policy's task string for language-conditioned policies (default: the
      protocol's `task`);
    - `inference`: how the policy is deployed (`--inference.type=sync|rtc`, see
      `InferenceSettings`);
    - `use_torch_compile`, `torch_compile_backend`, `torch_compile_mode`,
      `compile_warmup_inferences`: lerobot-rollout's torch.compile of `predict_action_chunk`;
    - `interpolation_multiplier`: lerobot-rollout's `--interpolation_multiplier`: the policy
      produces one action every `interpolation_multiplier` control steps and the steps between
      are interpolated (`ActionInterpolator`); the episode's `fps` is the rate commands reach the
      arm, so the policy runs at `fps / interpolation_multiplier` (lerobot-rollout's `--fps`).
    """

    type: Literal["lerobot"]
    path: Annotated[str, Field(min_length=1)]
    revision: str | None = None
    device: str | None = None
    rename_map: dict[str, str] = {}
    n_action_steps: Annotated[int, Field(gt=0)] | None = None
    temporal_ensemble_coeff: float | None = None
    task: str | None = None
    inference: InferenceSettings = InferenceSettings()
    use_torch_compile: bool = False
    torch_compile_backend: str = "inductor"
    torch_compile_mode: str = "default"
    compile_warmup_inferences: Annotated[int, Field(ge=0)] = 2
    interpolation_multiplier: Annotated[int, Field(ge=1, le=10)] = 1


class LeRobotServerPolicySpec(_Identified):
    """A policy served by LeRobot's policy server on another machine
    (`python -m lerobot.async_inference.policy_server --host=... --port=...`), driven with LeRobot's
    own messages (`lerobot.async_inference.helpers`) the way its robot client drives it:
    - `address`: `host:port` of the server;
    - `path`: the checkpoint as the server sees it (a Hub id or a path on the server's machine);
    - `policy_type`: its LeRobot type (`act`, `smolvla`, `pi0`, ...: the server's supported list);
    - `device`: where the server runs it (`--policy_device`);
    - `actions_per_chunk`, `chunk_size_threshold`, `aggregate_fn_name`: the robot client's
      settings of the same names and defaults (an observation is sent when the queue holds at most
      `chunk_size_threshold` of a chunk; overlapping actions are merged with `aggregate_fn_name`);
    - `rename_map`, `task`: as for `type: lerobot`;
    - `timeout_s`: a reply that takes longer is a lost connection (the episode aborts, arm held).
    """

    type: Literal["lerobot_server"]
    address: Annotated[str, Field(pattern=r"^[^\s:]+:[0-9]{1,5}$")]
    path: Annotated[str, Field(min_length=1)]
    policy_type: Annotated[str, Field(min_length=1)]
    device: str = "cpu"
    actions_per_chunk: Annotated[int, Field(gt=0)] = 50
    chunk_size_threshold: Annotated[float, Field(ge=0, le=1)] = 0.5
    aggregate_fn_name: str = "weighted_average"
    rename_map: dict[str, str] = {}
    task: str | None = None
    timeout_s: Annotated[float, Field(gt=0)] = 5.0


# The policy types, listed once: the union of their specs, told apart by `type:`. Each name has a
# registered Policy class (`policies.base.register_policy`; tests/test_registries.py checks).
PolicySpec = Annotated[ScriptedPolicySpec | LeRobotPolicySpec | LeRobotServerPolicySpec, Field(discriminator="type")]
# The protocol's `type:` names and their specs, read from the union (each spec's `Literal` type)
POLICY_SPECS: dict[str, type[BaseModel]] = {
    get_args(spec.model_fields["type"].annotation)[0]: spec for spec in get_args(get_args(PolicySpec)[0])}


def deployment_label(spec: object) -> str:
    """How a policy is deployed, one short phrase for reports: `sync`, `rtc (horizon 10)`, `server
    host:port`, with `+compile` and `xN interpolation` where set; `scripted` for scripted ones."""
    if isinstance(spec, LeRobotServerPolicySpec):
        return f"server {spec.address}"
    if not isinstance(spec, LeRobotPolicySpec):
        return "scripted"
    label: str = spec.inference.type
    if label == "rtc":
        label += f" (horizon {spec.inference.rtc.execution_horizon})"
    if spec.use_torch_compile:
        label += " +compile"
    if spec.interpolation_multiplier > 1:
        label += f" x{spec.interpolation_multiplier} interpolation"
    return label


class Episode(_Strict):
    fps: Annotated[int, Field(gt=0, le=120)]
    duration_s: Annotated[float, Field(gt=0, le=600)]

    @property
    def frames(self) -> int:
        """Number of control steps (= recorded frames) in every episode."""
        return round(self.fps * self.duration_s)


class Success(_Strict):
    """Cube bottom >= min_height_m above the table, both jaws touching, for >= hold_s."""

    kind: Literal["lift_and_hold"] = "lift_and_hold"
    min_height_m: Annotated[float, Field(gt=0, le=1.0)] = 0.04
    hold_s: Annotated[float, Field(ge=0, le=60)] = 1.0


class Judging(_Strict):
    judges: Annotated[int, Field(ge=0, le=20)] = 1
    failure_modes: Annotated[list[str], Field(max_length=MAX_FAILURE_MODES)] = [
        "missed", "pushed", "dropped", "collision", "other",
    ]
    operator_is_judge: bool = False
    # The automatic rater (`auto`, from the recorded joints): a second opinion (`advisory`,
    # never in the consensus) unless pre-registered as `counted` (one more judge in it).
    auto: Literal["advisory", "counted"] = "advisory"
    # On a PostgreSQL store: operator roles (`store add-operator`) see no human label until the
    # campaign has ended and every episode has `judges` human labels (enforced by the server).
    hide_labels_from_operator: bool = False
    # When the human judges of an episode disagree (no majority): `unsure` (the episode waits
    # for another judge, its layout is left out meanwhile), or `failure` (a disagreement counts
    # as a failure of the policy). Pre-registered: which layouts drop would depend on outcomes.
    disagreement: Literal["unsure", "failure"] = "unsure"
    # The audit (design/audit.py): this fraction of the trials, drawn when frozen, goes to the judges whatever `auto` said.
    audit: Annotated[float, Field(ge=0, le=1)] = 0.0

    @model_validator(mode="after")
    def _audit_needs_counted_auto(self) -> Judging:
        if self.audit > 0 and (self.auto != "counted" or self.judges < 1):
            raise ValueError(f"audit {self.audit:g} needs auto: counted and judges >= 1 (people check a counted rater)")
        return self


AbortAction = Literal["failure", "rerun"]


class Aborts(_Strict):
    """What an aborted attempt counts as, by the class of its cause, pre-registered and frozen
    with the rest of the protocol. `failure`: the trial is scored as a failure of the policy that
    ran (its cause is shown in the report, never to the judges); `rerun`: the trial is run again.

    Classes: `policy` (the policy raised, returned a non-finite action, or a servo overloaded
    during its episode: see `overload`), `operator_unsafe` (the operator's stop: unsafe motion),
    `operator_misplaced` (the operator's stop: cube not on its mark), `operator_other` (the
    operator's stop, any other reason, and a redo), `operator_unanswered` (a stop whose reason
    was never given: the stop key and then Ctrl-C, SIGTERM, SIGHUP or a closed console at the
    question; or Ctrl-C, SIGTERM or SIGHUP during an episode of a real arm, which a person may
    have meant as an emergency stop), `rig` (USB, camera, servo reset, power, damaged files).
    Re-running outcome-dependent aborts scores a policy only on its clean runs, which flatters
    the worse one; hence the defaults (an unanswered stop counts against the policy that ran, as
    an unsafe one: its reason, asked later, never changes that). A trial aborted for a `rerun` class more than
    `max_reruns` times is not run again: it is left out of the pairs and listed in the report.
    Interruptions that say nothing about the policy (a simulated run's Ctrl-C, a killed
    process, a station whose claim ran out) are re-run, at most `max_interruptions` times.

    `overload`: whose fault a servo overload or overcurrent alarm in an episode is: `policy` (it
    drove the arm into the table or the cube) or `rig` (the hardware). The operator's answer at
    the alarm is recorded and shown in the report, and changes nothing."""

    policy: AbortAction = "failure"
    operator_unsafe: AbortAction = "failure"
    operator_misplaced: AbortAction = "rerun"
    operator_other: AbortAction = "rerun"
    operator_unanswered: AbortAction = "failure"
    rig: AbortAction = "rerun"
    max_reruns: Annotated[int, Field(ge=0, le=100)] = 3
    max_interruptions: Annotated[int, Field(ge=1, le=1000)] = 10
    overload: Literal["policy", "rig"] = "policy"


class Stations(_Strict):
    """Several arms on one server store (`run --station`): a station that stops renewing its
    claim on a layout block for `lease_s` seconds loses it, and the block is re-queued."""

    lease_s: Annotated[float, Field(gt=0, le=3600)] = 60.0


class Protocol(_Strict):
    name: Annotated[str, Field(min_length=1)]
    task: str = ""
    layout: Annotated[str, Field(min_length=1)]
    policies: dict[str, PolicySpec]
    trials_per_layout: Annotated[int, Field(ge=1, le=100)] = 1
    order: Literal["balanced", "random"] = "balanced"
    seed: int
    episode: Episode
    success: Success = Success()
    judging: Judging = Judging()
    analysis: Analysis = Analysis()
    aborts: Aborts = Aborts()
    stations: Stations = Stations()
    start_check: StartCheckSpec = StartCheckSpec()
    reset: ResetSpec = ResetSpec()

    @field_validator("policies")
    @classmethod
    def _two_or_more(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) < 2:
            raise ValueError("an A/B campaign needs at least 2 policies")
        for label in value:
            if not label or len(label) > 32 or not all(c.isalnum() or c in "_-." for c in label):
                raise ValueError(f"policy label {label!r} must be 1-32 letters, digits, _ - .")
        first: dict[tuple, str] = {}
        for label, spec in value.items():
            identity = policy_identity(label, spec)
            if identity in first:
                raise ValueError(f"policies {first[identity]} and {label} are both method {identity[0]!r}, "
                                 f"training_seed {spec.training_seed}, step {spec.step}: one run, one policy")
            first[identity] = label
        return value


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class LoadedProtocol:
    """A validated protocol with its layout, source texts and identity hashes."""

    path: Path
    protocol: Protocol
    layout: Layout
    layout_path: Path
    text: str
    layout_text: str

    @property
    def sha256(self) -> str:
        """SHA-256 of the protocol file's bytes (what `sha256sum protocol.yaml` prints)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def layout_sha256(self) -> str:
        return hashlib.sha256(self.layout_text.encode("utf-8")).hexdigest()

    def resolve(self, relative: str) -> Path:
        """A path written in the protocol, resolved from the protocol file's folder."""
        return (self.path.parent / relative).resolve()


# libyaml's safe loader where PyYAML has it (the same documents, ~10x faster than the pure-Python one)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=64)   # a pure function of the texts; report and compare read a store's twice
def frozen_protocol_from(protocol_path: str, protocol_text: str, layout_text: str) -> LoadedProtocol:
    """The protocol and layout frozen in a campaign store (their stored texts), validated;
    BadInput (one line) if the stored texts no longer parse (the store was altered)."""
    try:
        protocol = Protocol.model_validate(yaml.load(protocol_text, Loader=_SAFE_LOADER))
        layout = Layout.model_validate(yaml.load(layout_text, Loader=_SAFE_LOADER))
    except (yaml.YAMLError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{protocol_path}: the protocol frozen in the campaign store does not parse "
                       f"({first}); the store was altered") from None
    path = Path(protocol_path)
    return LoadedProtocol(path=path, protocol=protocol, layout=layout, layout_path=path.parent / protocol.layout,
                          text=protocol_text, layout_text=layout_text)


def _policy_model(data: dict, loc: tuple) -> type[BaseModel] | None:
    """The spec class of the policy at `loc` (`policies.<label>...`), chosen by its `type`."""
    if len(loc) < 2 or loc[0] != "policies":
        return None
    try:
        kind = data["policies"][loc[1]].get("type")
    except (KeyError, AttributeError, TypeError, IndexError):
        return None
    return POLICY_SPECS.get(kind)


def load_layout(path: Path) -> tuple[Layout, str]:
    """Load and validate a layout file, including reach and table checks for every mark."""
    data, smap, text = load_yaml_mapping(path, "layout")
    try:
        layout = Layout.model_validate(data)
    except ValidationError as exc:
        lines = format_validation_errors(exc, smap, Layout, data)
        duplicates = repeated_values(data, smap, "marks", "id", "mark id")
        if duplicates:  # located at the repeated id instead of the top of the file
            lines = [line for line in lines if "is used twice" not in line] + duplicates
        raise BadInput(lines) from None
    problems = []
    half = layout.cube.size_m / 2
    for index, mark in enumerate(layout.marks):
        where = smap.locate(("marks", index))
        reach = math.hypot(mark.x, mark.y)
        if not REACH_MIN_M <= reach <= REACH_MAX_M:
            problems.append(f"{where}: mark {mark.id} is {reach:.3f} m from the base; the SO-101 "
                            f"picks from {REACH_MIN_M:.2f} to {REACH_MAX_M:.2f} m")
        t = layout.table
        if not (t.x_min + half <= mark.x <= t.x_max - half and t.y_min + half <= mark.y <= t.y_max - half):
            problems.append(f"{where}: mark {mark.id} at ({mark.x}, {mark.y}) is not on the table")
    if problems:
        raise BadInput(problems)
    return layout, text


def load_protocol(path: str | Path) -> LoadedProtocol:
    """Load, validate and resolve a protocol and its layout. Raises `BadInput` with every problem."""
    path = Path(path)
    protocol, _, smap, text = load_validated(path, "protocol", Protocol, POLICY_SPECS, _policy_model)
    layout_path = (path.parent / protocol.layout).resolve()
    try:
        layout, layout_text = load_layout(layout_path)
    except BadInput as exc:
        where = smap.locate(("layout",))
        if len(exc.problems) == 1 and "file not found" in exc.problems[0]:
            raise BadInput(f"{where}: layout file {protocol.layout!r} not found "
                           f"(looked for {layout_path})") from None
        raise
    problems = []
    stopping = protocol.analysis.stopping
    if not isinstance(stopping, str) and stopping.max_layouts > len(layout.marks) * protocol.trials_per_layout:
        problems.append(f"{smap.locate(('analysis', 'stopping', 'max_layouts'))}: max_layouts "
                        f"{stopping.max_layouts} exceeds the {len(layout.marks) * protocol.trials_per_layout} "
                        "layout runs the protocol schedules")
    if protocol.reset.mode == "auto" and protocol.start_check.mode != "enforce":
        problems.append(f"{smap.locate(('reset', 'mode'))}: reset mode auto needs start_check mode enforce "
                        f"(the camera finds the cube and checks where it landed), not {protocol.start_check.mode!r}")
    trials = len(layout.marks) * protocol.trials_per_layout * len(protocol.policies)
    if problem := audit_problem(protocol.judging.audit, trials):
        problems.append(f"{smap.locate(('judging', 'audit'))}: {problem}")
    if protocol.judging.judges and len(set(protocol.judging.failure_modes)) != len(protocol.judging.failure_modes):
        problems.append(f"{smap.locate(('judging', 'failure_modes'))}: failure modes must be unique")
    for label, spec in protocol.policies.items():
        if isinstance(spec, LeRobotPolicySpec) and spec.path.startswith((".", "/")):
            local = (path.parent / spec.path).resolve()
            if not local.exists():
                problems.append(f"{smap.locate(('policies', label, 'path'))}: policy {label}: "
                                f"checkpoint directory {spec.path!r} not found (looked for {local})")
    if problems:
        raise BadInput(problems)
    return LoadedProtocol(path=path, protocol=protocol, layout=layout, layout_path=layout_path,
                          text=text, layout_text=layout_text)
