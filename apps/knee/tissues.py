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
  not literature values. ``gel`` never freezes (no latent heat): a non-freezing glycol gel.
* ``ice`` (frozen water-based pack, ``--pack ice``): water/ice properties, latent heat
  L = 334 kJ/kg, c = 4180 J/(kg K) liquid and 2050 J/(kg K) frozen, melting over
  -1..0 C (a narrow range standing for the gel's solutes); the enthalpy method for the
  melting pack (L = 334 kJ/kg, the latent heat of water). Its conductivity is held at the liquid value
  0.6 W/(m K) (ice: 2.2): the tissue table has one k per material, so the frozen part of
  the pack conducts too slowly (conservative: the pack delivers its cold more slowly).
  The phase change is an enthalpy formulation (see ``kernel._melt``).

Temperature-dependent perfusion and metabolism (cold-induced vasoconstriction): both are
scaled by ``q10 ** ((T - tref) / 10)`` for T < tref (factor 1 above tref; hyperthermic
vasodilation is outside this model's scope). Sources: omega(T) = omega0 Q10^((T-37)/10) (the
research notes' law for skin and fat, applied here below ``tref`` to skin, fat, muscle and
tendon) following Khoshnevis et al. 2015 (PMC4395553: skin perfusion falls strongly under
cryotherapy and stays low) and Fiala, Lomas & Stohrer, J. Appl. Physiol. 87 (1999)
1957-1972, whose passive system scales local basal metabolism with Q10 = 2 and the basal
perfusion in proportion to it (quoted from memory, not re-checked). Defaults: Q10 = 3.65 for
skin, fat, muscle and tendon (see ``Q10_TISSUE``), ``tref = 37`` C (the IT'IS perfusion
values taken as values at 37 C); bone, cartilage and fluid keep constant rates. ``q10 = 1``
gives the classic constant-perfusion Pennes model (``--set skin.q10=1`` ...).

Blood: rho_b = 1050 kg/m^3, c_b = 3617 J/(kg K) (IT'IS blood). Arterial temperature: 37 C
is the core value (``T_ARTERIAL``, the solver's default for generic use); the knee model
uses ``T_ARTERIAL_KNEE`` = 34.5 C (see there: the limb's inflow is cooler than the core;
``--t-arterial``).

``contact`` is a thermal contact resistance (m^2 K/W) that a tissue adds on each face it
shares with a different conducting tissue; a boundary tissue with ``k = 0`` puts its own in
series with its ``h`` (a conducting tissue's contact does not apply towards the air). A
pack in a bag, or crushed ice with air pockets, does not touch the skin everywhere
(``--set ice.contact=0.01`` is a contact conductance of 100 W/(m^2 K)). The
packs and the cuff have ``ICE_CONTACT``, fitted by the validation benchmark on muscle
cooled under a bag of crushed ice (it fits the bag's film, 1e-4); every other tissue
has 0 (perfect contact).

"boundary" tissues are not updated: they hold a fixed temperature (air at ambient, a cryo-cuff
at its liquid temperature) and exchange heat with a neighbouring conducting voxel through a
face coefficient ``h`` (W/(m^2 K)) if their ``k`` is 0, or through the harmonic-mean
conductivity if ``k > 0`` (a Dirichlet node). ``insulator`` (h = 0) closes the cut ends
of the leg (zero flux, a symmetry plane).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pyfw.errors import ConfigurationError

__all__ = ["Tissue", "DEFAULT_TISSUES", "RHO_BLOOD", "C_BLOOD", "T_ARTERIAL", "tissue_table",
           "ID", "perfusion_factor", "Q10_TISSUE", "T_ARTERIAL_KNEE"]

RHO_BLOOD = 1050.0
C_BLOOD = 3617.0
T_ARTERIAL = 37.0

#: default arterial (inflow) temperature of the knee region, C. The Pennes model settles
#: perfused deep tissue near T_a; with the core value 37 C the uncooled knee comes out at
#: 37 C, against 34.8 +- 1 C measured intra-articular at the start of knee surgery
#: (Cryo/Cuff study, Am J Knee Surg 1998, pubmed 9853997) and 31.4-32.2 C in the notch of
#: resting healthy knees (Becher et al., BMC Musculoskelet Disord 9:46, 2008). The model
#: does not resolve what makes the limb cooler than the core (arterial blood cooled on its
#: way down the thigh by countercurrent exchange with the returning veins, conduction along
#: the limb), so the inflow temperature is taken from an independent measurement near the
#: knee instead: tibialis anterior muscle 34.55 +- 1.02 C (Flouris et al.,
#: Physiol. Meas. 36:N103, 2015: the temperature of well-perfused muscle just below the
#: knee, which in a Pennes model is ~T_a; that study's mean over its whole protocol of
#: supine rest, cycling and recovery). ``--t-arterial 37`` gives the core value.
T_ARTERIAL_KNEE = 34.5
#: cold response of skin, fat, muscle and tendon perfusion (and metabolism). Local skin
#: cooling from 34 to 28 C cut skin blood flow to 42-46 % of baseline at three forearm
#: sites (Hodges et al., Am J Physiol Heart Circ Physiol 293 (2007) H3187): Q10 =
#: 3.65-4.25. The validation study (python -m apps.knee.studies validation) fits it over
#: that range together with
#: ICE_CONTACT on the thigh muscle under ice of Otte et al. 2002 (the thick-fat groups,
#: where the perfusion carrying heat back decides). Known deviations from the sources: the
#: same Q10 scales metabolism (Fiala et al. 1999 use 2 there; metabolic heat is small
#: next to perfusion here), muscle's response is the skin's extrapolated (Thorsson et al.
#: 1985 measured muscle flow -49 % after 10 min of cold), and the factor counts from
#: ``tref`` = 37 C where Hodges' baseline skin was at 34 C. The fit is flat here: on the
#: measured knee anatomy 3.65 and 4 score 0.1155 and 0.1161 (mean relative error over
#: Otte's four groups), so 3.65, the range's low end, wins by a hair.
Q10_TISSUE = 3.65
#: contact resistance of a bagged pack on the skin, m^2 K/W: fitted with Q10_TISSUE by
#: the validation study on the minutes a 750 g crushed-ice bag needs to cool the
#: thigh's muscle 1 cm under the fat by 7 C (Otte et al., Arch Phys Med Rehabil 83 (2002)
#: 1501; four groups of fat, 47 volunteers), from the bag's own film up: 0.05 mm of
#: polyethylene adds ~1e-4, and 0.01 already makes the thin-fat group cool 1.6x too slowly.
#: The fit is the film alone, the end of that range. The skin then sits a few degrees above
#: the ice, colder than the 11.5 C Oosterveld et al. 1992 read under ice chips (a held-out
#: target). A gel pack in its film and a cryo-cuff's bladder get the same.
ICE_CONTACT = 1e-4
#: a cryo-cuff's liquid-to-wall coefficient (an engineering assumption); its skin contact
#: (ICE_CONTACT) is in series with it
CUFF_H = 500.0


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
    q10: float = 1.0          # perfusion and metabolism x q10**((T - tref)/10) below tref
    tref: float = 37.0
    latent: float = 0.0       # J/kg released/absorbed between t_solidus and t_liquidus
    c_solid: float = 0.0      # J/(kg K) below t_solidus (0: same as c)
    t_solidus: float = 0.0
    t_liquidus: float = 0.0
    contact: float = 0.0      # m^2 K/W on every face with another conducting tissue

    @property
    def phase_change(self) -> bool:
        """Whether this material melts (has a latent heat)."""
        return self.latent > 0

    def validate(self) -> None:
        """Raise :class:`ConfigurationError` if the properties are not physical."""
        if self.boundary:
            if self.k < 0 or self.h < 0 or (self.k > 0 and self.h > 0):
                raise ConfigurationError(f"boundary tissue {self.name!r} needs either k > 0 "
                                         f"(a fixed-temperature conductor) or k = 0, h >= 0")
        elif not (self.k > 0 and self.rho > 0 and self.c > 0 and self.perfusion >= 0):
            raise ConfigurationError(f"tissue {self.name!r} needs k, rho, c > 0 and "
                                     f"perfusion >= 0 (got {self})")
        if not (self.q10 >= 1.0 and math.isfinite(self.q10) and math.isfinite(self.tref)):
            raise ConfigurationError(f"tissue {self.name!r}: q10 must be >= 1 (1: constant "
                                     f"perfusion) and tref finite")
        if not (self.contact >= 0 and math.isfinite(self.contact)):
            raise ConfigurationError(f"tissue {self.name!r}: contact resistance must be a "
                                     f"finite value >= 0 (m^2 K/W)")
        if self.latent < 0 or self.c_solid < 0:
            raise ConfigurationError(f"tissue {self.name!r}: latent and c_solid must be >= 0")
        if self.latent > 0 and (self.boundary or not self.t_liquidus > self.t_solidus):
            raise ConfigurationError(f"tissue {self.name!r}: a phase change needs a "
                                     f"conducting tissue and t_liquidus > t_solidus")


def _htr(htr_ml_min_kg: float, rho: float) -> float:
    return htr_ml_min_kg * rho * 1e-6 / 60.0


# order = tissue id
DEFAULT_TISSUES = (
    Tissue("air", boundary=True, h=10.0),          # natural convection + radiation
    Tissue("insulator", boundary=True, h=0.0),     # cut ends of the leg: zero flux
    Tissue("skin", 0.37, 1109, 3391, _htr(106, 1109), 1.65 * 1109, q10=Q10_TISSUE),
    Tissue("fat", 0.21, 911, 2348, _htr(33, 911), 0.51 * 911, q10=Q10_TISSUE),
    Tissue("muscle", 0.49, 1090, 3421, _htr(37, 1090), 0.91 * 1090, q10=Q10_TISSUE),
    Tissue("cortical_bone", 0.32, 1908, 1313, _htr(10, 1908), 0.15 * 1908),
    Tissue("cancellous_bone", 0.31, 1178, 2274, _htr(30, 1178), 0.42 * 1178),
    # cartilage: IT'IS values (not re-checked); a measured bovine value is k 0.21, c 3200
    # (research notes): the cartilage layers are thin, between bone and fluid
    Tissue("cartilage", 0.49, 1100, 3568, 0.0, 0.0),
    Tissue("synovial_fluid", 0.62, 1000, 3900, 0.0, 0.0),
    Tissue("bandage", 0.06, 400, 1300, 0.0, 0.0),
    Tissue("gel", 0.50, 1050, 3500, 0.0, 0.0, contact=ICE_CONTACT),    # a pack in a bag
    Tissue("cuff", boundary=True, h=CUFF_H, contact=ICE_CONTACT),      # liquid, wall, skin
    Tissue("ice", 0.6, 1000, 4180, 0.0, 0.0, latent=334e3, c_solid=2050.0,
           t_solidus=-1.0, t_liquidus=0.0, contact=ICE_CONTACT),  # --pack ice
    # quadriceps tendon (appended: ids of the older rows stay as they were). rho: IT'IS
    # "Tendon\\Ligament" 1142 kg/m^3; k, c: IT'IS values quoted in our notes (not
    # re-checked); perfusion: peritendinous blood flow at rest, 1.8 mL/100 g/min by Xe-133
    # washout (Langberg et al., Clin Physiol 19 (1999) 89); metabolic heat neglected (a
    # nearly acellular tissue)
    Tissue("tendon", 0.47, 1142, 3432, _htr(18, 1142), 0.0, q10=Q10_TISSUE),
)

#: tissue id by name for the default table
ID = {t.name: i for i, t in enumerate(DEFAULT_TISSUES)}


PROPS = ("k", "rho", "c", "perfusion", "qm", "h", "q10", "tref", "latent", "c_solid", "contact",
         "t_solidus", "t_liquidus")


def perfusion_factor(T: float, q10: float, tref: float) -> float:
    """The vasoconstriction law: ``q10 ** ((T - tref) / 10)`` below ``tref``, 1 above."""
    return q10 ** ((min(T, tref) - tref) / 10.0)


def tissue_table(overrides: dict | None = None, base=DEFAULT_TISSUES) -> tuple:
    """The tissue table with ``overrides`` ``{"muscle.k": 0.5, "air.h": 8}`` applied.
    Unknown tissues or properties raise :class:`ConfigurationError`."""
    table = list(base)
    names = {t.name: i for i, t in enumerate(table)}
    for key, value in (overrides or {}).items():
        tname, _, prop = key.partition(".")
        if tname not in names:
            raise ConfigurationError(f"unknown tissue {tname!r} (known: {', '.join(names)})")
        if prop not in PROPS:
            raise ConfigurationError(f"unknown tissue property {prop!r} in {key!r} "
                                     f"({', '.join(PROPS)})")
        i = names[tname]
        table[i] = replace(table[i], **{prop: float(value)})
    for t in table:
        t.validate()
    return tuple(table)
