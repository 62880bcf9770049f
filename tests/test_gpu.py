"""GPU path (run by benchmarks/gpu.sh on a CUDA machine; skipped elsewhere)."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from polymask.model import Encoder, EncoderConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_bf16_cuda_forward_matches_fp32_cpu():
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(preset="mini"), 300).eval()
    ids = torch.randint(5, 300, (4, 64))
    reference = model(ids)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        output = model.cuda()(ids.cuda())
    assert (output.float().cpu() - reference).abs().max() < 0.15


def test_unpadded_batches_run_on_the_flash_kernel():
    model = Encoder(EncoderConfig(preset="mini"), 300).cuda()
    ids = torch.randint(5, 300, (8, 128), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        model(ids).float().sum().backward()  # raises if the flash kernel cannot serve the call


@pytest.mark.parametrize("objective", ["mlm", "maelm", "exlm"])
def test_training_steps_on_cuda_lower_the_loss_and_checkpoint_loads_on_cpu(objective, tmp_path):
    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.training.trainer import train
    from tests.conftest import tiny_config

    config = tiny_config("smiles", tmp_path / "run", max_steps=60, eval_batches=4)
    config["train"].update(device="cuda", precision="auto")
    config["objective"] = {"name": objective}
    summary = train(config)
    assert summary["device"].startswith("cuda") and summary["final_val_loss"] < (8.0 if objective == "exlm" else 3.0)
    encoder = read_checkpoint(tmp_path / "run").build_encoder()
    assert next(encoder.parameters()).device.type == "cpu"
