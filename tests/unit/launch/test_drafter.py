"""`specbench setup shape|drafter`: model folders for random weights. The safetensors writer (numpy
only), the shape folder's reconciled config and its record, each drafter's layout and parameter
count (the Qwen3-8B shape counted, never allocated), and the one-line refusals."""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from specbench.cli import main
from specbench.errors import SpecbenchError
from specbench.launch.drafter import RECORD as DRAFTER_RECORD
from specbench.launch.drafter import millions, plan_for
from specbench.launch.shape import RECORD, Change, make_shape, read_tokenizer
from specbench.util.tensorfile import StoredTensor, TensorSpec, bf16_bits, bf16_to_float32, file_size, header_bytes, read_header, write_random
from tests.support.paths import DATA, ROOT

TOKENIZER = DATA / "tokenizer"  # a 23-token byte-level BPE: ids 0-19 in model.vocab, 20-22 added (<|endoftext|>, <|im_start|>, <|im_end|>)
QWEN3_8B = ROOT / "suites" / "models" / "qwen3-8b.config.json"


def qwen3_8b(vocab: int = 49152) -> dict:
    return {**json.loads(QWEN3_8B.read_text()), "vocab_size": vocab}


def tiny_target(tmp_path: Path, model_type: str = "qwen3", **over) -> Path:
    d = tmp_path / f"target-{model_type}"
    d.mkdir()
    cfg = {"architectures": ["X"], "model_type": model_type, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 6,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 23, "tie_word_embeddings": False, **over}
    (d / "config.json").write_text(json.dumps(cfg))
    shutil.copy(TOKENIZER / "tokenizer.json", d / "tokenizer.json")
    return d


# ---- safetensors with numpy ------------------------------------------------------------------------

def test_bf16_rounds_to_nearest_even():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.0, np.inf, 0.0], dtype=np.float32)
    # 1+2^-8 is halfway between 1 and 1+2^-7: ties go to the even mantissa (1.0); 1+3·2^-8 ties up to 1+2^-6
    assert [hex(v) for v in bf16_bits(x)] == ["0x3f80", "0x3f80", "0x3f82", "0x3f81", "0xc000", "0x7f80", "0x0"]
    assert np.isnan(bf16_to_float32(bf16_bits(np.array([np.nan], dtype=np.float32))))[0]


def test_written_file_is_header_then_bytes(tmp_path):
    specs = [TensorSpec("a.weight", (3, 5)), TensorSpec("b.weight", (7,), "ones"), TensorSpec("c.bias", (2,), "zeros")]
    path = tmp_path / "m.safetensors"
    size = write_random(path, specs, seed=1, metadata={"format": "pt"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and size == len(raw) == 8 + n + 2 * (15 + 7 + 2) == file_size(specs, metadata={"format": "pt"})
    head = read_header(path)
    start = head.start
    assert head.metadata == {"format": "pt"}
    assert head.tensors["a.weight"] == StoredTensor("BF16", (3, 5), 0, 30)
    assert (head.tensors["b.weight"].begin, head.tensors["b.weight"].end) == (30, 44)
    assert (head.tensors["c.bias"].begin, head.tensors["c.bias"].end) == (44, 48)
    ones = np.frombuffer(raw[start + 30:start + 44], dtype="<u2")
    assert bf16_to_float32(ones).tolist() == [1.0] * 7
    weights = bf16_to_float32(np.frombuffer(raw[start:start + 30], dtype="<u2"))
    assert 0 < np.abs(weights).max() < 0.2  # N(0, 0.02²)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temporary file left beside it


def test_header_reader_refuses_a_cut_file(tmp_path):
    path = tmp_path / "m.safetensors"
    write_random(path, [TensorSpec("a", (4, 4))])
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(SpecbenchError, match="bytes, the header describes"):
        read_header(path)


@pytest.mark.parametrize("header, expect", [(b"[1]", "not a JSON object"), (b'{"a": {"dtype": "BF16"}}', "without dtype"),
                                            (b"{nope", "not JSON")])
def test_header_reader_refuses_a_malformed_header(tmp_path, header, expect):
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(SpecbenchError, match=expect):
        read_header(path)


def test_reference_reader_agrees(tmp_path):
    """The safetensors package (test extra) reads what numpy wrote: names, dtypes, shapes, F32 values exactly."""
    safetensors = pytest.importorskip("safetensors")
    from safetensors.numpy import load_file

    path = tmp_path / "f32.safetensors"
    write_random(path, [TensorSpec("x", (4, 3)), TensorSpec("y", (5,), "ones")], seed=3, dtype="F32")
    loaded = load_file(str(path))
    rng = np.random.default_rng(3)
    assert np.array_equal(loaded["x"], (rng.standard_normal(12, dtype=np.float32) * np.float32(0.02)).reshape(4, 3))
    assert loaded["y"].tolist() == [1.0] * 5
    bf = tmp_path / "bf16.safetensors"
    write_random(bf, [TensorSpec("w", (6, 2)), TensorSpec("n", (6,), "ones")], metadata={"format": "pt"})
    with safetensors.safe_open(str(bf), framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
        assert {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()} == {"w": ("BF16", [6, 2]),
                                                                                                  "n": ("BF16", [6])}


def test_header_bytes_pads_to_eight():
    raw = header_bytes([("abc", "BF16", (1,))])
    assert (len(raw) - 8) % 8 == 0 and raw[8:].rstrip(b" ").endswith(b"}")


# ---- setup shape -----------------------------------------------------------------------------------

def test_tokenizer_size_and_special_ids_read_from_json():
    tok = read_tokenizer(TOKENIZER)
    assert tok.size == 23  # 20 model tokens + 3 added
    assert tok.special_ids == {"bos_token": 21, "eos_token": 22, "pad_token": None}
    assert tok.chat_template.endswith("chat_template.jinja")


def test_shape_reconciles_vocab_and_ids_and_records_each_change(tmp_path, capsys):
    out = tmp_path / "shape"
    assert main(["setup", "shape", "--config", str(QWEN3_8B), "--tokenizer", str(TOKENIZER), "-o", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    original = json.loads(QWEN3_8B.read_text())
    assert cfg == {**original, "vocab_size": 23, "bos_token_id": 21, "eos_token_id": 22}
    record = json.loads((out / RECORD).read_text())
    assert record["changed"] == {"vocab_size": {"old": 151936, "new": 23}, "bos_token_id": {"old": 151643, "new": 21},
                                 "eos_token_id": {"old": 151645, "new": 22}}
    assert sorted(p.name for p in out.iterdir()) == sorted(["config.json", RECORD, "tokenizer.json", "tokenizer_config.json",
                                                            "chat_template.jinja"])
    assert (out / "tokenizer.json").read_bytes() == (TOKENIZER / "tokenizer.json").read_bytes()
    err = capsys.readouterr().err
    assert "vocab_size 151936 → 23" in err and "bos_token_id 151643 → 21" in err and "eos_token_id 151645 → 22" in err


def test_shape_keeps_ids_inside_the_vocabulary_and_trims_id_lists(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 23, "bos_token_id": 1,
                               "eos_token_id": [5, 128009], "pad_token_id": 99}))
    record = make_shape(cfg, TOKENIZER, tmp_path / "out", log=lambda s: None)
    assert record.changed == {"eos_token_id": Change(old=[5, 128009], new=[5]), "pad_token_id": Change(old=99, new=22)}


def test_shape_refuses_a_tokenizer_without_chat_template(tmp_path):
    tok = tmp_path / "tok"
    shutil.copytree(TOKENIZER, tok)
    (tok / "chat_template.jinja").unlink()
    argv = ["setup", "shape", "--config", str(QWEN3_8B), "--tokenizer", str(tok), "-o", str(tmp_path / "out")]
    with pytest.raises(SpecbenchError) as err:
        make_shape(QWEN3_8B, tok, tmp_path / "out")
    assert "no chat template" in str(err.value) and "HTTP 400" in str(err.value) and "--chat-template" in str(err.value)
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    assert main([*argv, "--chat-template", str(TOKENIZER / "chat_template.jinja")]) == 0  # the way to add one
    assert (tmp_path / "out" / "chat_template.jinja").read_bytes() == (TOKENIZER / "chat_template.jinja").read_bytes()


def test_shape_takes_the_template_inside_tokenizer_config(tmp_path):
    tok = tmp_path / "tok"
    shutil.copytree(TOKENIZER, tok)
    (tok / "chat_template.jinja").unlink()
    cfg = json.loads((tok / "tokenizer_config.json").read_text())
    (tok / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": "{{ messages[0]['content'] }}"}))
    assert make_shape(QWEN3_8B, tok, tmp_path / "out", log=lambda s: None).chat_template.endswith("(chat_template)")


@pytest.mark.parametrize("text, expect", [("{", "not valid JSON"), ('{"vocab_size": 10}', "architectures: required")])
def test_shape_refuses_a_bad_config_in_one_line(tmp_path, text, expect):
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    with pytest.raises(SpecbenchError, match=expect) as err:
        make_shape(cfg, TOKENIZER, tmp_path / "out")
    assert str(cfg) in str(err.value) and "\n" not in str(err.value)


def test_shape_will_not_overwrite_without_force(tmp_path):
    out = tmp_path / "out"
    make_shape(QWEN3_8B, TOKENIZER, out, log=lambda s: None)
    with pytest.raises(SpecbenchError, match="config.json exists.*--force"):
        make_shape(QWEN3_8B, TOKENIZER, out)
    make_shape(QWEN3_8B, TOKENIZER, out, force=True, log=lambda s: None)


# ---- setup drafter ---------------------------------------------------------------------------------

DSPARK_LAYER = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm",
                "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm"]


def test_dspark_for_the_qwen3_8b_shape_counts_442_5_m_parameters():
    """The old make_dspark_drafter.py's default (2 layers, block 7, rank 64) on Qwen3-8B with a 49152 vocabulary."""
    plan = plan_for("dspark", qwen3_8b(), QWEN3_8B)
    assert plan.parameters == 442_524_160 and millions(plan.parameters) == "442.5 M"
    shapes = {t.name: t.shape for t in plan.tensors}
    assert set(shapes) == {f"layers.{i}.{n}.weight" for i in range(2) for n in DSPARK_LAYER} | {
        "fc.weight", "hidden_norm.weight", "norm.weight", "markov_head.markov_w1.weight", "markov_head.markov_w2.weight"}
    assert shapes["fc.weight"] == (4096, 3 * 4096) and shapes["markov_head.markov_w1.weight"] == (49152, 64)
    assert shapes["layers.0.self_attn.k_proj.weight"] == (8 * 128, 4096) and shapes["layers.1.mlp.down_proj.weight"] == (4096, 12288)
    cfg = plan.config
    assert cfg["architectures"] == ["Qwen3DSparkModel"] and cfg["markov_rank"] == 64 and cfg["block_size"] == 7
    assert "dspark_block_size" not in cfg  # vLLM's k guard reads only that key: k < block stays allowed
    assert cfg["dflash_config"] == {"mask_token_id": 0, "target_layer_ids": [1, 18, 34]}


def test_eagle3_layout_follows_the_target():
    plan = plan_for("eagle3", qwen3_8b(), QWEN3_8B)
    shapes = {t.name: t.shape for t in plan.tensors}
    assert shapes["midlayer.self_attn.q_proj.weight"] == (4096, 2 * 4096) and shapes["midlayer.self_attn.k_proj.weight"] == (1024, 8192)
    assert shapes["fc.weight"] == (4096, 3 * 4096) and shapes["lm_head.weight"] == (49152, 4096)
    assert {"midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight", "midlayer.post_attention_layernorm.weight",
            "norm.weight"} <= set(shapes)
    assert not any("q_norm" in n or "embed_tokens" in n for n in shapes)  # Llama form; embeddings shared with the target
    cfg = plan.config
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["num_hidden_layers"] == 1
    assert cfg["draft_vocab_size"] == cfg["vocab_size"] == 49152 and cfg["target_hidden_size"] == 4096
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 18, 33]
    qwen = plan_for("eagle3", qwen3_8b(), QWEN3_8B, eagle3_arch="qwen3")
    assert qwen.config["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert {t.name: t.shape for t in qwen.tensors}["midlayer.self_attn.q_norm.weight"] == (128,)


@pytest.mark.parametrize("model_type, tied, bias", [("qwen3", False, False), ("llama", True, False), ("qwen2", False, True)])
def test_draft_model_is_the_target_family_with_fewer_layers(model_type, tied, bias):
    target = {**qwen3_8b(), "model_type": model_type, "tie_word_embeddings": tied}
    plan = plan_for("draft_model", target, QWEN3_8B, layers=3)
    names = {t.name for t in plan.tensors}
    assert plan.config == {**target, "num_hidden_layers": 3, "max_window_layers": 3}
    assert {"model.embed_tokens.weight", "model.norm.weight", "model.layers.2.mlp.down_proj.weight"} <= names
    assert "model.layers.3.mlp.down_proj.weight" not in names
    assert ("lm_head.weight" in names) is not tied
    assert ("model.layers.0.self_attn.q_norm.weight" in names) is (model_type == "qwen3")
    assert ("model.layers.0.self_attn.q_proj.bias" in names) is bias


@pytest.mark.parametrize("method, kw, expect", [
    ("eagle3", {"layers": 2}, "an EAGLE-3 drafter has one layer"),
    ("dspark", {"layers": 0}, "--layers 0"),
    ("medusa", {}, "expected one of dspark, eagle3, draft_model"),
])
def test_drafter_refusals(method, kw, expect):
    with pytest.raises(SpecbenchError, match=expect):
        plan_for(method, qwen3_8b(), QWEN3_8B, **kw)


def test_draft_model_weights_only_for_known_families():
    target = {**qwen3_8b(), "model_type": "deepseek_v3"}
    with pytest.raises(SpecbenchError, match="model_type 'deepseek_v3'.*--no-weights"):
        plan_for("draft_model", target, QWEN3_8B)
    assert plan_for("draft_model", target, QWEN3_8B, weights=False).config["num_hidden_layers"] == 2


def test_drafter_command_writes_a_file_the_plan_describes(tmp_path, capsys):
    target, out = tiny_target(tmp_path), tmp_path / "dspark"
    assert main(["setup", "drafter", "--method", "dspark", "--target", str(target), "-o", str(out)]) == 0
    plan = plan_for("dspark", json.loads((target / "config.json").read_text()), target / "config.json")
    head = read_header(out / "model.safetensors").tensors
    assert {k: v.shape for k, v in head.items()} == {t.name: t.shape for t in plan.tensors}
    assert all(v.dtype == "BF16" for v in head.values())
    size = (out / "model.safetensors").stat().st_size
    assert size == file_size(plan.tensors, metadata={"format": "pt"})
    assert json.loads((out / "config.json").read_text()) == plan.config
    record = json.loads((out / DRAFTER_RECORD).read_text())
    assert record["parameters"] == plan.parameters and record["file_bytes"] == size
    assert f"dspark drafter, {plan.parameters} parameters, model.safetensors {size} bytes" in capsys.readouterr().out


def test_drafter_without_weights_writes_the_config_only(tmp_path, capsys):
    target, out = tiny_target(tmp_path), tmp_path / "eagle3"
    assert main(["setup", "drafter", "--method", "eagle3", "--target", str(target), "--no-weights", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", DRAFTER_RECORD]
    assert "config.json only" in capsys.readouterr().out


def test_draft_model_folder_carries_the_target_tokenizer(tmp_path):
    target, out = tiny_target(tmp_path, "llama", tie_word_embeddings=True), tmp_path / "small"
    assert main(["setup", "drafter", "--method", "draft_model", "--target", str(target), "--layers", "1", "-o", str(out)]) == 0
    assert (out / "tokenizer.json").exists()
    head = read_header(out / "model.safetensors").tensors
    assert "lm_head.weight" not in head and head["model.embed_tokens.weight"].shape == (23, 16)


def test_drafter_needs_a_readable_target(tmp_path, capsys):
    argv = ["setup", "drafter", "--method", "dspark", "--target", str(tmp_path / "none"), "-o", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("config.json: target config not found") and "\n" not in err and not (tmp_path / "o").exists()
