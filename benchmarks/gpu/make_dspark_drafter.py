"""A random-weight Qwen3 DSpark drafter for a Llama/Qwen-shaped target (run where torch is).

    python make_dspark_drafter.py TARGET_DIR OUT_DIR [--layers 2] [--block-size 7] [--seed 0]

DeepSeek's DSpark checkpoints are for Qwen3-8B and larger; for a small target (SmolLM2-135M)
there is none. Its acceptance would be near zero with random weights, but vLLM's synthetic
rejection sampler (``rejection_sample_method: synthetic``) sets acceptance per position while the
drafter's real compute still runs, so acceptance is a known answer and the cost is real.
Shapes follow the target's config (hidden, heads, vocab); embed_tokens and lm_head are left out
so vLLM shares the target's. The config sets ``block_size`` (not ``dspark_block_size``), so vLLM
accepts num_speculative_tokens below the block size (k=3).
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("target", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=7)
    ap.add_argument("--markov-rank", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from safetensors.torch import save_file

    t = json.loads((args.target / "config.json").read_text())
    hidden, heads, kv = t["hidden_size"], t["num_attention_heads"], t.get("num_key_value_heads", t["num_attention_heads"])
    head_dim = t.get("head_dim") or hidden // heads
    inter, vocab, n_target = t["intermediate_size"], t["vocab_size"], t["num_hidden_layers"]
    target_layers = [1, n_target // 2, n_target - 2]
    config = {
        "architectures": ["Qwen3DSparkModel"], "model_type": "qwen3",
        "hidden_size": hidden, "num_hidden_layers": args.layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": head_dim, "intermediate_size": inter, "vocab_size": vocab,
        "hidden_act": "silu", "rms_norm_eps": t.get("rms_norm_eps", 1e-5),
        "max_position_embeddings": t.get("max_position_embeddings", 8192),
        "rope_theta": t.get("rope_theta", 10000.0), "attention_bias": False, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "block_size": args.block_size, "markov_rank": args.markov_rank,
        "dflash_config": {"mask_token_id": 0, "target_layer_ids": target_layers},
    }
    g = torch.Generator().manual_seed(args.seed)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    w = {}
    for i in range(args.layers):
        p = f"layers.{i}."
        w[p + "self_attn.q_proj.weight"] = rnd(heads * head_dim, hidden)
        w[p + "self_attn.k_proj.weight"] = rnd(kv * head_dim, hidden)
        w[p + "self_attn.v_proj.weight"] = rnd(kv * head_dim, hidden)
        w[p + "self_attn.o_proj.weight"] = rnd(hidden, heads * head_dim)
        w[p + "self_attn.q_norm.weight"] = ones(head_dim)
        w[p + "self_attn.k_norm.weight"] = ones(head_dim)
        w[p + "mlp.gate_proj.weight"] = rnd(inter, hidden)
        w[p + "mlp.up_proj.weight"] = rnd(inter, hidden)
        w[p + "mlp.down_proj.weight"] = rnd(hidden, inter)
        w[p + "input_layernorm.weight"] = ones(hidden)
        w[p + "post_attention_layernorm.weight"] = ones(hidden)
    w["fc.weight"] = rnd(hidden, hidden * len(target_layers))
    w["hidden_norm.weight"] = ones(hidden)
    w["norm.weight"] = ones(hidden)
    w["markov_head.markov_w1.weight"] = rnd(vocab, args.markov_rank)
    w["markov_head.markov_w2.weight"] = rnd(vocab, args.markov_rank)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file(w, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    print(f"{args.out}: {sum(x.numel() for x in w.values()) / 1e6:.1f} M random parameters, target layers {target_layers}")


if __name__ == "__main__":
    main()
