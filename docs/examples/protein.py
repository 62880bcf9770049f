"""A custom modality: protein sequences with one token per residue.

Use it from Python (``import protein`` then ``polymask.train({"modality": "protein", ...})``) or
from the command line (``polymask train --plugin docs/examples/protein.py --modality protein
--objective mlm --data proteins.fasta``).
"""
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

import polymask
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing

RESIDUES = "ACDEFGHIKLMNPQRSTVWY"
RARE = "XBZUO"  # unknown, ambiguous (Asx, Glx), selenocysteine, pyrrolysine


class ProteinConfig(polymask.ModalityConfig):
    name: str = "protein"


@polymask.register_modality("protein")
class Protein(polymask.Modality):
    """Amino-acid sequences, one token per residue; long chains are cut into windows."""

    name = "protein"
    Config = ProteinConfig
    overflow = "window"
    learned_vocabulary = False
    default_columns = ("sequence", "seq")

    def normalize(self, text: str) -> str:
        sequence = "".join(text.split()).upper().rstrip("*")
        unknown = sorted(set(sequence) - set(RESIDUES + RARE))
        if not sequence or unknown:
            raise polymask.InvalidRecord(f"not an amino-acid sequence (letters {unknown})" if unknown else "empty")
        return sequence

    def build_tokenizer(self, texts=(), vocab_size=None) -> Tokenizer:
        vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *RESIDUES, *RARE])}
        tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()
        return add_special_token_processing(tokenizer)
