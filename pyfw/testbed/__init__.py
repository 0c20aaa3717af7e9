"""Multi-node test bed on one machine: one net + UTS namespace per node, veth pairs into a
bridge, optional tbf caps on both ends of a node's veth.  Nothing in the runtimes imports it."""
from .netns import TestBed, up, down, status  # noqa: F401
