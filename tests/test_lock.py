"""amanda lock, convert --lock (refusal listing every difference), provenance in outputs, byte-identical reruns."""

from __future__ import annotations

import json

import pytest

from amanda_core.cli.main import main
from amanda_core.errors import AmandaError
from amanda_core.lock import differences, environment, read_lock

from .rulepack_support import ROOT

pytest.importorskip("amanda_onnx")
pytest.importorskip("onnx")

MODEL = ROOT / "examples" / "onnx" / "small_cnn_opset11.onnx"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def lock_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("lock") / "amanda.lock"
    assert main(["lock", "-o", str(path)]) == 0
    return path.read_text()


def test_lock_records_versions_and_table_hashes(lock_text):
    data = json.loads(lock_text)
    assert data["amanda"] and data["plugins"]["amanda-onnx"]["version"]
    assert data["frameworks"]["onnx"].startswith("onnx ")
    assert "12" in data["namespaces"]["amanda/onnx"]
    table = data["tables"]["amanda-onnx:onnx-opset-11-to-12"]
    assert table["hash"].startswith("sha256:") and len(table["hash"]) == 71
    assert differences(data, environment()) == []


def test_convert_with_a_matching_lock_and_byte_identical_reruns(tmp_path, capsys, lock_text):
    lock = tmp_path / "amanda.lock"
    lock.write_text(lock_text)
    for ext in ("onnx", "yaml"):
        outputs = []
        for i in range(2):
            (tmp_path / f"run{i}").mkdir(exist_ok=True)
            out = tmp_path / f"run{i}" / f"out.{ext}"  # same name: a YAML file names its tensor file
            code, _, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx/13", "-o", out, "--lock", lock)
            assert code == 0, err
            outputs.append(b"".join(p.read_bytes() for p in sorted(out.parent.iterdir())))
        assert outputs[0] == outputs[1], ext
        assert b"amanda.provenance" in outputs[0]
    code, out, _ = run(capsys, "inspect", tmp_path / "run0" / "out.onnx")
    assert "converted: by amanda-core" in out and "amanda/onnx/11 -> amanda/onnx/13" in out
    assert "table onnx-opset-11-to-12 (amanda-onnx)" in out
    code, out, _ = run(capsys, "inspect", tmp_path / "run0" / "out.yaml", "--json")
    record = json.loads(out)["provenance"]
    assert [t["name"] for t in record["tables"]] == ["onnx-opset-11-to-12", "onnx-opset-12-to-13"]
    assert record["source"] == "amanda/onnx/11" and record["target"] == "amanda/onnx/13"


def test_convert_refuses_a_lock_that_differs_and_lists_every_difference(tmp_path, capsys, lock_text):
    data = json.loads(lock_text)
    data["plugins"]["amanda-onnx"]["version"] = "0.0.1"
    data["frameworks"]["onnx"] = "onnx 1.0.0"
    data["tables"]["amanda-onnx:onnx-opset-11-to-12"]["hash"] = "sha256:" + "0" * 64
    del data["tables"]["amanda-onnx:onnx-opset-12-to-13"]
    data["tables"]["pack:gone"] = {"src": "a/b/1", "dst": "a/c/1", "hash": "sha256:" + "1" * 64}
    lock = tmp_path / "amanda.lock"
    lock.write_text(json.dumps(data))
    out = tmp_path / "o.onnx"
    code, _, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx/13", "-o", out, "--lock", lock)
    assert code == 2 and not out.exists()
    assert "does not match" in err and "5 difference(s)" in err
    for text in ("plugin amanda-onnx is amanda-onnx", "the lock says amanda-onnx 0.0.1",
                 "framework onnx is onnx ", "the lock says onnx 1.0.0", "table amanda-onnx:onnx-opset-11-to-12",
                 "table amanda-onnx:onnx-opset-12-to-13 is here but not in the lock",
                 "table pack:gone is in the lock but not here"):
        assert text in err, text
    code, _, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx/13", "-o", out)  # no --lock: as before
    assert code == 0, err


def test_bad_lock_files(tmp_path):
    with pytest.raises(AmandaError, match="no such lock file"):
        read_lock(tmp_path / "missing.lock")
    bad = tmp_path / "bad.lock"
    bad.write_text("{not json")
    with pytest.raises(AmandaError, match=r"bad.lock:1: not a lock file"):
        read_lock(bad)
    bad.write_text("{}")
    with pytest.raises(AmandaError, match="not an amanda lock file"):
        read_lock(bad)
