"""The MuJoCo scene: Menagerie SO-101 on a table, a cube at a layout mark, two cameras.

Frames. The layout frame (docs/design.md section 2, `protocol.Mark`) is the MuJoCo world frame: origin
on the shoulder-pan axis at table height, x forward, y to the robot's left, z up, table surface
z = 0. The Menagerie model's `base` body is placed so that the pan axis is at x = y = 0 and the
underside of the base rests on the table.

The table carries the printed sheet (`design.raster.sheet_image`: the template's fiducial board
on white paper) as a visual-only textured slab `SHEET_THICKNESS_M` thick: what a real front
camera sees of the taped template. The cube stands on the table, 0.2 mm into the paper.

Cameras are named as in `hardware/sim.yaml`: `front` (fixed, across the table, looking at the
workspace) and `wrist` (the Menagerie wrist camera on the gripper, renamed from `wrist_cam`).

Cheap visuals (docs/design.md section 3: rendering dominates a simulated episode): no multisampling, no shadows, no
skybox, the headlight only, and decimated visual meshes (`RenderSettings.mesh_cell_mm`, 4 mm by
default): the Menagerie visual meshes have ~340k triangles; vertex clustering on a 4 mm grid
leaves ~25k (2 mm: ~37k) and keeps the look. Measured with one llvmpipe thread at 320x240
(bench/sim_render.py): front ~6 ms, wrist ~4 ms per frame (full meshes: ~67 and ~35 ms).
Collision geometry and the table are never touched, so physics does not depend on any of this.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.sim.front_camera import FRONT_CAMERA_FOVY, FRONT_CAMERA_POS, FRONT_CAMERA_TARGET
from orchestrator.sim.gl import ensure_gl_backend

ensure_gl_backend()

import mujoco  # noqa: E402

# Shoulder body position in the Menagerie `base` frame (so101.xml): the pan axis.
PAN_AXIS_IN_BASE = (0.0388353, 0.0, 0.0624)
# Lowest point of the base meshes in the `base` frame (measured from the STL vertices).
BASE_BOTTOM_Z = -0.0024
BASE_POS = (-PAN_AXIS_IN_BASE[0], 0.0, -BASE_BOTTOM_Z)

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
KNOWN_CAMERAS = ("front", "wrist")

# The aim point of a top-down pick, in the `gripper` body frame: midway between the fixed
# jaw's inner face (x = -0.0074 at the tip) and the moving jaw's inner face when the gripper
# is open at 35 % (x = +0.045), 18.75 mm above the fixed jaw's tip. A cube centred here is
# pushed by the closing moving jaw against the fixed jaw.
GRASP_SITE_POS = (0.019, 0.0, -0.083)

# Table top used by the simulation (larger than the printable layout template).
TABLE_X = (-0.25, 0.90)
TABLE_Y = (-0.90, 0.90)
TABLE_THICKNESS = 0.02



def menagerie_dir() -> Path:
    """Directory of the Menagerie SO-101 model shipped by `so101-nexus`."""
    import importlib.util

    spec = importlib.util.find_spec("so101_nexus")
    if spec is None or not spec.origin:
        raise FileNotFoundError("so101-nexus is not installed (it ships the SO-101 model)")
    return Path(spec.origin).parent / "assets" / "SO101_menagerie"


def menagerie_xml() -> Path:
    return menagerie_dir() / "so101.xml"


@dataclass(frozen=True)
class RenderSettings:
    """Visual quality knobs. They change pixels only, never physics."""

    offsamples: int = 0
    shadows: bool = False
    mesh_cell_mm: float | None = 4.0   # vertex-clustering cell for visual meshes; None = full
    key_light: bool = False            # a directional light besides the headlight (~25 % slower)

    @classmethod
    def from_extras(cls, extra: dict[str, Any]) -> RenderSettings:
        """From a rig profile's `robot:` extras (`mesh_cell_mm: 4`, 0 or null = full meshes;
        `key_light: false`, `shadows: false`, `offsamples: 0`); the defaults for the rest."""
        kwargs: dict[str, Any] = {}
        if "mesh_cell_mm" in extra:
            cell = extra["mesh_cell_mm"]
            kwargs["mesh_cell_mm"] = float(cell) if cell else None
        for key in ("key_light", "shadows"):
            if key in extra:
                kwargs[key] = bool(extra[key])
        if "offsamples" in extra:
            kwargs["offsamples"] = int(extra["offsamples"])
        return cls(**kwargs)


# ---------------------------------------------------------------- mesh decimation


def _read_stl(path: Path) -> np.ndarray:
    """Binary STL -> triangle soup, shape (m, 3, 3) float64."""
    data = path.read_bytes()
    count = int(np.frombuffer(data, dtype="<u4", count=1, offset=80)[0])
    if 84 + 50 * count != len(data):
        raise ValueError(f"{path.name}: not a binary STL")
    rec = np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    return np.frombuffer(data, dtype=rec, count=count, offset=84)["v"].astype(np.float64)


def _cluster(tris: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertex-clustering decimation (Rossignac & Borrel 1993) of a triangle soup.

    Vertices falling in the same `cell`-sized grid cell merge into their mean; triangles that
    collapse (two corners in one cell) or repeat are dropped. Returns (vertices, faces).
    """
    verts = tris.reshape(-1, 3)
    keys = np.floor(verts / cell).astype(np.int64)
    keys -= keys.min(axis=0)
    span = keys.max(axis=0) + 1
    flat = (keys[:, 0] * span[1] + keys[:, 1]) * span[2] + keys[:, 2]
    _, inverse = np.unique(flat, return_inverse=True)
    inverse = inverse.reshape(-1)
    n = int(inverse.max()) + 1
    counts = np.bincount(inverse, minlength=n)[:, None]
    new_verts = np.stack([np.bincount(inverse, weights=verts[:, k], minlength=n) for k in range(3)],
                         axis=1) / counts
    faces = inverse.reshape(-1, 3)
    keep = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    faces = faces[keep]
    srt = np.sort(faces, axis=1)
    fkey = (srt[:, 0] * n + srt[:, 1]) * n + srt[:, 2]
    _, first = np.unique(fkey, return_index=True)
    return new_verts, faces[np.sort(first)]


@functools.lru_cache(maxsize=64)
def _decimated(path: str, cell: float) -> tuple[tuple[float, ...], tuple[int, ...]] | None:
    try:
        tris = _read_stl(Path(path))
    except (OSError, ValueError):
        return None
    v, f = _cluster(tris, cell)
    if len(f) < 4:
        return None
    return tuple(v.reshape(-1).tolist()), tuple(f.reshape(-1).tolist())


# ---------------------------------------------------------------- spec


def _visual_mesh_names(spec: mujoco.MjSpec) -> set[str]:
    names = set()
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH and geom.contype == 0 and geom.conaffinity == 0:
            names.add(geom.meshname)
    return names


def arm_spec(*, mesh_cell_mm: float | None = None) -> mujoco.MjSpec:
    """The Menagerie SO-101 placed in the layout frame, plus a `grasp` site on the gripper.

    `mesh_cell_mm` decimates the visual-only meshes (collision meshes are kept as they are).
    """
    xml = menagerie_xml()
    spec = mujoco.MjSpec.from_file(str(xml))
    base = spec.body("base")
    base.pos = list(BASE_POS)
    gripper = spec.body("gripper")
    site = gripper.add_site()
    site.name = "grasp"
    site.pos = list(GRASP_SITE_POS)
    site.group = 3
    wrist_cam = spec.camera("wrist_cam")
    if wrist_cam is not None:
        wrist_cam.name = "wrist"
    if mesh_cell_mm:
        meshdir = xml.parent / (spec.meshdir or "")
        visual = _visual_mesh_names(spec)
        for mesh in spec.meshes:
            if mesh.name not in visual or not mesh.file:
                continue
            dec = _decimated(str(meshdir / mesh.file), mesh_cell_mm / 1000.0)
            if dec is None:
                continue
            mesh.file = ""
            mesh.uservert = list(dec[0])
            mesh.userface = list(dec[1])
    return spec


SHEET_THICKNESS_M = 0.0002


def _add_sheet(spec: mujoco.MjSpec) -> None:
    """The printed sheet: a thin visual-only mesh box on the table, its top textured with
    `sheet_image` (texture row 0 along x_max, column 0 along y_max, as the image)."""
    from orchestrator.design.raster import sheet_image

    sheet = sheet_image()
    height, width = sheet.rgb.shape[:2]
    tex = spec.add_texture()
    tex.name = "sheet"
    tex.type = mujoco.mjtTexture.mjTEXTURE_2D
    tex.width, tex.height, tex.nchannel = width, height, 3
    tex.data = sheet.rgb.tobytes()
    mat = spec.add_material()
    mat.name = "sheet"
    mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "sheet"
    x0, x1, y0, y1 = sheet.x_min, sheet.x_max, sheet.y_min, sheet.y_max
    top, bottom = SHEET_THICKNESS_M, SHEET_THICKNESS_M / 2
    mesh = spec.add_mesh()
    mesh.name = "sheet"
    corners = [(x1, y1), (x1, y0), (x0, y0), (x0, y1)]
    mesh.uservert = [c for z in (top, bottom) for x, y in corners for c in (x, y, z)]
    mesh.usertexcoord = [0, 0, 1, 0, 1, 1, 0, 1] * 2
    mesh.userface = [0, 2, 1, 0, 3, 2, 4, 5, 6, 4, 6, 7, 0, 1, 5, 0, 5, 4,
                     1, 2, 6, 1, 6, 5, 2, 3, 7, 2, 7, 6, 3, 0, 4, 3, 4, 7]
    geom = spec.worldbody.add_geom()
    geom.name = "sheet"
    geom.type = mujoco.mjtGeom.mjGEOM_MESH
    geom.meshname = "sheet"
    geom.material = "sheet"
    geom.contype = 0
    geom.conaffinity = 0
    geom.group = 1


def _look_at_xyaxes(pos, target) -> list[float]:
    pos, target = np.asarray(pos, float), np.asarray(target, float)
    fwd = target - pos
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return [*right.tolist(), *up.tolist()]


# long-function: scene_spec: one declarative scene (arm, table, cube, cameras, lights) read top to
# bottom; left for the owner of this module to split.
def scene_spec(cube_size_m: float, cube_mass_kg: float, *,
               render: RenderSettings = RenderSettings(),
               timestep: float | None = None,
               offscreen_size: tuple[int, int] = (640, 480)) -> mujoco.MjSpec:
    """Arm + table + free cube + cameras + lights, as an editable spec."""
    spec = arm_spec(mesh_cell_mm=render.mesh_cell_mm)
    spec.modelname = "so101_ab_scene"
    if timestep is not None:
        spec.option.timestep = float(timestep)
    # No-slip iterations keep a held cube from creeping out of the jaws (as so101-nexus does).
    spec.option.noslip_iterations = 3

    spec.visual.quality.offsamples = int(render.offsamples)
    spec.visual.quality.shadowsize = 1024 if render.shadows else 0
    spec.visual.global_.offwidth = max(640, int(offscreen_size[0]))
    spec.visual.global_.offheight = max(480, int(offscreen_size[1]))
    # Near clipping plane = znear x extent: keep it at 2 mm so the wrist camera sees the jaws.
    spec.stat.extent = 1.0
    spec.visual.map.znear = 0.002
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35] if render.key_light else [0.4, 0.4, 0.4]
    spec.visual.headlight.diffuse = [0.45, 0.45, 0.45] if render.key_light else [0.6, 0.6, 0.6]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]

    world = spec.worldbody
    if render.key_light or render.shadows:
        light = world.add_light()
        light.name = "key"
        light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        light.pos = [0.3, 0.3, 1.5]
        light.dir = [-0.2, -0.2, -1.0]
        light.diffuse = [0.5, 0.5, 0.5]
        light.castshadow = bool(render.shadows)

    table_mat = spec.add_material()
    table_mat.name = "table"
    table_mat.rgba = [0.78, 0.74, 0.68, 1.0]
    table = world.add_geom()
    table.name = "table"
    table.type = mujoco.mjtGeom.mjGEOM_BOX
    table.size = [(TABLE_X[1] - TABLE_X[0]) / 2, (TABLE_Y[1] - TABLE_Y[0]) / 2, TABLE_THICKNESS / 2]
    table.pos = [(TABLE_X[1] + TABLE_X[0]) / 2, (TABLE_Y[1] + TABLE_Y[0]) / 2, -TABLE_THICKNESS / 2]
    table.material = "table"
    table.friction = [1.0, 0.005, 0.0001]

    _add_sheet(spec)

    # The room's floor at the table's height, visual only (the table box keeps its size so
    # the physics does not change with the view).
    floor = world.add_geom()
    floor.name = "floor_visual"
    floor.type = mujoco.mjtGeom.mjGEOM_BOX
    floor.size = [3.0, 3.0, 0.001]
    floor.pos = [0.0, 0.0, -0.0015]
    floor.material = "table"
    floor.contype = 0
    floor.conaffinity = 0
    floor.group = 1

    # A backdrop behind the robot (visual only) so the front view is not against black.
    wall = world.add_geom()
    wall.name = "backdrop"
    wall.type = mujoco.mjtGeom.mjGEOM_BOX
    wall.size = [0.005, 3.0, 1.5]
    wall.pos = [TABLE_X[0] - 0.005, 0.0, 1.5 - TABLE_THICKNESS]
    wall.rgba = [0.62, 0.70, 0.78, 1.0]
    wall.contype = 0
    wall.conaffinity = 0
    wall.group = 1

    half = cube_size_m / 2.0
    cube = world.add_body()
    cube.name = "cube"
    cube.pos = [0.2, 0.0, half]
    cube.add_freejoint().name = "cube"
    cg = cube.add_geom()
    cg.name = "cube"
    cg.type = mujoco.mjtGeom.mjGEOM_BOX
    cg.size = [half, half, half]
    cg.mass = float(cube_mass_kg)
    cg.rgba = [0.85, 0.15, 0.12, 1.0]
    cg.condim = 4
    cg.friction = [1.0, 0.005, 0.0001]
    cg.solref = [0.01, 1.0]
    # A visual-only dot on the top face so yaw and lift read in the videos.
    dot = cube.add_geom()
    dot.name = "cube_mark"
    dot.type = mujoco.mjtGeom.mjGEOM_BOX
    dot.size = [half * 0.5, half * 0.15, 0.0005]
    dot.pos = [0.0, 0.0, half]
    dot.rgba = [0.95, 0.95, 0.95, 1.0]
    dot.contype = 0
    dot.conaffinity = 0
    dot.mass = 0.0
    dot.density = 0.0

    cam = world.add_camera()
    cam.name = "front"
    cam.pos = list(FRONT_CAMERA_POS)
    cam.fovy = FRONT_CAMERA_FOVY
    # xyaxes via an orientation frame: MjSpec takes quat; build it from the axes.
    xy = _look_at_xyaxes(FRONT_CAMERA_POS, FRONT_CAMERA_TARGET)
    x, y = np.array(xy[:3]), np.array(xy[3:])
    z = np.cross(x, y)
    mat = np.stack([x, y, z], axis=1)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(-1))
    cam.quat = quat.tolist()
    return spec


def build_scene(cube_size_m: float, cube_mass_kg: float, *,
                render: RenderSettings = RenderSettings(),
                timestep: float | None = None,
                offscreen_size: tuple[int, int] = (640, 480)) -> mujoco.MjModel:
    """Compile the scene (see `scene_spec`)."""
    return scene_spec(cube_size_m, cube_mass_kg, render=render, timestep=timestep,
                      offscreen_size=offscreen_size).compile()


def yaw_quat(yaw_deg: float) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation by `yaw_deg` about world z."""
    half = math.radians(yaw_deg) / 2.0
    return np.array([math.cos(half), 0.0, 0.0, math.sin(half)])


def quat_yaw_deg(quat: np.ndarray) -> float:
    """Yaw (degrees, about world z) of a quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in quat)
    return math.degrees(math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def scene_ids(model: Any) -> dict[str, Any]:
    """Addresses the simulated rig reads every step: the arm joints' qpos/qvel/actuator indices,
    the cube's body, geom and free joint, the table's geom, and the geoms of the robot (every
    colliding geom under `base`), of the fixed jaw (the gripper's priority-1 geoms) and of the
    moving jaw, for the contact scan."""
    body = lambda name: model.body(name).id  # noqa: E731
    robot_bodies = set()
    base = body("base")
    for b in range(model.nbody):
        root = b
        while root not in (0, base):
            root = model.body_parentid[root]
        if root == base:
            robot_bodies.add(b)
    geoms_of = lambda pred: np.array([g for g in range(model.ngeom) if pred(g)], dtype=int)  # noqa: E731
    collides = lambda g: model.geom_contype[g] != 0 or model.geom_conaffinity[g] != 0  # noqa: E731
    gripper, jaw = body("gripper"), body("moving_jaw_so101_v1")
    return {
        "qpos": np.array([model.joint(j).qposadr[0] for j in ARM_JOINTS]),
        "qvel": np.array([model.joint(j).dofadr[0] for j in ARM_JOINTS]),
        "act": np.array([model.actuator(j).id for j in ARM_JOINTS]),
        "cube_body": body("cube"),
        "cube_geom": model.geom("cube").id,
        "cube_qpos": model.joint("cube").qposadr[0],
        "table": model.geom("table").id,
        "grasp_site": model.site("grasp").id,
        "robot_geoms": geoms_of(lambda g: model.geom_bodyid[g] in robot_bodies and collides(g)),
        "fixed_jaw": geoms_of(lambda g: model.geom_bodyid[g] == gripper and collides(g)
                              and model.geom_priority[g] == 1),
        "moving_jaw": geoms_of(lambda g: model.geom_bodyid[g] == jaw and collides(g)),
    }


def robot_table_depth(model: Any, data: Any, ids: dict[str, Any]) -> float:
    """How deep (m) the robot's collision geoms (`scene_ids`) go into the table in the data's
    present arm pose; the cube is moved out of the way for it (the caller restores qpos)."""
    adr = ids["cube_qpos"]
    data.qpos[adr:adr + 3] = [10.0, 10.0, 0.5]
    mujoco.mj_forward(model, data)
    depth = 0.0
    robot = set(ids["robot_geoms"].tolist())
    for c in data.contact[:data.ncon]:
        pair = {int(c.geom[0]), int(c.geom[1])}
        if ids["table"] in pair and pair & robot:
            depth = max(depth, -float(c.dist))
    return depth
