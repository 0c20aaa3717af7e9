"""Multi-node test bed on one machine (root): one net + UTS namespace per node, veth pairs
into a bridge, tc caps, CPU quotas, real Open MPI daemons per node (``pyfw-cluster``).
Nothing in the runtimes imports it."""
from .netns import TestBed, down, job_env, status, up  # noqa: F401
