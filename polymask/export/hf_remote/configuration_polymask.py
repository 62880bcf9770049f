"""Configuration of a polymask encoder exported to Hugging Face (imports only transformers)."""
from transformers import PretrainedConfig


class PolymaskConfig(PretrainedConfig):
    """A pre-LayerNorm Transformer encoder with rotary positions, as trained by polymask.

    ``rotary_2d``: ExLM's encoders split each head into two rotary sections (token index, state
    index); a plain input uses state index 0, which leaves the second section unrotated.
    ``PolymaskForMaskedLM`` puts the LM head on the encoder's output; with a decoder (``decoder_layers`` > 0,
    MAE-LM) it removes [MASK] tokens from the encoder's input and lets the shallow decoder (``decoder_*``)
    reconstruct them, as in pretraining. ``objective`` names the pretraining objective.
    ``pooling`` (cls or mean) and ``classifier_dropout`` shape ``PolymaskForSequenceClassification``.
    ``hidden_act``: ``gelu`` (exact) or ``gelu_pytorch_tanh`` (tanh approximation), in the MLPs and the LM head.
    """

    model_type = "polymask"

    def __init__(self, vocab_size=64, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024, hidden_dropout=0.0, attention_dropout=0.0, layer_norm_eps=1e-5,
                 rotary_base=10000.0, rotary_2d=False, embed_norm=True, hidden_act="gelu_pytorch_tanh",
                 objective="mlm", decoder_layers=0, decoder_width=0, decoder_heads=0, decoder_intermediate_size=0,
                 decoder_dropout=0.0,
                 pooling="mean", classifier_dropout=0.1, mask_token_id=4, pad_token_id=0, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.rotary_base = rotary_base
        self.rotary_2d = rotary_2d
        self.embed_norm = embed_norm
        if hidden_act not in ("gelu", "gelu_pytorch_tanh"):
            raise ValueError(f"hidden_act must be gelu or gelu_pytorch_tanh, not {hidden_act!r}")
        self.hidden_act = hidden_act
        self.objective = objective
        self.decoder_layers = decoder_layers
        self.decoder_width = decoder_width
        self.decoder_heads = decoder_heads
        self.decoder_intermediate_size = decoder_intermediate_size
        self.decoder_dropout = decoder_dropout
        self.pooling = pooling
        self.classifier_dropout = classifier_dropout
        self.mask_token_id = mask_token_id
        kwargs.setdefault("tie_word_embeddings", False)  # the LM head reads the embedding matrix directly
        super().__init__(pad_token_id=pad_token_id, **kwargs)
