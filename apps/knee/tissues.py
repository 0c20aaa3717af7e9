"""Tissue property table for the knee model (one row per tissue id; voxels store the id).

Sources (values are defaults, overridable from the CLI with ``--set tissue.prop=value``):

* k, rho, c of **bone, fat and muscle**: IT'IS Foundation tissue database as listed in the
  COMSOL Bioheat materials library (doc.comsol.com/6.0, "Bioheat materials", which cites
  IT'IS: Hasgall et al., "IT'IS Database for thermal and electromagnetic parameters of
  biological tissues", itis.swiss/database).
* skin, cancellous bone, cartilage: IT'IS database values (v4.x) — quoted from memory in our
  research notes, not re-checked: treat as plausible defaults.
* perfusion: IT'IS "heat transfer rate" HTR (mL/min/kg) converted as
  ``omega = HTR * rho * 1e-6 / 60`` (1/s); metabolic heat: IT'IS heat generation rate (W/kg)
  times rho. Both vary widely in the literature (IT'IS says so); they are tunable.
* synovial fluid: bovine measurement k = 0.62 W/(m K), c = 3900 J/(kg K) (Hot Disk TPS,
  CMBBE 2012 proceedings); avascular, no metabolism.
* bandage (cotton dressing), gel (water/glycol gel pack) and cuff: engineering assumptions,
  not literature values. The gel does not freeze in the model (no latent heat), so a
  frozen pack is represented only by its starting temperature: conservative (it warms
  faster than a real frozen pack).

Blood: rho_b = 1050 kg/m^3, c_b = 3617 J/(kg K) (IT'IS blood), arterial T_a = 37 C.

"boundary" tissues are not updated: they hold a fixed temperature (air at ambient, a cryo-cuff
at its liquid temperature) and exchange heat with a neighbouring conducting voxel through a
face coefficient ``h`` (W/(m^2 K)) if their ``k`` is 0, or through the harmonic-mean
conductivity if ``k > 0`` (a Dirichlet node). ``insulator`` (h = 0) closes the cut ends
of the leg (zero flux, a symmetry plane).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pyfw.errors import ConfigurationError

__all__ = ["Tissue", "DEFAULT_TISSUES", "RHO_BLOOD", "C_BLOOD", "T_ARTERIAL", "tissue_table",
           "ID"]

RHO_BLOOD = 1050.0
C_BLOOD = 3617.0
T_ARTERIAL = 37.0


@dataclass(frozen=True)
class Tissue:
    """One material. ``k`` W/(m K), ``rho`` kg/m^3, ``c`` J/(kg K), ``perfusion`` omega_b 1/s,
    ``qm`` metabolic heat W/m^3. Boundary materials keep their temperature and have either
    ``k = 0`` and a face coefficient ``h`` W/(m^2 K), or ``k > 0`` (Dirichlet node)."""
    name: str
    k: float = 0.0
    rho: float = 1.0
    c: float = 1.0
    perfusion: float = 0.0
    qm: float = 0.0
    h: float = 0.0
    boundary: bool = False

    def validate(self) -> None:
        if self.boundary:
            if self.k < 0 or self.h < 0 or (self.k > 0 and self.h > 0):
                raise ConfigurationError(f"boundary tissue {self.name!r} needs either k > 0 "
                                         f"(a fixed-temperature conductor) or k = 0, h >= 0")
        elif not (self.k > 0 and self.rho > 0 and self.c > 0 and self.perfusion >= 0):
            raise ConfigurationError(f"tissue {self.name!r} needs k, rho, c > 0 and "
                                     f"perfusion >= 0 (got {self})")


def _htr(htr_ml_min_kg: float, rho: float) -> float:
    return htr_ml_min_kg * rho * 1e-6 / 60.0


# order = tissue id
DEFAULT_TISSUES = (
    Tissue("air", boundary=True, h=10.0),          # natural convection + radiation
    Tissue("insulator", boundary=True, h=0.0),     # cut ends of the leg: zero flux
    Tissue("skin", 0.37, 1109, 3391, _htr(106, 1109), 1.65 * 1109),
    Tissue("fat", 0.21, 911, 2348, _htr(33, 911), 0.51 * 911),
    Tissue("muscle", 0.49, 1090, 3421, _htr(37, 1090), 0.91 * 1090),
    Tissue("cortical_bone", 0.32, 1908, 1313, _htr(10, 1908), 0.15 * 1908),
    Tissue("cancellous_bone", 0.31, 1178, 2274, _htr(30, 1178), 0.42 * 1178),
    Tissue("cartilage", 0.49, 1100, 3568, 0.0, 0.0),
    Tissue("synovial_fluid", 0.62, 1000, 3900, 0.0, 0.0),
    Tissue("bandage", 0.06, 400, 1300, 0.0, 0.0),
    Tissue("gel", 0.50, 1050, 3500, 0.0, 0.0),
    Tissue("cuff", boundary=True, h=500.0),        # liquid behind a thin wall
)

#: tissue id by name for the default table
ID = {t.name: i for i, t in enumerate(DEFAULT_TISSUES)}


def tissue_table(overrides: dict | None = None, base=DEFAULT_TISSUES) -> tuple:
    """The tissue table with ``overrides`` ``{"muscle.k": 0.5, "air.h": 8}`` applied.
    Unknown tissues or properties raise :class:`ConfigurationError`."""
    table = list(base)
    names = {t.name: i for i, t in enumerate(table)}
    for key, value in (overrides or {}).items():
        tname, _, prop = key.partition(".")
        if tname not in names:
            raise ConfigurationError(f"unknown tissue {tname!r} (known: {', '.join(names)})")
        if prop not in ("k", "rho", "c", "perfusion", "qm", "h"):
            raise ConfigurationError(f"unknown tissue property {prop!r} in {key!r} "
                                     f"(k, rho, c, perfusion, qm, h)")
        i = names[tname]
        table[i] = replace(table[i], **{prop: float(value)})
    for t in table:
        t.validate()
    return tuple(table)
