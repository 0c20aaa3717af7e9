"""The test bed for a test module: ``yield from bed_up(suffix, nodes, slots)`` in a
module-scoped fixture brings nodes up under the suite's prefix plus ``suffix``, skips with
the printed reason where namespaces are unavailable, and always tears them down."""
import os

import pytest


def bed_up(suffix: str, nodes: int, slots: int):
    from pyfw.testbed import TestBed
    from pyfw.testbed.netns import refuse_reason
    reason = refuse_reason()
    if reason:
        print(f"test bed unavailable: {reason}")
        pytest.skip(reason)
    tb = TestBed(os.environ.get("PYFW_TEST_TESTBED_PREFIX", "pfw") + suffix)
    try:
        yield tb.up(nodes=nodes, slots=slots)
    finally:
        tb.down()
