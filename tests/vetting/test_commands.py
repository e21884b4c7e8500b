"""import_vetting and validate_vetnode_protocol in a terminal."""
import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.vetting.models import VettingRun

DATA = Path(__file__).parent / "data"


def test_import_vetting_stores_good_files_and_reports_bad_ones_by_line(topology, tmp_path):
    broken = tmp_path / "broken.txt"
    broken.write_text((DATA / "vetnode-0.1.5-plain.txt").read_text().replace("| nid001235 | ❌", "| nid001235 | ?"))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="1 of 3 files were not imported"):
        call_command("import_vetting", str(DATA / "vetnode-0.0.8-legacy.txt"), str(broken),
                     str(DATA / "dcgmi-diag-3x-r2-gpu2-memory-fail.json"), "--host", "nid000100", stdout=out, stderr=err)
    assert f"{broken}:11:15: nid001235 Rank-0: expected one of ✅ ❌ ⏭️ ❓, found '?'" in err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("(vetnode-legacy), 4 results on 2 nodes; failed: nid001235")
    assert lines[1].endswith("(dcgm-diag), 17 results on 1 nodes; failed: nid000100")
    assert VettingRun.objects.count() == 2 and VettingRun.objects.filter(submitter="import_vetting").count() == 2


def test_validate_vetnode_protocol_prints_compiler_style_lines(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("name: ok\nevals:\n  - name: gpu\n    type: vetnode.evaluations.gpu_eval.GPUEval\n    max_temp: 30\n    max_used_memory: 0.2\n")
    bad.write_text("name: bad\nevals:\n  - name: gpu\n    type: vetnode.evaluations.gpu_eval.GPUEval\n    max_temp: 30\n")
    out = io.StringIO()
    call_command("validate_vetnode_protocol", str(good), stdout=out)
    assert out.getvalue() == ""
    with pytest.raises(CommandError, match="1 error"):
        call_command("validate_vetnode_protocol", str(good), str(bad), stdout=out)
    assert out.getvalue().startswith(f"{bad}:3:5: error: evaluation 'gpu' (GPUEval) needs max_used_memory")
