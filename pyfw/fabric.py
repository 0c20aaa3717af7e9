"""Open MPI defaults that suit this host's network: no libfabric BTL where no fabric exists.

Open MPI 5 opens its libfabric BTL (``btl/ofi``) at every ``MPI_Init``. On a host without an
RDMA device the component finds nothing to drive and is closed again, and its close ends
with an unconditional ``sleep(1)`` (``mca_btl_ofi_component_close``: "If we don't sleep,
sockets provider freaks out"). Every rank of every job, and every process that initializes
MPI alone, so waits a second for nothing: measured here, a bare ``MPI_Init`` takes 1.09 s
as a singleton and 0.08 s with the component left out; a 2-rank job's 1.08 s against 0.06 s.

:func:`exclude_idle_ofi` leaves the component out (``OMPI_MCA_btl=^ofi``) only where it could
not have been used: no RDMA device on this host (InfiniBand/RoCE/EFA and Omni-Path appear
under ``/sys/class/infiniband``, HPE Slingshot under ``/sys/class/cxi``) and no BTL choice
of the user's (``OMPI_MCA_btl`` in the environment, or a ``btl`` line in an MCA parameter
file). ``import pyfw`` applies it to its own process before MPI is initialized there, and
:mod:`pyfw.comm` takes it back out of the environment once MPI is up (marked as pyfw's own
default by ``PYFW_OFI_DEFAULT``), so that processes started later, perhaps on other hosts,
decide for their own host. The launcher (:func:`pyfw.launch.mpi_env`) applies it to a job
that runs on this host alone (no host list, no batch allocation), where it also helps
programs that never import pyfw. ``PYFW_KEEP_OFI=1`` turns it off.
"""
from __future__ import annotations

import glob
import os
import sys

__all__ = ["BTL_VAR", "DEFAULT_MARK", "fabric_devices", "user_chose_btl", "exclude_idle_ofi",
           "forget_default", "launch_is_local"]

#: the Open MPI parameter naming the BTL components to use (or, with ``^``, to leave out)
BTL_VAR = "OMPI_MCA_btl"
#: set beside BTL_VAR when the value is pyfw's default for this host, not the user's choice
DEFAULT_MARK = "PYFW_OFI_DEFAULT"
_OPT_OUT = "PYFW_KEEP_OFI"
#: mpiexec options that place ranks on other hosts
_HOST_OPTIONS = ("--host", "-H", "--hostfile", "--machinefile", "--default-hostfile")
#: a batch allocation, whose nodes mpiexec uses on its own
_ALLOCATION_ENV = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID", "FLUX_JOB_ID")
#: where an RDMA-capable device shows up on Linux
_DEVICE_GLOBS = ("/sys/class/infiniband/*", "/sys/class/cxi/*", "/dev/hfi1_*")


def fabric_devices(root: str = "") -> list[str]:
    """The RDMA devices of this host (empty on Ethernet-only machines)."""
    return sorted(p for g in _DEVICE_GLOBS for p in glob.glob(root + g))


def _param_files(env) -> list[str]:
    """The MCA parameter files Open MPI reads: the user's, the installation's and any named
    by ``OMPI_MCA_mca_base_param_files``."""
    home = env.get("HOME") or os.path.expanduser("~")
    files = [os.path.join(home, ".openmpi", "mca-params.conf"),
             os.path.join(sys.prefix, "etc", "openmpi-mca-params.conf")]
    prefix = env.get("OPAL_PREFIX")
    if prefix:
        files.append(os.path.join(prefix, "etc", "openmpi-mca-params.conf"))
    named = env.get("OMPI_MCA_mca_base_param_files", "")
    files += [f for f in named.replace(",", ":").split(":") if f]
    return files


def user_chose_btl(env) -> bool:
    """Whether the BTLs were chosen already: in the environment or in a parameter file."""
    if BTL_VAR in env:
        return True
    for path in _param_files(env):
        try:
            with open(path) as f:
                for line in f:
                    if line.split("#", 1)[0].split("=", 1)[0].strip() == "btl":
                        return True
        except OSError:
            continue
    return False


def exclude_idle_ofi(env: dict, root: str = "", mark: bool = False) -> bool:
    """Leave Open MPI's libfabric BTL out in ``env`` where this host has no fabric for it and
    the user chose no BTLs; True if ``env`` was changed. ``mark``: say it is pyfw's default
    (:data:`DEFAULT_MARK`), for :func:`forget_default`."""
    if env.get(_OPT_OUT, "") not in ("", "0") or user_chose_btl(env) or fabric_devices(root):
        return False
    env[BTL_VAR] = "^ofi"
    if mark:
        env[DEFAULT_MARK] = "1"
    return True


def forget_default(env: dict) -> bool:
    """Take pyfw's own default (a marked :func:`exclude_idle_ofi`) back out of ``env``; True
    if it was there. A user's ``OMPI_MCA_btl`` is never touched."""
    if env.pop(DEFAULT_MARK, None) is None:
        return False
    env.pop(BTL_VAR, None)
    return True


def launch_is_local(argv, env) -> bool:
    """Whether an mpiexec command line runs every rank on this host: no host list on it and
    no batch allocation in ``env`` (whose nodes mpiexec would use)."""
    if any(k in env for k in _ALLOCATION_ENV):
        return False
    return not any(a in _HOST_OPTIONS or a.split("=", 1)[0] in _HOST_OPTIONS for a in argv)
