"""TensorFlow 2.20+ prints absl's notice and ``I`` lines (oneDNN, CPU features) while loading, before its logging
reads ``TF_CPP_MIN_LOG_LEVEL``; once any module of amanda_tf is imported, the first ``import tensorflow`` honours
the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from amanda_tf.framework import filter_start_up_lines

pytest.importorskip("tensorflow")

PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
INFO = "I0000 00:00:1795706250.709016    4281 port.cc:153] oneDNN custom operations are on.\n"
INFO_2 = ("I0000 00:00:1795706250.754677    4281 cpu_feature_guard.cc:227] This TensorFlow binary is optimized.\n"
          "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n")
WARN = "W0000 00:00:1795706250.8    4281 some.cc:1] a warning\n"
ERROR = "E0000 00:00:1795706250.9    4281 other.cc:2] an error\nits second line\n"


def test_the_filter_leaves_out_lines_below_the_level_with_their_continuations_and_keeps_the_rest():
    text = PREAMBLE + INFO + "a line of someone else's\n" + INFO_2 + WARN + ERROR + "Traceback (most recent ...\n"
    assert filter_start_up_lines(text, 0) == text
    assert filter_start_up_lines(text, 1) == WARN + ERROR + "Traceback (most recent ...\n"
    assert filter_start_up_lines(text, 2) == ERROR + "Traceback (most recent ...\n"
    assert filter_start_up_lines(text, 3) == ""
    # a plain line that follows no log line is kept; one that continues a dropped log line is not
    assert filter_start_up_lines("plain\n" + INFO + "continued\n", 1) == "plain\n"


def _import_tensorflow(level: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    code = ("import os, amanda_tf.dtypes\n"  # any module of the package: `check` reads a cached registry
            "os.write(2, b'before\\n')\n"
            "import tensorflow\n"
            "os.write(2, b'after\\n')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_the_first_import_honours_the_level_and_keeps_what_others_write():
    quiet = _import_tensorflow("2")
    assert "oneDNN" not in quiet and "absl::InitializeLog" not in quiet and "I0000" not in quiet, quiet
    assert quiet.startswith("before\n") and quiet.endswith("after\n"), quiet
    loud = _import_tensorflow(None)  # unset: TensorFlow's own default, every line
    assert "before\n" in loud and "after\n" in loud
    if "I0000" not in loud:
        pytest.skip("this TensorFlow prints no start-up lines: nothing to leave out")
    assert "absl::InitializeLog" in loud
