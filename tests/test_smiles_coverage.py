"""SMILES coverage (issue 17): no [UNK] on any molecule RDKit accepts, exact decoding, the fast id path equal
to the library's, old tokenizers kept, per-reason rejections and optional standardisation counted."""
import json
import os
import re
from pathlib import Path

import pytest

from polymask.checkpoints.pretrained import read_checkpoint
from polymask.cli import main
from polymask.errors import InvalidRecord
from polymask.modalities.smiles import Smiles, SmilesConfig
from polymask.modalities.smiles_standardize import StandardizeConfig
from polymask.modalities.smiles_vocab import SMILES_PATTERN
from polymask.resources import builtin_dir
from polymask.fast_encode import RegexVocabEncoder, encode_batch

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

DATA_DIR = Path(os.environ.get("POLYMASK_DATA_DIR", Path(__file__).parents[2] / "shared" / "data"))
SHARED_MOLECULENET = DATA_DIR / "moleculenet"
LEGACY_RUN = Path(__file__).parent / "data" / "legacy_run"  # its tokenizer is the 0.1 WordLevel one
#: The Schwaller et al. regex as DeepChem writes it (single characters as alternatives), plus dative bonds
#: and %(nnn): polymask's character-class regex must split exactly like it.
STANDARD_REGEX = re.compile(r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|->|<-|-|\+|\\|\/|:|~|@|\?|>"
                            r"|\*|\$|\%[0-9]{2}|\%\([0-9]+\)|[0-9])")

#: The issue's hard cases, each inside a molecule RDKit accepts.
HARD_CASES = {
    "[NaH]": "[NaH]", "[Fe+3]": "[Fe+3].[Cl-].[Cl-].[Cl-]", "[2H]": "[2H]C([2H])([2H])O",
    "[CH3:1]": "[CH3:1]C(=O)O", "[Se]": "C[Se]C", "[se]": "c1cc[se]c1", "[Te]": "C[Te]C", "[te]": "c1cc[te]c1",
    "[U]": "[U]", "[Cf]": "[Cf]", "[O-2]": "[O-2].[Ca+2]", "[NH4+]": "[NH4+].[Cl-]",
    "%12": "C1CCC2CCC3CCC4CCC5CCC6CCC7CCC8CCC9CCC%10CCC%11CCC%12CCCCC%12C%11C%10C9C8C7C6C5C4C3C2C1",
    "*": "*C(=O)O", "dative bond": "[NH3]->[Pt+2]", "[Fe+6]": "[Fe+6]", "isotope + H count": "[13CH4]",
    "chirality class": "F[C@TH1H](Cl)Br", "%(nnn)": "C%(123)CCCC%(123)",
}


def smiles_column(path: Path) -> list[str]:
    import pandas as pd

    frame = pd.read_csv(path)
    return frame[next(c for c in frame.columns if c.lower() in ("smiles", "mol"))].astype(str).tolist()


def builtin_moleculenet_smiles() -> list[str]:
    folder = builtin_dir("tasks") / "moleculenet" / "data"
    return [text for path in sorted(folder.glob("*.csv.gz")) for text in smiles_column(path)]


def normalised(modality: Smiles, texts: list[str]) -> list[str]:
    out = []
    for text in texts:
        try:
            out.append(modality.normalize(text))
        except InvalidRecord:
            pass
    return out


def assert_covered(tokenizer, texts: list[str]) -> None:
    unk = tokenizer.token_to_id("[UNK]")
    ids = encode_batch(tokenizer, texts)
    assert [t for t, i in zip(texts, ids) if unk in i] == []
    assert [t for t, i in zip(texts, ids) if tokenizer.decode(i) != t] == []


@pytest.mark.parametrize("case", HARD_CASES)
def test_hard_cases_have_no_unk_and_decode_exactly(case):
    modality = Smiles()
    tokenizer = modality.load_tokenizer()
    smiles = modality.normalize(HARD_CASES[case])
    ids = tokenizer.encode(smiles, add_special_tokens=False).ids
    assert tokenizer.token_to_id("[UNK]") not in ids
    assert modality.decode(tokenizer, tokenizer.encode(smiles).ids) == smiles


def test_bracket_atoms_outside_the_vocabulary_are_spelt_in_pieces_frequent_ones_stay_whole():
    tokenizer = Smiles().load_tokenizer()
    assert tokenizer.encode("[NaH]", add_special_tokens=False).tokens == ["[", "##Na", "##H", "##]"]
    assert tokenizer.encode("[13CH4]", add_special_tokens=False).tokens == [
        "[", "##1", "##3", "##C", "##H", "##4", "##]"]
    assert tokenizer.encode("C[C@@H](O)[nH+]", add_special_tokens=False).tokens == [
        "C", "[C@@H]", "(", "O", ")", "[nH+]"]
    # outside brackets two letters never read as an element: methyl on aromatic n is C n, not copernicium
    assert tokenizer.encode("Cn1ccnc1", add_special_tokens=False).tokens[:2] == ["C", "n"]


def test_every_builtin_moleculenet_molecule_is_covered_and_decodes_exactly():
    modality = Smiles()
    assert_covered(modality.load_tokenizer(), normalised(modality, builtin_moleculenet_smiles()))


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_MOLECULENET.is_dir(), reason="no MoleculeNet folder in $POLYMASK_DATA_DIR")
def test_every_moleculenet_molecule_of_the_data_directory_is_covered_and_decodes_exactly():
    modality = Smiles()
    for path in sorted(SHARED_MOLECULENET.glob("*.csv*")):
        assert_covered(modality.load_tokenizer(), normalised(modality, smiles_column(path)))


def test_the_character_class_regex_splits_as_the_standard_one():
    texts = builtin_moleculenet_smiles() + list(HARD_CASES.values()) + ["CC->C", "C%(100)C", "[C@@H]1CC1", "%1"]
    assert [SMILES_PATTERN.findall(t) for t in texts] == [STANDARD_REGEX.findall(t) for t in texts]


def test_fast_ids_equal_the_tokenizers_library_ids():
    modality = Smiles()
    tokenizer = modality.load_tokenizer()
    assert RegexVocabEncoder.of(tokenizer) is not None
    texts = normalised(modality, builtin_moleculenet_smiles()[::7]) + [
        "", "C[MASK]C", "[[MASK]]", "CC<C", "C\nC", "[Xx]", "%(", "[NaH]CC[NaH]", "C C"]
    assert encode_batch(tokenizer, texts) == [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def test_a_checkpoint_keeps_the_tokenizer_it_was_trained_with():
    legacy = read_checkpoint(LEGACY_RUN).tokenizer
    builtin = Smiles().load_tokenizer()
    assert legacy.get_vocab_size() != builtin.get_vocab_size()
    assert legacy.encode("[NaH]", add_special_tokens=False).ids == [legacy.token_to_id("[UNK]")]  # as in 0.1
    assert builtin.token_to_id("[UNK]") not in builtin.encode("[NaH]", add_special_tokens=False).ids


def test_rejections_carry_rdkits_reason_and_a_kind_to_count():
    modality = Smiles()
    cases = {"C(C)(C)(C)(C)C": "RDKit: AtomValenceException", "c1cccc1": "RDKit: KekulizeException",
             "C((C": "RDKit: syntax error", "CC&C": "a character outside the SMILES grammar"}
    for smiles, kind in cases.items():
        with pytest.raises(InvalidRecord) as caught:
            modality.normalize(smiles)
        assert caught.value.kind == kind and caught.value.reason
    # cisplatin written with four-valent N: RDKit sanitises it by making the N->Pt bonds dative; both arrows are tokens
    cisplatin = modality.normalize("[NH3][Pt]([NH3])(Cl)Cl")
    assert cisplatin == "[NH3]->[Pt](<-[NH3])([Cl])[Cl]"
    tokens = modality.load_tokenizer().encode(cisplatin, add_special_tokens=False).tokens
    assert "->" in tokens and "<-" in tokens and "[UNK]" not in tokens


def test_standardisation_steps_on_real_salts_and_charged_molecules():
    # from the built-in MoleculeNet sets: a sodium salt, a hydrochloride, a carboxylate, a 2-pyridinol tautomer
    salts = {"sodium benzoate": "O=C([O-])c1ccccc1.[Na+]", "a hydrochloride": "CN(C)CCOC(c1ccccc1)c1ccccc1.Cl",
             "acetate": "CC(=O)[O-]", "2-hydroxypyridine": "Oc1ccccn1"}
    keep = Smiles(SmilesConfig(standardize=StandardizeConfig(largest_fragment=True)))
    assert keep.normalize_with_changes(salts["sodium benzoate"]) == ("O=C([O-])c1ccccc1", ("largest_fragment",))
    assert "." not in keep.normalize(salts["a hydrochloride"])
    neutral = Smiles(SmilesConfig(standardize=StandardizeConfig(largest_fragment=True, neutralize=True)))
    assert neutral.normalize_with_changes(salts["sodium benzoate"]) == ("O=C(O)c1ccccc1",
                                                                         ("largest_fragment", "neutralize"))
    assert neutral.normalize_with_changes(salts["acetate"]) == ("CC(=O)O", ("neutralize",))
    tautomer = Smiles(SmilesConfig(standardize=StandardizeConfig(canonical_tautomer=True)))
    assert tautomer.normalize_with_changes(salts["2-hydroxypyridine"]) == ("O=c1cccc[nH]1", ("canonical_tautomer",))
    assert Smiles().normalize_with_changes(salts["sodium benzoate"]) == ("O=C([O-])c1ccccc1.[Na+]", ())


def test_a_run_reports_rejections_per_reason_and_changes_per_step(tmp_path):
    data = tmp_path / "molecules.smi"
    salts = ["O=C([O-])c1ccccc1.[Na+]", "CC(=O)[O-].[K+]", "CN(C)CCOC(c1ccccc1)c1ccccc1.Cl"]
    bad = ["C(C)(C)(C)(C)C", "N(C)(C)(C)(C)C", "c1cccc1", "C((C"]
    data.write_text("\n".join(salts + bad + ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"] * 1) + "\n")
    out = tmp_path / "run"
    assert main(["train", "--modality", "smiles", "--objective", "mlm", "--data", str(data), "--out", str(out),
                 "--set", "model.preset=tiny", "--set", "train.max_steps=1", "--set", "train.batch_size=2",
                 "--set", "data.val_fraction=0.2", "--set", "modality.standardize.largest_fragment=true",
                 "--set", "train.progress=false"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_by_reason"] == {"RDKit: AtomValenceException": 2, "RDKit: KekulizeException": 1,
                                            "RDKit: syntax error": 1}
    assert summary["changed_by_step"] == {"largest_fragment": 3}
