"""Tokenizer round trips on the hard cases of each modality, and HF compatibility."""
import pytest
from transformers import AutoTokenizer

from polymask.errors import InvalidRecord
from polymask.modalities import MODALITIES
from polymask.modalities.dna import Dna, DnaConfig
from polymask.modalities.smiles import Smiles, SmilesConfig, smiles_tokens
from polymask.resources import builtin_dir
from polymask.tokenization import SPECIAL_TOKENS

HARD_SMILES = [
    "C[C@@H](N)C(=O)O",                       # stereo bracket atom
    "c1cc[nH+]cc1",                           # aromatic charged NH
    "[2H]C([2H])([2H])Cl",                    # isotopes, Cl
    "Brc1ccc(Br)cc1",                         # Br
    "C1CC2CC3CC4CC5CC6CC7CC8CC9CC%10CC%11CCC%11C%10C9C8C7C6C5C4C3C2C1",  # %nn ring closures
    "F/C=C/F",                                # stereo slashes
    "F\\C=C/F",
    "[Na+].[Cl-]",                            # dot-separated ions
    "C#N",                                    # triple bond
    "O=S(=O)(O)c1ccccc1",
]


def test_smiles_regex_keeps_multi_character_tokens_whole():
    assert smiles_tokens("C[C@@H](Cl)c1cc[nH+]c%12Br.[2H]") == [
        "C", "[C@@H]", "(", "Cl", ")", "c", "1", "c", "c", "[nH+]", "c", "%12", "Br", ".", "[2H]"]


@pytest.mark.parametrize("smiles", HARD_SMILES)
def test_smiles_decode_gives_back_input(smiles):
    modality = Smiles(SmilesConfig(canonical=False))
    tokenizer = modality.load_tokenizer()
    normalized = modality.normalize(smiles)
    assert normalized == smiles
    ids = tokenizer.encode(normalized).ids
    assert tokenizer.token_to_id("[UNK]") not in ids
    assert modality.decode(tokenizer, ids) == smiles


def test_smiles_canonicalisation_and_invalid_reasons():
    modality = Smiles()
    assert modality.normalize("OCC") == "CCO"
    with pytest.raises(InvalidRecord, match="valence"):
        modality.normalize("C(C)(C)(C)(C)C")
    with pytest.raises(InvalidRecord, match="syntax"):
        modality.normalize("C1CC")
    with pytest.raises(InvalidRecord, match="outside the SMILES grammar"):
        modality.normalize("CC&C")


def test_randomised_smiles_are_the_same_molecule():
    import random

    from rdkit import Chem

    modality = Smiles(SmilesConfig(augment=True))
    rng = random.Random(0)
    variants = {modality.augment("CC(=O)Oc1ccccc1C(=O)O", rng) for _ in range(10)}
    assert len(variants) > 1
    assert {Chem.CanonSmiles(v) for v in variants} == {Chem.CanonSmiles("CC(=O)Oc1ccccc1C(=O)O")}


def test_dna_non_overlapping_kmers_with_leftovers_and_n():
    modality = Dna()
    tokenizer = modality.load_tokenizer()
    sequence = modality.normalize("acgtacGGGCCCnAT\nTA")
    assert sequence == "ACGTACGGGCCCNATTA"
    tokens = tokenizer.encode(sequence).tokens
    assert tokens == ["[CLS]", "ACGTAC", "GGGCCC", "N", "A", "T", "T", "A", "[SEP]"]
    assert modality.decode(tokenizer, tokenizer.encode(sequence).ids) == sequence


def test_dna_iupac_codes_and_invalid_characters():
    modality = Dna()
    assert modality.normalize("ACRYGU") == "ACNNGT"
    with pytest.raises(InvalidRecord, match=r"'X' at position 2"):
        modality.normalize("ACXGT")


def test_dna_overlapping_kmers_round_trip_and_span():
    modality = Dna(DnaConfig(k=4, overlapping=True))
    tokenizer = modality.load_tokenizer()
    sequence = "ACGTTGCA"
    encoding = tokenizer.encode(modality.tokenizer_input(sequence))
    assert encoding.tokens[1:-1] == ["ACGT", "CGTT", "GTTG", "TTGC", "TGCA"]
    assert modality.decode(tokenizer, encoding.ids) == sequence
    assert modality.mask_span == 4


@pytest.mark.parametrize("text", [
    "It is a truth universally acknowledged,  that a single man…",
    "Café naïve — “quotes” and émigré £5",
    "tabs\tand  spaces  ",
])
def test_text_byte_level_bpe_round_trip(text):
    modality = MODALITIES.get("text")()
    tokenizer = modality.load_tokenizer()
    normalized = modality.normalize(text)
    ids = tokenizer.encode(normalized).ids
    assert tokenizer.token_to_id("[UNK]") not in ids
    assert modality.decode(tokenizer, ids) == normalized


def test_a_built_in_tokenizer_is_named_by_its_folder(tmp_path, monkeypatch):
    """modality.tokenizer takes a folder of tokenizers/ by name; a path that exists wins over the name."""
    from polymask.modalities.text import TextConfig

    monkeypatch.chdir(tmp_path)
    assert MODALITIES.get("text")(TextConfig(tokenizer="text-corpus")).load_tokenizer().get_vocab_size() == 16384
    (tmp_path / "text-corpus").mkdir()
    (tmp_path / "text-corpus" / "tokenizer.json").write_text(
        (builtin_dir("tokenizers") / "text" / "tokenizer.json").read_text())
    assert MODALITIES.get("text")(TextConfig(tokenizer="text-corpus")).load_tokenizer().get_vocab_size() == 8192


def test_an_exported_text_mask_takes_the_space_before_it():
    """fill-mask writes "is [MASK]."; the model was trained to predict " Paris" (space included) there, so the
    exported byte-level tokenizer lets [MASK] absorb that space instead of leaving a lone space token."""
    from polymask.tokenization import load_tokenizer, to_hf, with_mask_taking_its_space

    tokenizer = load_tokenizer(builtin_dir("tokenizers") / "text-corpus")
    exported = to_hf(with_mask_taking_its_space(tokenizer))
    expected = [tokenizer.token_to_id(t) for t in ("[CLS]", "The", "\u0120capital", "\u0120is", "[MASK]", ".", "[SEP]")]
    assert exported("The capital is [MASK].")["input_ids"] == expected
    assert tokenizer.encode("The capital is [MASK].").ids != expected  # the tokenizer itself is left as it was
    smiles = load_tokenizer(builtin_dir("tokenizers") / "smiles")
    assert with_mask_taking_its_space(smiles) is smiles


def test_text_is_unicode_normalised():
    modality = MODALITIES.get("text")()
    assert modality.normalize("Cafe\u0301") == "Caf\u00e9"


@pytest.mark.parametrize("name", ["smiles", "dna", "dna-6mer-overlap", "text", "text-corpus"])
def test_builtin_tokenizers_load_in_transformers(name):
    tokenizer = AutoTokenizer.from_pretrained(str(builtin_dir("tokenizers") / name))
    assert [tokenizer.pad_token, tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token,
            tokenizer.mask_token] == list(SPECIAL_TOKENS)
    assert tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2, 3, 4]
    pair = tokenizer("A", "C")["input_ids"]
    assert pair[0] == tokenizer.cls_token_id and pair.count(tokenizer.sep_token_id) == 2


@pytest.mark.parametrize("name", ["smiles", "dna", "dna-6mer-overlap", "text", "text-corpus"])
def test_builtin_tokenizer_ids_run_without_a_hole(name):
    """The embedding has a row per id: a vocabulary listing a token twice would leave an id past the end."""
    from polymask.tokenization import load_tokenizer

    tokenizer = load_tokenizer(builtin_dir("tokenizers") / name)
    assert sorted(tokenizer.get_vocab().values()) == list(range(tokenizer.get_vocab_size()))


def test_a_vocabulary_with_a_repeated_token_is_refused():
    from tokenizers import Tokenizer, models

    from polymask.tokenization import add_special_token_processing

    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, "A", "A", "C"])}  # "A" at 6: no id 5
    with pytest.raises(ValueError, match="not 0..6"):
        add_special_token_processing(Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")))


def test_tokenizer_cli_builds_a_tokenizer(tmp_path):
    from polymask.cli import main
    from polymask.tokenization import load_tokenizer

    corpus = tmp_path / "mols.smi"
    corpus.write_text("CCO\nc1ccccc1[Se]\nnot-a-smiles\n")
    assert main(["tokenizer", "train", "--modality", "smiles", "--input", str(corpus), "--out", str(tmp_path / "tok")]) == 0
    tokenizer = load_tokenizer(tmp_path / "tok")
    assert tokenizer.token_to_id("[Se]") is not None


@pytest.mark.parametrize("options, line", [
    (["--vocab-size", "0"], "invalid text option: vocab_size: Input should be greater than or equal to 300 (got 0)"),
    (["--vocab-size", "-5"], "invalid text option: vocab_size: Input should be greater than or equal to 300 (got -5)"),
    (["--option", "vocab_size=5"], "invalid text option: vocab_size: Input should be greater than or equal to 300 "
                                   "(got 5)"),
    (["--option", "vocab=5"], "invalid text option: vocab: Extra inputs are not permitted (got 5); did you mean "
                              "'vocab_size'?")])
def test_tokenizer_cli_refuses_a_vocabulary_size_in_one_line(tmp_path, capsys, options, line):
    """--vocab-size 0 was taken as the default, -5 an OverflowError, --option vocab_size=5 a pydantic traceback."""
    from polymask.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A line of text.\nAnother line.\n")
    assert main(["tokenizer", "train", "--modality", "text", "--input", str(corpus), "--out", str(tmp_path / "tok"),
                 *options]) == 2
    assert capsys.readouterr().err.strip() == f"polymask: error: {line}"
    assert not (tmp_path / "tok").exists()
