"""Procedural knee phantom: a uint8 tissue id per voxel, built plane by plane.

Axes: z (axis 0) along the leg, proximal (femur) up; y anterior (+) / posterior (-);
x medial/lateral. The leg is an elliptic cylinder (outer radius ``R`` ~ 62 mm, a knee
circumference of ~39 cm) of skin (2 mm), subcutaneous fat (8 mm by default: ``subcutis``, the
skin and fat together, is a parameter) and muscle, holding:

* the femur above the joint line: shaft radius 14 mm widening to condyles (35.5 x 29 mm
  semi-axes: 71 mm wide, 58 mm deep) at the joint, a 3 mm cortical shell around cancellous
  bone;
* the tibia below: shaft 13 mm widening to a plateau (36 x 22 mm: 72 x 44 mm).
  Both are the means of men and women in MRI anthropometry: condyles 74.9 +- 3.2 mm wide
  and 61.0 +- 3.1 deep in men, 67.3 +- 3.7 and 54.8 +- 3.3 in women; plateau 76.0 x 46.9 mm
  (men), 67.3 x 41.4 (women) -- 200 Egyptian knees, J Orthop Surg Res (2021), doi
  10.1186/s13018-021-02708-8; the distal femur 74.9 x 64.0 mm (men) and 64.5 x 57.3 (women)
  in 100 Malay knees, Hussain et al., BioMed Res Int 2013:175056, pubmed 24294597;
* articular cartilage (2 mm) on both bone ends and a joint space of synovial fluid (1 mm)
  between them: 5 mm from bone to bone, as the minimum radiographic joint space (both
  cartilages) of healthy knees, 5.7 +- 0.8 mm in men and 4.8 +- 0.7 in women (BMC
  Musculoskelet Disord 9 (2008) 119); mean cartilage thickness 1.6-2.4 mm across 27 healthy
  knees (Eckstein et al. 2001, pubmed 11237657). On a coarse grid each layer is at least a
  voxel;
* the patella (ellipsoid 22 x 11 x 17 mm semi-axes: 44 mm wide, 22 mm thick, 34 mm high,
  as 44.8 +- 4.8, 22.4 +- 2.3 and 34.4 +- 3.8 mm in Caucasian knees, Iranpour et al., as
  tabulated in Arthroplasty (2022), doi 10.1186/s42836-022-00117-8) in front, with 4 mm of
  cartilage behind (4.1 +- 1.3 mm on MRI of 43 young adults, "How thick is the patella?",
  2018), its lower pole 10 mm above the joint line: the patellar tendon is about as long as
  the patella (Insall-Salvati ratio 1.02 +- 0.13) and the lower edge of the patella's
  articular surface lies about 0.8 of that surface's length above the tibial plateau
  (Blackburne-Peel ratio 0.81 +- 0.13, lateral radiographs at 30 degrees of flexion; in
  extension, as here, the patella rides higher still), so the pole sits above the joint
  line, not at it; 10 mm is the low end of that estimate. Between the
  patella and the femur's front (the trochlea; no muscle there) lies fat. The bones sit
  anteriorly in the leg: at the knee the patella, patellar tendon and the tibial tubercle
  lie just under the skin and subcutaneous fat, while the popliteal fossa and the
  calf/hamstring muscles are behind;
* no muscle bellies around the joint line in front and at the sides: between the joint
  line -25 mm and +20 mm (scaled) the soft tissue anterior to the back of the bones is
  fat (the infrapatellar fat pad, the capsule, retinacula and collateral ligaments are
  thin, poorly perfused tissues; the nearest muscles -- vastus medialis, the gastrocnemius
  heads -- lie above the joint line or behind it). Standard knee anatomy; a model
  choice, not a measured geometry;
* the quadriceps tendon: a 7.3 mm layer under the subcutaneous fat (6-7 voxels at 1 mm: the
  elliptic section thins the anterior layers by ~5 %), as wide as the patella, from the
  patella's upper pole, where it inserts, up to 65 mm above
  the patella's upper pole (MRI thickness 7.13-7.41 mm at 1-4 cm
  above the patella, Arthrosc Sports Med Rehabil 5 (2023) e783, pubmed 37388871; measured
  still 6.5 mm thick 65 mm above the pole in cadavers, Stickels et al., Arthrosc Sports
  Med Rehabil 2025, doi 10.1016/j.asmr.2025.101162);
* the suprapatellar pouch: a 2 mm synovial recess in front of the femur behind the patella,
  and above the patella's upper pole up to 66 mm above the joint line (a longitudinal
  extent of 22 mm above the pole, the healthy-volunteer mean of Schmidt et al., Ann Rheum
  Dis 63 (2004) 988) directly under the tendon, with fat between it and the femur (the
  suprapatellar and prefemoral fat pads; their thickness is set by the phantom's femur,
  not measured). This is where Warren et al. 2004 and Martin et al. 2002 placed their
  intra-articular probes (Warren et al., Am J Sports Med 32 (2004) 441, pubmed 14977671;
  Martin et al., Clin Orthop 400 (2002) 184, pubmed 12072761); the probe point is the
  middle of the part above the pole.

Anatomical sizes scale down with the grid when it is too small for a 62 mm leg (tests use
small grids). Cooling devices sit outside the skin on chosen ``sides`` (anterior, posterior,
medial, lateral; each a 100 degree sector) over ``length`` mm centred on the patella: a
bandage layer, then a gel pack of ``thickness`` mm, or a cryo-cuff layer (fixed
temperature); ``device_at`` moves the device's centre along the leg (to cool the thigh
or the calf, where the muscle probes of :meth:`Geometry.points` sit). The first and last
planes are insulator (cut ends of the leg); everything
else outside the leg is air. :func:`planes` is a pure function of global coordinates, so
every rank builds only its own planes and the phantom is the same for any decomposition.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyfw.errors import ConfigurationError

from .tissues import ID

__all__ = ["Geometry", "planes", "SIDES"]

SIDES = {"anterior": 90.0, "posterior": 270.0, "medial": 0.0, "lateral": 180.0}

SUBCUTIS_MM = 10.0     # skin (2 mm) + subcutaneous fat (8 mm), not scaled (the default)
SKIN_MM = 2.0
MUSCLE_PROBE_Z = 40.0  # the thigh and calf muscle probes: this far above / below the joint
TENDON_MM = 7.3        # quadriceps tendon thickness (scaled with the leg)
# bones (semi-axes, mm; scaled with the leg): shaft radius, then (medial-lateral,
# anterior-posterior) at the bone end; the means of men and women (module docstring)
FEMUR_SHAFT, CONDYLE_HALF_WIDTH, CONDYLE_HALF_DEPTH = 14.0, 35.5, 29.0
TIBIA_SHAFT, PLATEAU_HALF_WIDTH, PLATEAU_HALF_DEPTH = 13.0, 36.0, 22.0
BONE_FLARE = 50.0      # a shaft widens to its bone end over this length
CARTILAGE_MM = 2.0     # on each bone end
JOINT_GAP_MM = 1.0     # synovial fluid between the cartilages
PATELLA_HALF = 17.0    # the patella's half-height along the leg
PATELLA_HALF_WIDTH, PATELLA_HALF_THICK = 22.0, 11.0
PATELLA_CARTILAGE = 4.0   # on its posterior face
PATELLA_Z = 10.0 + PATELLA_HALF          # its centre: the lower pole 10 mm above the joint line
PATELLA_TOP = PATELLA_Z + PATELLA_HALF   # its upper pole
JOINT_BAND_TOP = 20.0  # the joint band's fat (no muscle in front) ends here
POUCH_MM = 2.0         # the suprapatellar pouch's fluid depth (healthy; scaled with the leg)
POUCH_TOP = PATELLA_TOP + 22.0   # the suprapatellar pouch's upper end above the joint line
POUCH_PROBE = 0.5 * (PATELLA_TOP + POUCH_TOP)   # the probe: middle of the part above the pole
TENDON_TOP = PATELLA_TOP + 65.0


@dataclass(frozen=True)
class Geometry:
    """Grid and device layout. Lengths in mm."""
    shape: tuple = (200, 160, 160)
    dx: float = 1.0
    device: str = "gel"            # gel | cuff | none
    sides: tuple = ("anterior", "medial", "lateral")
    thickness: float = 15.0        # gel pack thickness
    length: float = 120.0          # pack extent along the leg
    bandage: float = 0.0           # dressing under the device, mm (0: none, as in Params)
    radius: float = 62.0           # outer leg radius if it fits
    subcutis: float = SUBCUTIS_MM  # skin + subcutaneous fat, mm (a skinfold is twice this)
    device_at: float | None = None # the device's centre, mm above the joint line (None:
                                   # the patella's centre)
    pouch: float = POUCH_MM        # fluid in the suprapatellar pouch, mm deep (distended: more)

    def validate(self) -> None:
        """Raise :class:`ConfigurationError` if the grid, device or sides cannot be built."""
        nz, ny, nx = self.shape
        if min(self.shape) < 8:
            raise ConfigurationError(f"grid {self.shape} too small for a knee phantom "
                                     f"(need >= 8 voxels per axis)")
        if self.device not in ("gel", "cuff", "none"):
            raise ConfigurationError(f"unknown cooling device {self.device!r} "
                                     f"(gel, cuff, none)")
        bad = [s for s in self.sides if s not in SIDES]
        if bad:
            raise ConfigurationError(f"unknown side(s) {bad} (known: {', '.join(SIDES)})")
        if self.device != "none" and not self.sides:
            raise ConfigurationError("a cooling device needs at least one side")
        if self.thickness <= 0 or self.bandage < 0 or self.length <= 0 or self.dx <= 0:
            raise ConfigurationError("thickness, length, dx must be > 0 and bandage >= 0")
        if not 0.0 < self.pouch <= 20.0:
            raise ConfigurationError(f"suprapatellar pouch of {self.pouch:g} mm: give a fluid "
                                     f"depth above 0 and up to 20 mm")
        if not SKIN_MM <= self.subcutis <= 40.0:
            raise ConfigurationError(f"subcutis (skin + subcutaneous fat) of {self.subcutis:g} "
                                     f"mm: give {SKIN_MM:g} (skin alone) to 40 mm")
        zmax = 0.5 * (nz - 2) * self.dx
        if not abs(self.device_centre()) < zmax:
            raise ConfigurationError(f"device centre {self.device_centre():g} mm from the joint "
                                     f"line is off the grid (|z| < {zmax:g} mm)")
        if self.device != "none":
            half = 0.5 * (min(ny, nx) - 2) * self.dx
            if self.outer_radius() + self.device_depth() > half:
                raise ConfigurationError(
                    f"the {self.device} ({self.device_depth():g} mm incl. bandage) does not "
                    f"fit outside a {self.outer_radius():g} mm leg in a "
                    f"{ny * self.dx:g} x {nx * self.dx:g} mm cross-section")
            zlen = (nz - 2) * self.dx
            if self.length > zlen:
                raise ConfigurationError(f"pack length {self.length:g} mm is longer than the "
                                         f"grid along the leg ({zlen:g} mm)")
        reach = POUCH_TOP * self.scale + self.dx     # the pouch's top, inside the end plane
        if reach > 0.5 * (nz - 1) * self.dx:
            need = int(np.ceil(2.0 * reach / self.dx - 1e-9)) + 1
            raise ConfigurationError(
                f"grid {self.shape} is {nz * self.dx:g} mm long: too short for the knee, whose "
                f"suprapatellar pouch reaches {POUCH_TOP * self.scale:.3g} mm above the joint "
                f"line; give at least {need} planes along the leg")
        if self.outer_radius() < 6 * self.dx:
            raise ConfigurationError(f"grid {self.shape} leaves a leg of radius "
                                     f"{self.outer_radius():.3g} mm: too small")

    def device_centre(self) -> float:
        """The device's centre along the leg, mm above the joint line: ``device_at``, or
        the patella's centre (a pack on the front of the knee lies over the patella)."""
        return PATELLA_Z * self.scale if self.device_at is None else self.device_at

    def device_depth(self) -> float:
        """How far (mm) the device and the dressing under it reach out from the skin."""
        if self.device == "none":
            return 0.0
        return self.bandage + (self.thickness if self.device == "gel" else 2 * self.dx)

    def outer_radius(self) -> float:
        """The leg radius: ``radius`` or less, to leave room for the device and one air voxel."""
        nz, ny, nx = self.shape
        half = 0.5 * (min(ny, nx) - 2) * self.dx
        depth = self.device_depth() if self.device != "none" else 0.0
        return min(self.radius, half - depth - self.dx) if depth < half else 0.0

    def bone_shift(self) -> float:
        """How far (mm, unscaled) the bones sit anterior of the leg's axis."""
        return 8.0

    def _pouch_y(self, zmm: float) -> float:
        """y (mm from the leg axis) of the middle of the suprapatellar pouch at ``zmm`` above
        the joint line: behind the patella just in front of the femur's anterior cortex,
        above the patella's upper pole just under the quadriceps tendon."""
        s = self.scale
        half = self._pouch_half()
        on_femur = self._femur_front(zmm) + 1.0 * s + half
        if zmm >= PATELLA_TOP * s:
            # under the tendon; on a small leg (the skin and fat do not scale)
            # that would be inside the femur: then on the femur as below the pole
            return max(self._y_at_depth(self.subcutis + TENDON_MM * s + half), on_femur)
        return on_femur

    def _pouch_half(self) -> float:
        """Half the pouch's fluid depth (mm; at least half a voxel)."""
        return 0.5 * max(self.pouch * self.scale, self.dx)

    def _femur_front(self, zmm: float) -> float:
        """y of the femur's anterior surface in the midline ``zmm`` above the joint line."""
        s = self.scale
        gap = self._joint_gap()
        f = min(max((zmm - gap / 2) / (BONE_FLARE * s), 0.0), 1.0)
        depth = CONDYLE_HALF_DEPTH + (FEMUR_SHAFT - CONDYLE_HALF_DEPTH) * f
        return (self.bone_shift() - 5.0) * s + depth * s

    def _joint_gap(self) -> float:
        """The joint space's fluid between the cartilages (mm; at least a voxel). It fills
        the planes at ``-gap/2 < z <= gap/2`` from the joint line: half-open, so a one-voxel
        gap is one plane whether the joint line falls on a plane or between two."""
        return max(JOINT_GAP_MM * self.scale, self.dx)

    def _joint_plane(self) -> int:
        """Index of the lowest plane of the joint space's fluid."""
        zj = self.centre()[0]
        return int(np.floor((zj - self._joint_gap() / 2) / self.dx + 1e-9)) + 1

    def _y_at_depth(self, depth: float) -> float:
        """y of the point ``depth`` mm under the anterior skin in the midline (x = 0)."""
        R = self.outer_radius()
        return 0.95 * R * (1.0 - depth / R)

    @property
    def scale(self) -> float:
        """The leg's radius relative to the default 62 mm (anatomy below the fat scales with
        it)."""
        return self.outer_radius() / 62.0

    def centre(self):
        """(z_joint, y_centre, x_centre) in mm."""
        nz, ny, nx = self.shape
        return 0.5 * (nz - 1) * self.dx, 0.5 * (ny - 1) * self.dx, 0.5 * (nx - 1) * self.dx

    def points(self) -> dict:
        """Named voxel indices (z, y, x) for temperature histories."""
        zj, yc, xc = self.centre()
        s, R, d = self.scale, self.outer_radius(), self.dx

        def vox(z, y, x):
            return (int(round(z / d)), int(round(y / d)), int(round(x / d)))
        ay = 0.95 * R
        yf = self.bone_shift()

        def under_fat(mm):      # x offset of the point ``mm`` below the fat at the sides
            return max(1.05 * R * (1.0 - (self.subcutis + mm * s) / R), 0.0)
        zm = MUSCLE_PROBE_Z * s
        return {
            "joint_centre": (self._joint_plane(),) + vox(zj, yc + (yf - 4) * s, xc)[1:],
            "joint_anterior": vox(zj, yc + (yf + 18) * s, xc),
            "suprapatellar_pouch": vox(zj + POUCH_PROBE * s, yc + self._pouch_y(POUCH_PROBE * s),
                                       xc),
            "skin_anterior": vox(zj, yc + ay - 1.0, xc),
            "subcutaneous_anterior": vox(zj, yc + ay - 4.0, xc),
            "muscle_medial": vox(zj + 25 * s, yc, xc + 1.05 * R - 18 * s),
            "femur_marrow": vox(zj + 60 * s, yc - 5 * s, xc),
            # intramuscular probes 1 and 3 cm below the subcutaneous fat, as placed in
            # cryotherapy studies of the thigh (Otte et al. 2002) and the calf (Myrer et al.
            # 2001): vastus lateralis above the joint, the medial calf below it
            "thigh_lateral_im1": vox(zj + zm, yc, xc - under_fat(10.0)),
            "calf_medial_im1": vox(zj - zm, yc, xc + under_fat(10.0)),
            "calf_medial_im3": vox(zj - zm, yc, xc + under_fat(30.0)),
        }


def _ellipse(y, x, ay, ax):
    return (y / ay) ** 2 + (x / ax) ** 2


def planes(geo: Geometry, z0: int, z1: int) -> np.ndarray:
    """Tissue ids of global planes ``z0:z1``, shape ``(z1 - z0, ny, nx)``, dtype uint8."""
    nz, ny, nx = geo.shape
    d, R = geo.dx, geo.outer_radius()
    zj, yc, xc = geo.centre()
    z = (np.arange(z0, z1) * d - zj)[:, None, None]
    y = (np.arange(ny) * d - yc)[None, :, None]
    x = (np.arange(nx) * d - xc)[None, None, :]
    shp = (z1 - z0, ny, nx)
    out = np.full(shp, ID["air"], dtype=np.uint8)
    ax, ay = 1.05 * R, 0.95 * R
    rho = np.sqrt(_ellipse(y, x, ay, ax))                       # 1 at the skin surface
    depth = np.broadcast_to((1.0 - rho) * R, shp)                # ~mm below the skin
    leg = depth >= 0
    out[leg] = ID["muscle"]
    out[leg & (depth < geo.subcutis)] = ID["fat"]
    out[leg & (depth < SKIN_MM)] = ID["skin"]
    _bones_and_joint(out, geo, z, y, x, depth)
    _patella(out, geo, z, y, x, ay)
    if geo.device != "none":
        _device(out, geo, z, y, x, ax, ay, depth)
    # grid boundary: insulator at the cut ends, air around
    if z0 == 0:
        out[0] = np.where(out[0] == ID["air"], ID["air"], ID["insulator"])
    if z1 == nz:
        out[-1] = np.where(out[-1] == ID["air"], ID["air"], ID["insulator"])
    out[:, 0, :] = out[:, -1, :] = ID["air"]
    out[:, :, 0] = out[:, :, -1] = ID["air"]
    return out


def _bones_and_joint(out, geo, z, y, x, depth) -> None:
    """Femur and tibia (elliptic sections blending from shaft to condyle/plateau near the
    joint, cortical shell, cartilage caps), the joint space, the quadriceps tendon and the
    suprapatellar pouch."""
    shp = out.shape
    d, s = geo.dx, geo.scale
    gap = geo._joint_gap()
    cart = max(CARTILAGE_MM * s, d)
    yf = geo.bone_shift()
    # joint band: fat instead of muscle in front of the back of the bones
    band = (z > -25.0 * s) & (z < JOINT_BAND_TOP * s) & (y > (yf - 25.0) * s)
    out[np.broadcast_to(band, shp) & (out == ID["muscle"])] = ID["fat"]
    # behind the patella, above the band: fat between it and the femur (the trochlea's fat
    # pads), not muscle
    behind = ((z >= JOINT_BAND_TOP * s) & (z <= PATELLA_TOP * s) & (y > 0)
              & (np.abs(x) <= PATELLA_HALF_WIDTH * s))
    out[np.broadcast_to(behind, shp) & (out == ID["muscle"])] = ID["fat"]
    bones = ((+1, FEMUR_SHAFT, CONDYLE_HALF_WIDTH, CONDYLE_HALF_DEPTH, yf - 5.0),
             (-1, TIBIA_SHAFT, PLATEAU_HALF_WIDTH, PLATEAU_HALF_DEPTH, yf - 3.0))
    for sign, shaft, wide_x, wide_y, yoff in bones:
        # distance from the bone end; the femur's starts just above the fluid's top plane
        zz = sign * z - gap / 2 - (1e-6 * d if sign > 0 else 0.0)
        f = np.clip(zz / (BONE_FLARE * s), 0.0, 1.0)
        bx = (wide_x + (shaft - wide_x) * f) * s
        by = (wide_y + (shaft - wide_y) * f) * s
        e = _ellipse(y - yoff * s, x, by, bx)
        inside = (zz >= 0) & (e <= 1.0)
        shell = 1.0 - 3.0 * s / np.minimum(bx, by)
        out[inside] = ID["cortical_bone"]
        out[inside & (e < shell ** 2)] = ID["cancellous_bone"]
        out[inside & np.broadcast_to(zz < cart, shp)] = ID["cartilage"]
    joint = ((z > -gap / 2) & (z <= gap / 2)
             & (_ellipse(y - (yf - 4.0) * s, x, (CONDYLE_HALF_DEPTH + 1.0) * s,
                         (CONDYLE_HALF_WIDTH + 1.0) * s) <= 1.0))
    out[np.broadcast_to(joint, shp)] = ID["synovial_fluid"]
    # quadriceps tendon under the subcutaneous fat, as wide as the patella
    tendon = ((z >= PATELLA_TOP * s) & (z <= TENDON_TOP * s)
              & (np.abs(x) <= PATELLA_HALF_WIDTH * s) & (y > 0)
              & (depth >= geo.subcutis) & (depth < geo.subcutis + TENDON_MM * s))
    out[tendon & (out == ID["muscle"])] = ID["tendon"]
    # suprapatellar pouch: ``pouch`` mm of fluid (2), 22 mm wide; above the patella under
    # the tendon, with the fat pads between it and the femur
    zz, yy, xx = z[:, 0, 0], y[0, :, 0], x[0, 0, :]
    soft = (ID["muscle"], ID["fat"])
    for kz, zmm in enumerate(zz):
        if gap / 2 <= zmm <= POUCH_TOP * s:
            yp = geo._pouch_y(zmm)
            h = geo._pouch_half()
            mid = (np.abs(xx) <= 11.0 * s)[None, :]
            if zmm >= PATELLA_TOP * s:
                pads = ((yy < yp - h) & (yy > geo._femur_front(zmm)))[:, None] & mid
                out[kz][pads & np.isin(out[kz], soft)] = ID["fat"]
            sel = (np.abs(yy - yp) <= h)[:, None] & mid
            out[kz][sel & np.isin(out[kz], soft + (ID["tendon"],))] = ID["synovial_fluid"]


def _patella(out, geo, z, y, x, ay) -> None:
    """The patella, with cartilage on its posterior face."""
    s = geo.scale
    t = PATELLA_HALF_THICK * s
    py = ay - 2.0 - 4.0 * s - t                 # 6 mm of skin + fat in front of it
    e = (((z - PATELLA_Z * s) / (PATELLA_HALF * s)) ** 2 + ((y - py) / t) ** 2
         + (x / (PATELLA_HALF_WIDTH * s)) ** 2)
    pat = e <= 1.0
    out[pat] = ID["cortical_bone"]
    out[pat & (e < (1.0 - 2.0 * s / t) ** 2)] = ID["cancellous_bone"]
    back = y < py - t + PATELLA_CARTILAGE * s
    out[pat & np.broadcast_to(back, out.shape)] = ID["cartilage"]


def _device(out, geo, z, y, x, ax, ay, depth) -> None:
    """The cooling device (and the dressing under it) outside the skin, over its sides."""
    shp = out.shape
    ang = np.degrees(np.arctan2(y / ay, x / ax)) % 360.0
    sector = np.zeros((1,) + shp[1:], dtype=bool)
    for side in geo.sides:
        diff = np.abs((ang - SIDES[side] + 180.0) % 360.0 - 180.0)
        sector |= diff <= 50.0
    over = (np.broadcast_to(np.abs(z - geo.device_centre()) <= geo.length / 2, shp)
            & np.broadcast_to(sector, shp))
    outside = -depth                                              # mm outside the skin
    band = over & (outside > 0) & (outside <= geo.bandage)
    dev = over & (outside > geo.bandage) & (outside <= geo.device_depth())
    out[band] = ID["bandage"]
    out[dev] = ID["gel"] if geo.device == "gel" else ID["cuff"]
