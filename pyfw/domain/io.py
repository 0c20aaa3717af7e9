"""HDF5 snapshots (+ XDMF for ParaView/VisIt) and atomic checkpoints of a slab domain.

The PyPI h5py wheel is serial (no ``mpio`` driver), so every write gathers one field at a time
to rank 0, which is the only writer. Files hold **global** arrays ``(nz, ny, nx)`` and plain
attributes, so they are readable with h5py alone and a run restarts on any number of ranks.

Snapshot file layout::

    /<static name>            e.g. /tissue (uint8), written once
    /<field>/<step:08d>       e.g. /T/00000120, attrs: step, time
    attrs: shape, spacing (dz, dy, dx), origin, format = "pyfw.domain.snapshots"

Checkpoint file layout::

    /<field>                  every field needed to continue (global arrays)
    attrs: format = "pyfw.domain.checkpoint", shape, cuts (informative), plus caller attrs

A checkpoint is written to ``<path>.tmp`` and renamed over ``<path>`` (the old one is kept as
``<path>.prev``), so a crash never leaves a half-written checkpoint under the real name.
Errors (unwritable directory, unreadable file) are raised on every rank.
"""
from __future__ import annotations

import json
import os

import h5py
import numpy as np

from ..errors import ConfigurationError
from .comms import agree

__all__ = ["SnapshotFile", "save_checkpoint", "read_checkpoint", "load_fields", "write_xdmf"]

SNAP_FORMAT = "pyfw.domain.snapshots"
CKPT_FORMAT = "pyfw.domain.checkpoint"


def _attr(v):
    if isinstance(v, (dict, list, tuple)) and not (isinstance(v, (list, tuple)) and v
                                                  and all(isinstance(x, (int, float))
                                                          for x in v)):
        return json.dumps(v)
    return v


def _cannot(what, path, e) -> ConfigurationError:
    return ConfigurationError(f"cannot {what} {path!r}: {type(e).__name__}: {e}")


# ------------------------------------------------------------------------------ checkpoints
def save_checkpoint(dom, path: str, names, attrs: dict | None = None,
                    keep_previous: bool = True) -> None:
    """Write the named fields (global arrays) and ``attrs`` to ``path`` atomically.
    Collective; raises on every rank if rank 0 cannot write."""
    tmp = path + ".tmp"
    f = None
    exc = None
    if dom.rank == 0:
        try:
            f = h5py.File(tmp, "w")
            f.attrs["format"] = CKPT_FORMAT
            f.attrs["shape"] = np.array(dom.shape)
            f.attrs["cuts"] = np.asarray(dom.cuts)
            f.attrs["fields"] = json.dumps(list(names))
            for k, v in (attrs or {}).items():
                f.attrs[k] = _attr(v)
        except Exception as e:  # noqa: BLE001 - reported on every rank below
            exc = _cannot("write checkpoint", path, e)
    agree(dom.comm, exc, f"checkpoint {path!r}")
    for name in names:
        g = dom.gather(name, 0)
        if dom.rank == 0 and exc is None:
            try:
                f.create_dataset(name, data=g)
            except Exception as e:  # noqa: BLE001
                exc = _cannot("write checkpoint", path, e)
    if dom.rank == 0:
        try:
            f.close()
            if exc is None:
                if keep_previous and os.path.exists(path):
                    os.replace(path, path + ".prev")
                os.replace(tmp, path)
        except Exception as e:  # noqa: BLE001
            exc = exc or _cannot("write checkpoint", path, e)
    agree(dom.comm, exc, f"checkpoint {path!r}")


def read_checkpoint(comm, path: str) -> dict:
    """Attributes of a checkpoint (``shape``, ``fields``, caller attrs), on every rank.
    ``comm`` is a pyfw Comm. Raises ConfigurationError on every rank if it is unreadable."""
    meta, exc = None, None
    if comm.rank == 0:
        try:
            with h5py.File(path, "r") as f:
                if f.attrs.get("format") != CKPT_FORMAT:
                    raise ConfigurationError(f"{path!r} is not a pyfw checkpoint")
                meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                        for k, v in f.attrs.items()}
                meta["fields"] = json.loads(meta["fields"])
                for name in meta["fields"]:
                    if name not in f or tuple(f[name].shape) != tuple(meta["shape"]):
                        raise ConfigurationError(f"{path!r}: field {name!r} missing or of "
                                                 f"the wrong shape")
        except ConfigurationError as e:
            exc = e
        except Exception as e:  # noqa: BLE001
            exc = ConfigurationError(f"cannot read checkpoint {path!r}: "
                                     f"{type(e).__name__}: {e}")
    agree(comm, exc, "read checkpoint")
    meta = comm.mpi.bcast(meta, root=0)
    meta["shape"] = tuple(int(s) for s in meta["shape"])
    return meta


def load_fields(dom, path: str, names) -> None:
    """Fill the named fields of ``dom`` from a checkpoint (rank 0 reads, then scatters the
    slabs, whatever the rank count that wrote it). Collective."""
    for name in names:
        g, exc = None, None
        if dom.rank == 0:
            try:
                with h5py.File(path, "r") as f:
                    g = f[name][...]
            except Exception as e:  # noqa: BLE001
                exc = ConfigurationError(f"cannot read {name!r} from {path!r}: {e}")
        agree(dom.comm, exc, "load checkpoint")
        dom.scatter(name, g, root=0)
    dom.exchange(list(names))


# ------------------------------------------------------------------------------ snapshots
class SnapshotFile:
    """A time series of fields in one HDF5 file, plus an XDMF file beside it.

    ``static``: names of fields written once at creation (e.g. a material id).
    ``spacing``/``origin``: voxel size and origin in (z, y, x) order, for the XDMF geometry.
    Collective: create and call :meth:`write` on every rank.
    """

    def __init__(self, dom, path: str, static=(), spacing=(1.0, 1.0, 1.0),
                 origin=(0.0, 0.0, 0.0), xdmf: bool = True):
        self.dom, self.path = dom, path
        self.spacing, self.origin = tuple(spacing), tuple(origin)
        self.xdmf_path = os.path.splitext(path)[0] + ".xmf" if xdmf else None
        self.static = {}
        self.steps: list[tuple[int, float, list[str]]] = []
        exc = None
        if dom.rank == 0:
            try:
                with h5py.File(path, "w") as f:
                    f.attrs["format"] = SNAP_FORMAT
                    f.attrs["shape"] = np.array(dom.shape)
                    f.attrs["spacing"] = np.array(self.spacing, dtype=float)
                    f.attrs["origin"] = np.array(self.origin, dtype=float)
            except Exception as e:  # noqa: BLE001
                exc = _cannot("create snapshot file", path, e)
        agree(dom.comm, exc, f"snapshot file {path!r}")
        for name in static:
            self._write({name: f"/{name}"})
            self.static[name] = dom.fields[name].dtype

    def _write(self, where: dict, attrs: dict | None = None) -> None:
        exc = None
        for name, h5name in where.items():
            g = self.dom.gather(name, 0)
            if self.dom.rank == 0 and exc is None:
                try:
                    with h5py.File(self.path, "a") as f:
                        d = f.create_dataset(h5name, data=g)
                        for k, v in (attrs or {}).items():
                            d.attrs[k] = v
                except Exception as e:  # noqa: BLE001
                    exc = _cannot("write snapshot", self.path, e)
        agree(self.dom.comm, exc, f"snapshot {self.path!r}")

    def write(self, step: int, time: float, names=("T",)) -> None:
        """Append the named fields at ``step``/``time`` and rewrite the XDMF file."""
        self._write({n: f"/{n}/{step:08d}" for n in names}, {"step": step, "time": time})
        self.steps.append((int(step), float(time), list(names)))
        if self.xdmf_path:
            exc = None
            if self.dom.rank == 0:
                try:
                    write_xdmf(self.xdmf_path, os.path.basename(self.path), self.dom.shape,
                               self.spacing, self.origin, self.steps,
                               {n: self.dom.fields[n].dtype for n in names}, self.static)
                except Exception as e:  # noqa: BLE001 - reported on every rank below
                    exc = _cannot("write", self.xdmf_path, e)
            # rank 0 alone must not raise: the others would wait for it in the next exchange
            agree(self.dom.comm, exc, f"snapshot {self.xdmf_path!r}")


_NUM = {"f": "Float", "i": "Int", "u": "UInt"}


def _dataitem(h5file, h5path, shape, dtype) -> str:
    dt = np.dtype(dtype)
    num = "UChar" if dt == np.uint8 else ("Char" if dt == np.int8 else _NUM[dt.kind])
    dims = " ".join(str(s) for s in shape)
    return (f'<DataItem Dimensions="{dims}" NumberType="{num}" Precision="{dt.itemsize}" '
            f'Format="HDF">{h5file}:{h5path}</DataItem>')


def write_xdmf(path, h5file, shape, spacing, origin, steps, dtypes, static) -> None:
    """Write an XDMF 2 temporal collection of 3DCoRectMesh grids (dimensions and geometry
    listed slowest axis first: z y x) referring to datasets in ``h5file``."""
    dims = " ".join(str(s) for s in shape)
    geo = (f'<Geometry GeometryType="ORIGIN_DXDYDZ">'
           f'<DataItem Dimensions="3" NumberType="Float" Precision="8" Format="XML">'
           f'{" ".join(repr(float(o)) for o in origin)}</DataItem>'
           f'<DataItem Dimensions="3" NumberType="Float" Precision="8" Format="XML">'
           f'{" ".join(repr(float(s)) for s in spacing)}</DataItem></Geometry>')
    grids = []
    for step, time, names in steps:
        attrs = [f'<Attribute Name="{n}" AttributeType="Scalar" Center="Node">'
                 f'{_dataitem(h5file, f"/{n}/{step:08d}", shape, dtypes.get(n, np.float64))}'
                 f'</Attribute>' for n in names]
        attrs += [f'<Attribute Name="{n}" AttributeType="Scalar" Center="Node">'
                  f'{_dataitem(h5file, f"/{n}", shape, dt)}</Attribute>'
                  for n, dt in static.items()]
        grids.append(f'<Grid Name="step_{step:08d}" GridType="Uniform">'
                     f'<Time Value="{time!r}"/>'
                     f'<Topology TopologyType="3DCoRectMesh" Dimensions="{dims}"/>'
                     f'{geo}{"".join(attrs)}</Grid>')
    text = ('<?xml version="1.0" ?>\n<Xdmf Version="2.0">\n<Domain>\n'
            '<Grid Name="series" GridType="Collection" CollectionType="Temporal">\n'
            + "\n".join(grids) + "\n</Grid>\n</Domain>\n</Xdmf>\n")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
