from pathlib import Path

from apex_core.hardware.detect import (
    NVIDIA_SMI_QUERY,
    detect,
    parse_amd_smi_static,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
    parse_rocminfo,
)

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


def test_rocminfo_yields_the_gpu_agent_and_skips_the_cpu():
    gpus = parse_rocminfo(recorded("rocminfo_mi355x.txt"))
    assert len(gpus) == 1
    gpu = gpus[0]
    assert gpu["arch"] == "gfx950"
    assert gpu["product_name"] == "AMD Instinct MI355X"
    assert gpu["compute_units"] == 256
    assert gpu["max_clock_mhz"] == 2400
    assert gpu["wavefront_size"] == 64
    assert gpu["l2_kib"] == 4096 and gpu["l3_kib"] == 262144


def test_rocminfo_ignores_the_isa_sections_repeated_name_key():
    gpus = parse_rocminfo(recorded("rocminfo_mi355x.txt"))
    assert gpus[0]["arch"] == "gfx950"  # not 'amdgcn-amd-amdhsa--gfx950:sramecc+:xnack-'


def test_amd_smi_static_in_both_json_shapes():
    new = parse_amd_smi_static(recorded("amd_smi_static_rocm7.json"))[0]
    assert new["arch"] == "gfx950" and new["compute_units"] == 256
    assert new["memory_bytes"] == 294896 * 1024**2
    assert new["driver_version"] == "6.14.14"
    old = parse_amd_smi_static(recorded("amd_smi_static_rocm6.json"))[0]
    assert old["product_name"] == "AMD Instinct MI300X" and old["memory_bytes"] == 196592 * 1024**2


def test_garbage_tool_output_yields_no_gpus():
    assert parse_amd_smi_static("not json") == []
    assert parse_rocm_smi_json("{") == []
    assert parse_nvidia_smi_csv("") == []
    assert parse_rocminfo("") == []


def test_rocm_smi_json_reads_cards_and_the_driver():
    cards = parse_rocm_smi_json(recorded("rocm_smi.json"))
    assert cards == [{"product_name": "AMD Instinct MI300X", "arch": "gfx942", "driver_version": "6.7.0"}]


def test_nvidia_smi_csv_gives_arch_from_compute_capability():
    gpu = parse_nvidia_smi_csv(recorded("nvidia_smi_h200.csv"))[0]
    assert gpu["product_name"] == "NVIDIA H200"
    assert gpu["arch"] == "sm_90"
    assert gpu["driver_version"].startswith("580.")
    assert gpu["memory_bytes"] == 143771 * 1024**2


def _runner(outputs: dict[str, str]):
    def run(argv: list[str]) -> str | None:
        return outputs.get(argv[0])

    return run


def test_an_amd_machine_with_a_cpu_torch_is_found_through_the_vendor_tools():
    device = detect(
        run=_runner({"rocminfo": recorded("rocminfo_mi355x.txt"), "amd-smi": recorded("amd_smi_static_rocm7.json")}),
        torch_probe=lambda: None,
    )
    assert device.vendor == "amd"
    assert device.arch == "gfx950"
    assert device.compute_units == 256
    assert device.driver_version == "6.14.14"
    assert device.detected_by == ["rocminfo", "amd-smi"]


def test_an_nvidia_machine_is_found_through_nvidia_smi():
    device = detect(run=_runner({"nvidia-smi": recorded("nvidia_smi_h200.csv")}), torch_probe=lambda: None)
    assert device.vendor == "nvidia" and device.arch == "sm_90" and device.product_name == "NVIDIA H200"


def test_torch_facts_win_and_tools_fill_the_gaps():
    seen = {"vendor": "nvidia", "product_name": "NVIDIA H200", "arch": "sm_90", "compute_units": 132,
            "memory_bytes": 150_000_000_000, "l2_cache_bytes": 62914560, "device_count": 1,
            "runtime": "CUDA 13.0", "torch_version": "2.11.0"}
    device = detect(run=_runner({"nvidia-smi": recorded("nvidia_smi_h200.csv")}), torch_probe=lambda: seen)
    assert device.memory_bytes == 150_000_000_000
    assert device.driver_version.startswith("580.")
    assert device.detected_by == ["torch", "nvidia-smi"]


def test_a_machine_without_any_gpu_reports_its_cpu():
    device = detect(run=_runner({}), torch_probe=lambda: None)
    assert device.vendor == "cpu"
    assert device.device_count == 0


def test_the_nvidia_query_asks_for_the_fields_the_parser_reads():
    assert NVIDIA_SMI_QUERY.split(",") == ["index", "name", "driver_version", "memory.total", "compute_cap", "clocks.max.sm"]


def test_a_linux_machine_without_gpu_device_nodes_cannot_reach_a_gpu(tmp_path, monkeypatch):
    import importlib

    module = importlib.import_module("apex_core.hardware.detect")
    monkeypatch.setattr(module.sys, "platform", "linux")
    assert module.no_gpu_reachable(tmp_path)
    for node in ("dev/kfd", "dev/nvidiactl", "dev/dxg"):
        root = tmp_path / node.replace("/", "-")
        (root / "dev").mkdir(parents=True)
        (root / node).touch()
        assert not module.no_gpu_reachable(root), node
    monkeypatch.setattr(module.sys, "platform", "darwin")
    assert not module.no_gpu_reachable(tmp_path)  # elsewhere only torch can tell


def test_the_torch_version_comes_from_its_package_without_importing_it():
    import importlib.metadata
    import subprocess
    import sys

    probe = ("import sys; from apex_core.hardware.detect import torch_version; v = torch_version(); "
             "print(v, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == [importlib.metadata.version("torch"), "False"]
