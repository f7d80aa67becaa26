"""The export's gpu label from the accelerator meta.json records (issue 38 item 5): the model's short slug,
cpu when none was named."""

import pytest

from specbench.schemas.accelerator import Accelerator, model_slug


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("Tesla V100-SXM2-16GB", "v100"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA H100 NVL", "h100"), ("NVIDIA RTX A6000", "rtxa6000"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA A10G", "a10g"), ("AMD Instinct MI300X", "mi300x"), ("NVIDIA", "unknown"), ("../../etc", "etc"),
])
def test_a_model_slug_is_short_and_safe_in_a_path(name, slug):
    assert model_slug(name) == slug


def test_the_label_is_cpu_when_no_accelerator_was_named():
    assert Accelerator(count=0, source="none", why="engine vllm-cpu runs on the CPU").slug == "cpu"
    assert Accelerator(gpus=["0"], why="GPU 0 not read: NVML: nvidia-ml-py is not installed").slug == "cpu"
    assert Accelerator(name="NVIDIA H200", count=8).slug == "h200"
    assert Accelerator(name="NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-80GB", count=2).slug == "h100_a100"
