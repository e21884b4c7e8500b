"""deploy/collector/gpm_probe.py: the file it writes on a GPU machine holds NVML's raw answers, and
replaying them through the collector's GpmSource gives back the samples it recorded. Here the
"GPU" is the recording adapter; on a real H100/GH200 the same file becomes a test fixture."""
import json

from .recording import PROBE, UUID0, UUID1, load, two_gpus

probe = load(PROBE, "gpm_probe")


def test_probe_records_raw_nvml_values_and_the_converted_samples(tmp_path, capsys):
    out = tmp_path / "gpm-probe.json"
    code = probe.main(["--seconds", "0.35", "--interval", "0.1", "--out", str(out), "--gpus", "1",
                       "--fields", "1002,1009,1076,1078,155,252"], adapter=two_gpus())
    assert code == 0
    document = json.loads(out.read_text())
    assert document["settings"]["reads"] >= 2 and document["settings"]["fields"] == [1002, 1009, 1076, 1078, 155, 252]
    calls = document["calls"]
    # Raw values as NVML gave them: percent, MiB/s, a per-metric status, NaN, mW, bytes.
    [first_metrics] = [call for call in calls if call["method"] == "gpm_metrics_get"][:1]
    assert first_metrics["args"] == [{"ref": "buffer0"}, {"ref": "buffer1"}, [2, 20, 100, 101]]
    assert first_metrics["result"] == [[2, 0, 62.5], [20, 0, 2048.0], [100, 3, 0.0], [101, 0, {"float": "nan"}]]
    assert [call["result"] for call in calls if call["method"] == "power_usage_mw"][0] == 215500
    assert [call["method"] for call in calls][-3:] == ["gpm_sample_free", "gpm_sample_free", "shutdown"]
    # The samples: DCGM ids and units, only the GPU asked for.
    samples = document["samples"]
    assert {(gpu, uuid) for _, gpu, uuid, _, _ in samples} == {(1, UUID1)}
    assert {(field, value) for _, _, _, field, value in samples} == {
        (1002, 0.625), (1009, 2048.0 * 1024 * 1024), (155, 215.5), (252, 40960.0)}
    assert "samples of fields 155,252,1002,1009" in capsys.readouterr().err

    # Replayed through GpmSource, the recorded answers give the same samples.
    replayed = probe.replay(document)
    assert replayed == [(gpu, uuid, field, value) for _, gpu, uuid, field, value in samples]
    assert UUID0 not in {uuid for _, uuid, _, _ in replayed}


def test_probe_without_nvml_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    assert probe.main(["--seconds", "0.2", "--out", str(tmp_path / "p.json")]) == 1
    assert "pip install nvidia-ml-py" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()
