"""SMILES molecules: RDKit validation and canonicalisation, the standard SMILES regex tokenizer."""
from __future__ import annotations

import random
import re
from collections import Counter
from typing import Iterable

from pydantic import Field
from rdkit import Chem, RDLogger
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing

#: The SMILES regex of Schwaller et al. (Molecular Transformer), as in DeepChem's SmilesTokenizer:
#: bracket atoms, Br/Cl, the organic subset, bonds, branches, stereo slashes and %nn ring closures.
SMILES_REGEX = (r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>|\*|\$"
                r"|\%[0-9]{2}|[0-9])")
SMILES_PATTERN = re.compile(SMILES_REGEX)

#: Tokens always in the vocabulary, whatever the corpus: organic subset, bonds, digits, ring closures,
#: and the bracket atoms common in drug-like sets (stereo centres, charges, isotopes, counter-ions),
#: so that a corpus without stereochemistry still yields a tokenizer that can read MoleculeNet.
BASE_VOCAB = (
    ["C", "N", "O", "S", "P", "F", "Cl", "Br", "I", "B", "c", "n", "o", "s", "p", "b",
     "(", ")", ".", "=", "#", "-", "+", "\\", "/", ":", "~", "@", "*", "$", "?", ">"]
    + [str(digit) for digit in range(10)] + [f"%{number}" for number in range(10, 100)]
    + [f"[{atom}]" for atom in (
        "C@H", "C@@H", "C@", "C@@", "S@", "S@@", "S@+", "S@@+", "P@", "P@@", "N@", "N@@", "N@+", "N@@+", "Si@",
        "nH", "nH+", "NH+", "NH2+", "NH3+", "N+", "N-", "n+", "n-", "NH-", "O-", "O+", "OH-", "S-", "S+", "s+",
        "C-", "CH-", "CH2-", "c-", "cH-", "P+", "PH", "B-", "BH-", "BH3-", "Se", "se", "Si", "Te", "As", "H", "H+",
        "2H", "3H", "11C", "13C", "14C", "13c", "15N", "18F", "123I", "125I", "131I", "18O", "35S", "32P",
        "Na", "Na+", "K", "K+", "Li", "Li+", "Mg", "Mg+2", "Ca", "Ca+2", "Zn", "Zn+2", "Fe", "Fe+2", "Fe+3",
        "Cu", "Cu+", "Cu+2", "Al", "Al+3", "Cl-", "Br-", "I-", "F-", "Pt", "Pt+2", "Au", "Ag", "Ag+", "Hg",
        "Co", "Ni", "Mn", "Cr", "Gd", "Gd+3", "Tc", "Bi", "Sb", "Ge", "Ti", "Sn", "Sr", "Sr+2", "Ba", "Ba+2",
        "Cs+", "Rb+", "Cd", "Ga", "In", "Tl", "Pb", "Zr", "Mo", "Ru", "Rh", "Pd", "La", "Y", "Xe", "CH2", "CH",
        "C", "N", "NH", "O", "OH", "S", "SH", "P", "B")]
)

RDLogger.DisableLog("rdApp.*")


def smiles_tokens(smiles: str) -> list[str]:
    """Split a SMILES string with the regex; raise ``InvalidRecord`` if any character is not covered."""
    tokens = SMILES_PATTERN.findall(smiles)
    if sum(map(len, tokens)) != len(smiles):
        covered = "".join(tokens)
        position = next((i for i, (a, b) in enumerate(zip(smiles, covered)) if a != b), len(covered))
        raise InvalidRecord(f"character {smiles[position]!r} at position {position} is outside the SMILES grammar")
    return tokens


def parse_molecule(smiles: str) -> Chem.Mol:
    """Parse and sanitise with RDKit; raise ``InvalidRecord`` with RDKit's reason."""
    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        raise InvalidRecord("RDKit cannot parse this SMILES (syntax error)")
    problems = Chem.DetectChemistryProblems(mol)
    if problems:
        raise InvalidRecord(f"RDKit: {problems[0].Message()}")
    try:
        Chem.SanitizeMol(mol)  # can still fail where the detection passes (e.g. valence after a stray "\\")
    except Chem.rdchem.MolSanitizeException as exc:
        raise InvalidRecord(f"RDKit: {exc}") from None
    return mol


class SmilesConfig(ModalityConfig):
    name: str = "smiles"
    canonical: bool = Field(True, description="rewrite every SMILES in RDKit canonical form")
    isomeric: bool = Field(True, description="keep stereochemistry and isotopes")
    augment: bool = Field(False, description="randomised SMILES: a random valid atom order each time a molecule is drawn")
    max_chars: int | None = Field(
        4096, ge=1, description="longer SMILES are skipped and counted before RDKit parses them (RDKit overflows the "
                                "stack near 19,000 chain atoms, 9,000 with a 2 MiB stack); null: no limit")


@MODALITIES.register("smiles")
class Smiles(Modality):
    """Molecules as SMILES strings, tokenised with the standard SMILES regex."""

    name = "smiles"
    Config = SmilesConfig
    overflow = "skip"
    default_corpus = ("smiles/nci_first_5k.smi.gz", "smiles/wehi_mols.smi.gz")
    default_columns = ("smiles", "SMILES", "canonical_smiles", "mol")
    config: SmilesConfig

    def normalize(self, text: str) -> str:
        smiles = text.strip()
        if not smiles:
            raise InvalidRecord("empty SMILES")
        smiles_tokens(smiles)
        mol = parse_molecule(smiles)
        if not self.config.canonical:
            return smiles
        return Chem.MolToSmiles(mol, isomericSmiles=self.config.isomeric)

    def augment(self, text: str, rng: random.Random) -> str:
        if not self.config.augment:
            return text
        mol = Chem.MolFromSmiles(text)
        variants = Chem.MolToRandomSmilesVect(mol, 1, randomSeed=rng.randrange(2**31),
                                              isomericSmiles=self.config.isomeric)
        return variants[0]

    def build_tokenizer(self, texts: Iterable[str], vocab_size: int | None = None) -> Tokenizer:
        counts = Counter(token for text in texts for token in smiles_tokens(text))
        vocab = list(SPECIAL_TOKENS) + BASE_VOCAB
        seen = set(vocab)
        for token, _ in counts.most_common(None if vocab_size is None else max(0, vocab_size - len(vocab))):
            if token not in seen:
                vocab.append(token)
                seen.add(token)
        tokenizer = Tokenizer(models.WordLevel({token: index for index, token in enumerate(vocab)}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(SMILES_REGEX), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()
        return add_special_token_processing(tokenizer)
