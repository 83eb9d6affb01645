import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

# ../shared/data beside the checkout (in CI too).
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data():
    """Path of ../shared/data; skips the test with the reason when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _two_threads():
    import multiscale_rnn as msr

    msr.set_num_threads(int(os.environ.get("MULTISCALE_RNN_TEST_THREADS", "2")))
    yield


@pytest.fixture
def one_thread():
    """One thread for tests that compare runs exactly: results are fixed for a given thread count,
    and two threads on a machine busy with other work wait on each other."""
    import multiscale_rnn as msr

    old = msr.get_num_threads()
    msr.set_num_threads(1)
    yield
    msr.set_num_threads(old)
