"""SMILES molecules: RDKit validation, optional standardisation and canonicalisation; the standard SMILES
regex tokenizer, which spells any bracket atom outside its vocabulary in pieces (``smiles_vocab``)."""
from __future__ import annotations

import random
import zlib
from collections import Counter
from typing import ClassVar, Collection, Iterable

from pydantic import Field
from rdkit import Chem, RDLogger
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from polymask.errors import InvalidRecord
from polymask.modalities.base import Modality, ModalityConfig
from polymask.modalities.registry import MODALITIES
from polymask.modalities.smiles_standardize import StandardizeConfig, standardize
from polymask.modalities.smiles_vocab import PIECE_PREFIX, SMILES_PATTERN, SMILES_REGEX, base_vocabulary
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing

RDLogger.DisableLog("rdApp.*")

#: Randomised SMILES per molecule that test-time averaging adds to the molecule as given.
TEST_TIME_ORDERS = 7


def smiles_tokens(smiles: str) -> list[str]:
    """Split a SMILES string with the regex; raise ``InvalidRecord`` if any character is not covered."""
    tokens = SMILES_PATTERN.findall(smiles)
    if sum(map(len, tokens)) != len(smiles):
        covered = "".join(tokens)
        position = next((i for i, (a, b) in enumerate(zip(smiles, covered)) if a != b), len(covered))
        raise InvalidRecord(f"character {smiles[position]!r} at position {position} is outside the SMILES "
                            f"grammar", kind="a character outside the SMILES grammar")
    return tokens


def parse_molecule(smiles: str) -> Chem.Mol:
    """Parse and sanitise with RDKit; raise ``InvalidRecord`` with RDKit's reason (its exception type is the
    kind the run's report counts: AtomValenceException, KekulizeException, ...)."""
    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        raise InvalidRecord("RDKit cannot parse this SMILES (syntax error)", kind="RDKit: syntax error")
    try:
        Chem.SanitizeMol(mol)
    except Chem.rdchem.MolSanitizeException as exc:
        raise InvalidRecord(f"RDKit: {exc}", kind=f"RDKit: {type(exc).__name__}") from None
    return mol


class SmilesConfig(ModalityConfig):
    name: str = "smiles"
    canonical: bool = Field(True, description="rewrite every SMILES in RDKit canonical form")
    isomeric: bool = Field(True, description="keep stereochemistry and isotopes")
    augment: bool = Field(False, description="randomised SMILES: a random valid atom order each time a molecule is drawn")
    max_chars: int | None = Field(
        4096, ge=1, description="longer SMILES are skipped and counted before RDKit parses them (RDKit overflows the "
                                "stack near 19,000 chain atoms, 9,000 with a 2 MiB stack); null: no limit")
    standardize: StandardizeConfig = Field(default_factory=StandardizeConfig,
                                           description="optional rdMolStandardize steps (all off by default)")


@MODALITIES.register("smiles")
class Smiles(Modality):
    """Molecules as SMILES strings, tokenised with the standard SMILES regex."""

    name = "smiles"
    Config = SmilesConfig
    overflow = "skip"
    default_corpus = ("smiles/nci_first_5k.smi.gz", "smiles/wehi_mols.smi.gz")
    default_columns = ("smiles", "SMILES", "canonical_smiles", "mol")
    default_split = "scaffold"
    finetune_recipe = "moleculenet"
    label_free_invariances: ClassVar[tuple[str, ...]] = ("atom_order",)
    config: SmilesConfig

    def normalize(self, text: str) -> str:
        return self.normalize_with_changes(text)[0]

    def normalize_with_changes(self, text: str) -> tuple[str, tuple[str, ...]]:
        smiles = text.strip()
        if not smiles:
            raise InvalidRecord("empty SMILES")
        smiles_tokens(smiles)
        mol = parse_molecule(smiles)
        steps = self.config.standardize.steps()
        changed: tuple[str, ...] = ()
        if steps:
            mol, changed = standardize(mol, steps)
        elif not self.config.canonical:
            return smiles, changed
        return Chem.MolToSmiles(mol, isomericSmiles=self.config.isomeric, canonical=self.config.canonical), changed

    def variants(self, text: str, invariances: Collection[str] = ()) -> list[str]:
        """For an ``atom_order``-invariant label (every molecular property): the molecule as given, then up to
        ``TEST_TIME_ORDERS`` distinct randomised SMILES of it, drawn with a seed taken from the string, so the
        same molecule always gets the same variants."""
        if "atom_order" not in invariances:
            return [text]
        seed = zlib.crc32(text.encode()) % (2**31 - 1) + 1  # RDKit draws unseeded outside 1 .. 2^31 - 1
        return [text, *dict.fromkeys(smiles for smiles in self._random_orders(text, TEST_TIME_ORDERS, seed)
                                     if smiles != text)]

    def augment(self, text: str, rng: random.Random) -> str:
        if not self.config.augment:
            return text
        return self._random_orders(text, 1, rng.randrange(1, 2**31))[0]

    def _random_orders(self, text: str, count: int, seed: int) -> list[str]:
        """``count`` randomised SMILES of a normalised record, drawn with ``seed``; parsed as ``normalize`` parses
        (explicit hydrogens kept). A record RDKit no longer reads (it read it when normalising) stays as it is."""
        try:
            mol = parse_molecule(text)
        except InvalidRecord:
            return [text] * count
        return list(Chem.MolToRandomSmilesVect(mol, count, randomSeed=seed, isomericSmiles=self.config.isomeric))

    def build_tokenizer(self, texts: Iterable[str], vocab_size: int | None = None) -> Tokenizer:
        """The base vocabulary (organic subset, bonds, ring closures, common bracket atoms, bracket pieces) plus
        the corpus's most frequent other bracket atoms as single tokens, up to ``vocab_size``."""
        counts = Counter(token for text in texts for token in smiles_tokens(text))
        vocab = list(SPECIAL_TOKENS) + base_vocabulary()
        seen = set(vocab)
        room = None if vocab_size is None else max(0, vocab_size - len(vocab))
        frequent = [token for token, _ in counts.most_common() if token not in seen]
        vocab += frequent[:room]
        tokenizer = Tokenizer(models.WordPiece({token: index for index, token in enumerate(vocab)}, unk_token="[UNK]",
                                               continuing_subword_prefix=PIECE_PREFIX, max_input_chars_per_word=1000))
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(SMILES_REGEX), behavior="isolated")
        tokenizer.decoder = decoders.Sequence([decoders.Replace(PIECE_PREFIX, ""), decoders.Fuse()])
        return add_special_token_processing(tokenizer)
