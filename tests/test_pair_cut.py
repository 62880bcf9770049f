"""Over-long inputs are cut as BERT cuts them: a single input loses its end, a sentence pair the end of its
longer part first, so a long premise never crowds the hypothesis out. Fine-tuning and predict cut the same way,
and a benchmark cell of a pair task cut the old way (at the end) is not reused."""
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

from polymask.benchmarking.identity import data_identity
from polymask.data.model_inputs import encode_records, tokenize_normalised
from polymask.modalities import MODALITIES
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import TaskSpec, load_task_spec
from polymask.tokenization import SPECIAL_TOKENS, add_special_token_processing, cut_encoding

EXCERPTS = Path(__file__).parent / "data" / "glue"
WORDS = [f"w{i}" for i in range(40)]


def word_tokenizer() -> Tokenizer:
    """One token per word w0..w39, after the five specials."""
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return add_special_token_processing(tokenizer)


def words(first: int, count: int) -> str:
    return " ".join(WORDS[first:first + count])


def test_one_input_loses_its_end_and_keeps_its_specials():
    tokenizer = word_tokenizer()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    cut = cut_encoding(tokenizer.encode(words(0, 10)), 6)
    assert cut == [cls, *(tokenizer.token_to_id(w) for w in WORDS[:4]), sep]
    assert cut_encoding(tokenizer.encode(words(0, 3)), 6) == tokenizer.encode(words(0, 3)).ids


def test_a_pair_loses_its_longer_part_first_so_the_second_sentence_stays():
    tokenizer = word_tokenizer()
    long_premise = tokenizer.encode(words(0, 20), words(30, 3))
    cut = tokenizer.decode(cut_encoding(long_premise, 12), skip_special_tokens=False).split()
    assert cut == ["[CLS]", *WORDS[:6], "[SEP]", *WORDS[30:33], "[SEP]"]  # the hypothesis whole, 6 premise words

    both_long = tokenizer.encode(words(0, 20), words(20, 10))
    cut = tokenizer.decode(cut_encoding(both_long, 13), skip_special_tokens=False).split()
    assert cut == ["[CLS]", *WORDS[:5], "[SEP]", *WORDS[20:25], "[SEP]"]  # trimmed to equal halves


def test_fine_tuning_and_predict_cut_a_pair_the_same_way():
    tokenizer, text = word_tokenizer(), MODALITIES.get("text")()
    pair = (words(0, 30), words(30, 4))
    tuned = tokenize_normalised([pair], text, tokenizer, 16)
    predicted = encode_records([pair], [None], text, tokenizer, 16)
    assert tuned.cut == [True] and predicted.truncated == 1 and predicted.ids == tuned.ids
    hypothesis = [tokenizer.token_to_id(w) for w in WORDS[30:34]]
    assert len(tuned.ids[0]) == 16 and tuned.ids[0][-5:-1] == hypothesis


def test_only_a_sentence_pair_tables_cells_record_how_they_are_cut():
    text = MODALITIES.get("text")()
    pairs = data_identity(load_task(load_task_spec("glue/wnli"), text, EXCERPTS))
    single = {**load_task_spec("glue/wnli").model_dump(), "name": "wnli-premise", "input_columns": ["sentence1"]}
    alone = data_identity(load_task(TaskSpec.model_validate(single), text, EXCERPTS))
    assert pairs["pair_cut"] == "longest_first" and "pair_cut" not in alone


def test_a_hugging_face_tokenizer_cuts_a_pair_the_same_way(tmp_path: Path):
    """A Hugging Face folder's tokenizer (a row beside polymask's) tells which sentence each token is from, read
    from the fast tokenizer or, for a slow one, from the separator."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from polymask.tasks.finetune.hf_folder import HFTokenizer

    ours = word_tokenizer()
    PreTrainedTokenizerFast(tokenizer_object=ours, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(tmp_path)
    hf = HFTokenizer(AutoTokenizer.from_pretrained(str(tmp_path)))
    pair = (words(0, 20), words(30, 3))
    encoded = hf.encode_batch([pair])[0]
    assert cut_encoding(encoded, 12) == cut_encoding(ours.encode(*pair), 12)

    class SlowBatch(dict):
        is_fast = False

    slow = hf._parts(SlowBatch(), 0, encoded.ids)
    assert slow == encoded.sequence_ids == ours.encode(*pair).sequence_ids


def test_the_cut_is_the_tokenizers_librarys_longest_first():
    """The rule is `tokenizers`' own (``enable_truncation(strategy="longest_first")``, what `transformers`'
    ``truncation=True`` does), token for token, over pairs of every length mix."""
    ours = word_tokenizer()
    library = Tokenizer.from_str(ours.to_str())
    library.enable_truncation(11, strategy="longest_first")
    pairs = [(words(0, first), words(20, second)) for first in range(1, 20) for second in range(1, 20)]
    assert [cut_encoding(encoding, 11) for encoding in ours.encode_batch(pairs)] == \
        [encoding.ids for encoding in library.encode_batch(pairs)]
