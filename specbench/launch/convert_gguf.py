"""Convert a GGUF Llama checkpoint into a Hugging Face folder vLLM can load (run with the engine's Python).

transformers can read GGUF but refuses to save it ("quantized with GGUF and is not serializable"),
so the weights are moved into a plain LlamaForCausalLM built from the same config and saved in bf16.
Standalone on purpose: it imports nothing from specbench, only the engine environment's packages.
"""

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = torch.bfloat16
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    if missing or unexpected:
        raise SystemExit(f"{gguf}: weights did not match: missing {missing[:5]}, unexpected {unexpected[:5]}")
    tmp = out.with_name(out.name + ".tmp")
    plain.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out)


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
