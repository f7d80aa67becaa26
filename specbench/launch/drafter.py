"""``specbench setup drafter``: a random-weight drafter shaped for a target (config.json, and unless
``--no-weights`` a bf16 model.safetensors written with numpy).

Random drafters accept almost nothing; they exist for vLLM's synthetic rejection sampler
(``rejection_sample_method: synthetic``), which sets acceptance while the drafter's real compute
runs, so acceptance is a known answer and the cost is real. DeepSeek's DSpark checkpoints, for
one, exist only for Qwen3-8B and larger.

- dspark (``Qwen3DSparkModel``): vLLM reads ``markov_rank``, ``dflash_config.target_layer_ids`` and
  ``.mask_token_id``; ``block_size`` is written, never ``dspark_block_size`` (vLLM's k guard reads only
  that one), so k below the block is allowed. embed_tokens and lm_head are left out: shared with the target.
- eagle3 (``LlamaForCausalLMEagle3``, or ``Eagle3Qwen3ForCausalLM`` with ``--eagle3-arch qwen3``):
  one layer whose attention reads [embedding, hidden] (2 × hidden), ``fc`` folding three target
  layers' hidden states; ``draft_vocab_size`` = the target's vocabulary (a smaller one needs a
  d2t map, and breaks dummy loading); embed_tokens shared with the target.
- draft_model: the target's own family with fewer layers and the same vocabulary (all vLLM checks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import SpecbenchError
from ..util.diskio import make_output_dir, output_errors
from ..util.tensorfile import TensorSpec, file_size, write_random
from .modelconfig import Dims, ModelConfig, check_output, config_last, copy_tokenizer, read_json, write_json

METHODS = ("dspark", "eagle3", "draft_model")
DEFAULT_LAYERS = {"dspark": 2, "eagle3": 1, "draft_model": 2}
DRAFT_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")  # decoder layers named the same way (model.layers.{i}...)
RECORD = "specbench_drafter.json"
METADATA = {"format": "pt"}  # what torch's save_file writes; transformers reads a file without it as pt too


def millions(n: int) -> str:
    return f"{n / 1e6:.1f} M" if n >= 100_000 else f"{n}"


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


@dataclass(frozen=True)
class DrafterPlan:
    """A drafter before it is written: its config.json and its tensors."""

    method: str
    config: dict[str, object]  # the drafter's config.json, written out whole
    tensors: list[TensorSpec]
    detail: str = ""

    @property
    def parameters(self) -> int:
        return sum(t.numel for t in self.tensors)


def _attention(p: str, d: Dims, in_dim: int, qk_norm: bool, bias: tuple[str, ...] = ()) -> list[TensorSpec]:
    q, kv = d.heads * d.head_dim, d.kv_heads * d.head_dim
    out = [TensorSpec(p + "q_proj.weight", (q, in_dim)), TensorSpec(p + "k_proj.weight", (kv, in_dim)),
           TensorSpec(p + "v_proj.weight", (kv, in_dim)), TensorSpec(p + "o_proj.weight", (d.hidden, q))]
    out += [TensorSpec(f"{p}{n}_proj.bias", ((d.hidden,) if n == "o" else (q if n == "q" else kv,)), "zeros") for n in bias]
    if qk_norm:
        out += [TensorSpec(p + "q_norm.weight", (d.head_dim,), "ones"), TensorSpec(p + "k_norm.weight", (d.head_dim,), "ones")]
    return out


def _mlp(p: str, d: Dims, bias: bool = False) -> list[TensorSpec]:
    out = [TensorSpec(p + "gate_proj.weight", (d.intermediate, d.hidden)), TensorSpec(p + "up_proj.weight", (d.intermediate, d.hidden)),
           TensorSpec(p + "down_proj.weight", (d.hidden, d.intermediate))]
    if bias:
        out += [TensorSpec(p + f"{n}_proj.bias", ((d.hidden,) if n == "down" else (d.intermediate,)), "zeros") for n in ("gate", "up", "down")]
    return out


def _ones(*names: str, n: int) -> list[TensorSpec]:
    return [TensorSpec(name, (n,), "ones") for name in names]


def _common(t: ModelConfig, layers: int) -> dict[str, object]:
    """The config.json keys every drafter of ``t`` has (a Hugging Face config: its keys are the engine's)."""
    d = t.dims
    return {"hidden_size": d.hidden, "num_hidden_layers": layers, "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim, "intermediate_size": d.intermediate,
            "vocab_size": d.vocab, "hidden_act": t.hidden_act, "rms_norm_eps": t.rms_norm_eps,
            "max_position_embeddings": t.max_position_embeddings, "rope_theta": t.rope_theta,
            "attention_bias": False, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def dspark_plan(t: ModelConfig, layers: int = 2, block_size: int = 7, markov_rank: int = 64) -> DrafterPlan:
    """DSpark's layout: Qwen3 decoder layers, ``fc`` over three target layers' hidden states, a low-rank Markov head."""
    d = t.dims
    target_layers = [1, d.layers // 2, d.layers - 2]
    config = {"architectures": ["Qwen3DSparkModel"], "model_type": "qwen3", **_common(t, layers),
              "block_size": block_size, "markov_rank": markov_rank,
              "dflash_config": {"mask_token_id": 0, "target_layer_ids": target_layers}}
    tensors: list[TensorSpec] = []
    for i in range(layers):
        p = f"layers.{i}."
        tensors += _attention(p + "self_attn.", d, d.hidden, qk_norm=True) + _mlp(p + "mlp.", d)
        tensors += _ones(p + "input_layernorm.weight", p + "post_attention_layernorm.weight", n=d.hidden)
    tensors += [TensorSpec("fc.weight", (d.hidden, d.hidden * len(target_layers))),
                *_ones("hidden_norm.weight", "norm.weight", n=d.hidden),
                TensorSpec("markov_head.markov_w1.weight", (d.vocab, markov_rank)),
                TensorSpec("markov_head.markov_w2.weight", (d.vocab, markov_rank))]
    return DrafterPlan("dspark", config, tensors, f"target layers {target_layers}, block_size {block_size}, markov_rank {markov_rank}")


def eagle3_plan(t: ModelConfig, arch: str = "llama") -> DrafterPlan:
    """EAGLE-3's layout: one ``midlayer`` over [embedding, hidden], ``fc`` over three target layers' hidden states."""
    d = t.dims
    aux = [2, d.layers // 2, d.layers - 3]
    qwen = arch == "qwen3"
    architecture = "Eagle3Qwen3ForCausalLM" if qwen else "LlamaForCausalLMEagle3"
    config = {"architectures": [architecture], "model_type": "qwen3" if qwen else "llama", **_common(t, 1),
              "draft_vocab_size": d.vocab, "target_hidden_size": d.hidden, "eagle_aux_hidden_state_layer_ids": aux}
    tensors = _attention("midlayer.self_attn.", d, 2 * d.hidden, qk_norm=qwen) + _mlp("midlayer.mlp.", d)
    tensors += _ones("midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight", "midlayer.post_attention_layernorm.weight",
                     n=d.hidden)
    tensors += [TensorSpec("fc.weight", (d.hidden, 3 * d.hidden)), *_ones("norm.weight", n=d.hidden),
                TensorSpec("lm_head.weight", (d.vocab, d.hidden))]
    return DrafterPlan("eagle3", config, tensors, f"aux hidden state layers {aux}, {architecture}")


def draft_model_plan(t: ModelConfig, layers: int = 2, where: Path = Path("config.json"), weights: bool = True) -> DrafterPlan:
    """The target's own architecture with ``layers`` decoder layers (same vocabulary: vLLM's one check)."""
    d = t.dims
    if weights and d.model_type not in DRAFT_FAMILIES:
        raise SpecbenchError(f"{where}: model_type {d.model_type!r}: draft_model weights are written for "
                             f"{', '.join(DRAFT_FAMILIES)} only (--no-weights writes the config for any family)")
    config = {**t.raw, "num_hidden_layers": layers}
    if t.max_window_layers is not None:
        config["max_window_layers"] = min(t.max_window_layers, layers)
    if t.layer_types is not None:
        config["layer_types"] = t.layer_types[:layers]
    qwen2, qwen3 = d.model_type == "qwen2", d.model_type == "qwen3"
    bias = ("q", "k", "v") if qwen2 else (("q", "k", "v", "o") if t.attention_bias else ())
    tensors = [TensorSpec("model.embed_tokens.weight", (d.vocab, d.hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors += _attention(p + "self_attn.", d, d.hidden, qk_norm=qwen3, bias=bias)
        tensors += _mlp(p + "mlp.", d, bias=t.mlp_bias)
        tensors += _ones(p + "input_layernorm.weight", p + "post_attention_layernorm.weight", n=d.hidden)
    tensors += _ones("model.norm.weight", n=d.hidden)
    if not t.tie_word_embeddings:
        tensors.append(TensorSpec("lm_head.weight", (d.vocab, d.hidden)))
    return DrafterPlan("draft_model", config, tensors, f"{d.model_type} with {layers} of the target's {d.layers} layers")


def plan_for(method: str, target: Mapping[str, object], where: Path, *, layers: int | None = None, block_size: int = 7,
             markov_rank: int = 64, eagle3_arch: str = "llama", weights: bool = True) -> DrafterPlan:
    """The drafter ``method`` for the target config ``target`` (config.json as read from ``where``: checked here)."""
    if method not in METHODS:
        raise SpecbenchError(f"setup drafter: --method {method!r}: expected one of {', '.join(METHODS)}")
    t = ModelConfig.of(target, where)
    d = t.dims
    n = DEFAULT_LAYERS[method] if layers is None else layers
    if n < 1:
        raise SpecbenchError(f"setup drafter: --layers {n}: expected 1 or more")
    if method == "eagle3" and n != 1:
        raise SpecbenchError(f"setup drafter: --layers {n}: an EAGLE-3 drafter has one layer")
    if method in ("dspark", "eagle3") and d.layers < 4:
        raise SpecbenchError(f"{where}: num_hidden_layers {d.layers}: {method} reads three of the target's layers; it needs 4 or more")
    if method == "dspark":
        if block_size < 1 or markov_rank < 1:
            raise SpecbenchError(f"setup drafter: --block-size {block_size} / --markov-rank {markov_rank}: expected 1 or more")
        return dspark_plan(t, n, block_size, markov_rank)
    if method == "eagle3":
        return eagle3_plan(t, eagle3_arch)
    return draft_model_plan(t, n, where, weights)


@dataclass(frozen=True)
class DrafterRecord:
    """What ``setup drafter`` made (``specbench_drafter.json``, beside the drafter's config.json)."""

    made_by: str
    method: str
    target: str
    parameters: int
    detail: str
    weights: str
    files: list[str]
    file_bytes: int | None = None  # model.safetensors' size; None: --no-weights

    def to_dict(self) -> dict[str, object]:
        """As the file has it: ``file_bytes`` after ``weights`` when there are weights, ``files`` last."""
        out: dict[str, object] = {"made_by": self.made_by, "method": self.method, "target": self.target,
                                  "parameters": self.parameters, "detail": self.detail, "weights": self.weights}
        if self.file_bytes is not None:
            out["file_bytes"] = self.file_bytes
        out["files"] = self.files
        return out


def make_drafter(method: str, target: Path, out: Path, *, weights: bool = True, seed: int = 0, force: bool = False,
                 log: Callable[[str], None] = print, layers: int | None = None, block_size: int = 7, markov_rank: int = 64,
                 eagle3_arch: str = "llama") -> DrafterRecord:
    """Write the drafter folder ``out`` for the target folder ``target``; its record (also ``out/specbench_drafter.json``)."""
    where = target / "config.json"
    plan = plan_for(method, read_json(where, "target config"), where, layers=layers, block_size=block_size,
                    markov_rank=markov_rank, eagle3_arch=eagle3_arch, weights=weights)
    check_output(out, force, target)
    with config_last(out):
        make_output_dir(out)
        size = None
        if weights:
            log(f"{out}: writing model.safetensors ({megabytes(file_size(plan.tensors, metadata=METADATA))}, bf16, "
                f"N(0, 0.02²) from seed {seed}) …")
            size = write_random(out / "model.safetensors", plan.tensors, seed=seed, metadata=METADATA)
            filled = f"random bf16, N(0, 0.02²), norms 1, seed {seed}"
        else:
            with output_errors(out / "model.safetensors"):  # --force over a folder with weights: they would be read
                (out / "model.safetensors").unlink(missing_ok=True)
            filled = "none: the engine fills them (the target on load_format: dummy makes its drafter dummy too)"
        files = copy_tokenizer(target, out) if method == "draft_model" else []
        record = DrafterRecord(made_by=f"specbench {__version__} setup drafter", method=method, target=str(target),
                               parameters=plan.parameters, detail=plan.detail, weights=filled,
                               files=["config.json", *(["model.safetensors"] if weights else []), *files], file_bytes=size)
        write_json(out / RECORD, record.to_dict())
        write_json(out / "config.json", plan.config)
    return record
