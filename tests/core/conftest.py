import core_reference
import pytest


@pytest.fixture
def three_groups():
    return core_reference.three_groups()
