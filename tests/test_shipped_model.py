"""The SMILES encoder that ships inside the package (docs/results/moleculenet-scale/): listed, loadable by
name, within the size limit, and a working masked-LM whose predictions use the context."""
import re

import torch

import polymask
from polymask.builtin_models import PACKAGE_DIR
from polymask.cli import main

NAME = "smiles-mlm-1.7m"
MAX_BYTES = 16 * 2**20


def test_it_is_listed_by_name_and_fits_the_size_limit(capsys):
    assert main(["models"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(NAME + "  "))
    assert re.split(r"\s{2,}", line)[:3] == [NAME, "smiles", "mlm"] and "MOSES train" in line
    assert "858.1K params" in line
    assert sum(path.stat().st_size for path in (PACKAGE_DIR / "pretrained" / NAME).iterdir()) <= MAX_BYTES


def test_masked_atoms_are_predicted_from_their_context():
    """Mask one token where the context alone decides it: a ring-closure digit that only the open ring
    explains, the third fluorine of a trifluoromethyl group, a carbonyl's double bond. (A masked atom of
    benzene is not such a case: pyridine's 'n' is as valid.) No context-free guess gets all of them."""
    checkpoint = polymask.load_checkpoint(NAME)
    objective = checkpoint.build_objective().eval()
    tokenizer, mask = checkpoint.tokenizer, checkpoint.tokenizer.token_to_id("[MASK]")
    for smiles, masked_piece in (("c1ccc2ccccc2c1", "2"), ("FC(F)(F)c1ccccc1", "F"), ("CC(=O)Oc1ccccc1C(=O)O", "=")):
        encoding = tokenizer.encode(smiles)
        ids = torch.tensor([encoding.ids])
        position = max(i for i, token in enumerate(encoding.tokens) if token == masked_piece)
        ids[0, position] = mask
        with torch.no_grad():
            logits = objective.head(objective.encoder(ids))[0, position]
        assert tokenizer.id_to_token(int(logits.argmax())) == masked_piece, smiles
