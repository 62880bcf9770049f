"""A polymask encoder for transformers (``trust_remote_code=True``); imports only torch and transformers.

The architecture is polymask's ``Encoder``, reproduced operation for operation so that hidden states
match the pretrained model: token embedding -> optional embedding LayerNorm -> pre-LayerNorm blocks
(fused qkv projection with biases, rotary positions half-split within each rotary section, scaled
dot-product attention, MLP with the exact or the tanh-approximated GELU) -> final LayerNorm.

Classes for a ``polymask`` config (an encoder with no native counterpart: tanh GELU, ExLM's 2D rotary
positions): ``PolymaskModel`` (AutoModel), ``PolymaskForMaskedLM`` (AutoModelForMaskedLM, fill-mask) and
``PolymaskForSequenceClassification`` (AutoModelForSequenceClassification).

Classes for an ``esm`` config (the encoder is transformers' native ``EsmModel``; only the part without a
native counterpart runs from here): ``PolymaskEsmForSequenceClassification`` (a fine-tuned polymask task
head) and ``PolymaskEsmMaeForMaskedLM`` (MAE-LM's decoder path).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput
from transformers.models.esm.modeling_esm import EsmModel, EsmPreTrainedModel

from .configuration_polymask import PolymaskConfig


def rotary_tables(positions: Tensor, head_dim: int, base: float, sections: int) -> Tuple[Tensor, Tensor]:
    """cos and sin (B, 1, L, head_dim) for positions (B, L) or (B, L, sections); missing coordinates are 0."""
    if positions.dim() == 2:
        positions = positions.unsqueeze(-1)
    if positions.shape[-1] > sections:
        raise ValueError(f"got {positions.shape[-1]} position coordinates, the model has {sections}")
    positions = F.pad(positions, (0, sections - positions.shape[-1]))
    section = head_dim // sections
    inv_freq = 1.0 / base ** (torch.arange(0, section, 2, dtype=torch.float32) / section)
    angles = positions.float().unsqueeze(-1) * inv_freq.to(positions.device)  # (B, L, S, section/2)
    angles = torch.cat((angles, angles), dim=-1).flatten(-2)
    return angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)


def rotate(x: Tensor, cos: Tensor, sin: Tensor, sections: int) -> Tensor:
    """Rotary rotation of ``x`` (B, H, L, D): within each section, the two halves form the pairs."""
    *lead, dim = x.shape
    first, second = x.view(*lead, sections, 2, dim // (2 * sections)).unbind(-2)
    rotated = torch.stack((-second, first), dim=-2).view_as(x)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class PolymaskAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float, sections: int) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.sections = sections
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: Tensor, rope: Tuple[Tensor, Tensor], key_mask: Optional[Tensor]) -> Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, *rope, self.sections), rotate(k, *rope, self.sections)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


def gelu(x: Tensor, hidden_act: str) -> Tensor:
    """``gelu`` (exact, erf) or ``gelu_pytorch_tanh`` (tanh approximation)."""
    return F.gelu(x, approximate="tanh" if hidden_act == "gelu_pytorch_tanh" else "none")


class PolymaskMLP(nn.Module):
    def __init__(self, width: int, inner: int, hidden_act: str) -> None:
        super().__init__()
        self.hidden_act = hidden_act
        self.fc = nn.Linear(width, inner)
        self.proj = nn.Linear(inner, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(gelu(self.fc(x), self.hidden_act))


class PolymaskBlock(nn.Module):
    """Pre-LayerNorm block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, width: int, heads: int, inner: int, dropout: float, attention_dropout: float, eps: float,
                 sections: int, hidden_act: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=eps)
        self.attn = PolymaskAttention(width, heads, attention_dropout, sections)
        self.norm2 = nn.LayerNorm(width, eps=eps)
        self.mlp = PolymaskMLP(width, inner, hidden_act)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, rope: Tuple[Tensor, Tensor], key_mask: Optional[Tensor]) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), rope, key_mask))
        return x + self.drop(self.mlp(self.norm2(x)))


def key_mask_of(attention_mask: Optional[Tensor]) -> Optional[Tensor]:
    """(B, L) 1/0 or bool -> (B, 1, 1, L) bool, True where a key may be attended."""
    return None if attention_mask is None else attention_mask.bool()[:, None, None, :]


class PolymaskPreTrainedModel(PreTrainedModel):
    config_class = PolymaskConfig
    base_model_prefix = "polymask"
    _no_split_modules = ["PolymaskBlock"]

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, PolymaskLMHead):
            module.bias.data.zero_()


class PolymaskModel(PolymaskPreTrainedModel):
    """The encoder; ``last_hidden_state`` is polymask's encoder output (after the final LayerNorm)."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^decoder\.", r"^classifier\."]  # the heads' weights

    def __init__(self, config: PolymaskConfig) -> None:
        super().__init__(config)
        width = config.hidden_size
        self.sections = 2 if config.rotary_2d else 1
        self.embed = nn.Embedding(config.vocab_size, width)
        self.embed_norm = nn.LayerNorm(width, eps=config.layer_norm_eps) if config.embed_norm else None
        self.drop = nn.Dropout(config.hidden_dropout)
        self.blocks = nn.ModuleList(
            PolymaskBlock(width, config.num_attention_heads, config.intermediate_size, config.hidden_dropout,
                          config.attention_dropout, config.layer_norm_eps, self.sections, config.hidden_act)
            for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed = value

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                position_ids: Optional[Tensor] = None, inputs_embeds: Optional[Tensor] = None,
                token_type_ids: Optional[Tensor] = None, output_attentions: Optional[bool] = None,
                output_hidden_states: Optional[bool] = None, return_dict: Optional[bool] = None):
        """``position_ids`` (B, L), or (B, L, 2) for ExLM's (token index, state index); default 0..L-1
        (state index 0). ``token_type_ids`` is accepted and ignored: the model has no segment embedding."""
        if output_attentions:
            raise ValueError("PolymaskModel does not return attention weights")
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids and inputs_embeds")
        x = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        if position_ids is None:
            position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        width = self.config.hidden_size
        rope = rotary_tables(position_ids, width // self.config.num_attention_heads, self.config.rotary_base,
                             self.sections)
        key_mask = key_mask_of(attention_mask)
        x = self.drop(x)
        states = [x]
        for block in self.blocks:
            x = block(x, rope, key_mask)
            states.append(x)
        x = self.norm(x)
        states[-1] = x
        output = BaseModelOutput(last_hidden_state=x, hidden_states=tuple(states) if output_hidden_states else None)
        return output if _return_dict(self.config, return_dict) else output.to_tuple()


def _return_dict(config: PolymaskConfig, requested: Optional[bool]) -> bool:
    return requested if requested is not None else getattr(config, "return_dict", True)


class PolymaskLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> the input embedding matrix (tied) + bias."""

    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__()
        self.hidden_act = config.hidden_act
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: Tensor, embedding: Tensor) -> Tensor:
        return F.linear(self.norm(gelu(self.dense(hidden), self.hidden_act)), embedding, self.bias)


class PolymaskDecoder(nn.Module):
    """MAE-LM's shallow decoder: own 1D rotary positions over the full-length sequence."""

    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__()
        width, hidden = config.decoder_width, config.hidden_size
        self.heads = config.decoder_heads
        self.base = getattr(config, "rotary_base", None) or config.rope_theta
        self.project_in = nn.Linear(hidden, width) if width != hidden else None
        self.blocks = nn.ModuleList(
            PolymaskBlock(width, config.decoder_heads, config.decoder_intermediate_size, config.decoder_dropout,
                          config.decoder_dropout, config.layer_norm_eps, 1, config.hidden_act)
            for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.project_out = nn.Linear(width, hidden) if width != hidden else None

    def forward(self, states: Tensor, attention_mask: Optional[Tensor]) -> Tensor:
        x = states if self.project_in is None else self.project_in(states)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        rope = rotary_tables(positions, x.shape[-1] // self.heads, self.base, 1)
        key_mask = key_mask_of(attention_mask)
        for block in self.blocks:
            x = block(x, rope, key_mask)
        x = self.norm(x)
        return x if self.project_out is None else self.project_out(x)


class PolymaskForMaskedLM(PolymaskPreTrainedModel):
    """Vocabulary logits at every position, computed the way the checkpoint's objective predicts.

    ``mlm`` and ``exlm``: the LM head on the encoder output. (ExLM was pretrained to predict from k
    expanded states of each [MASK] aligned by a DAG; this head on the unexpanded sequence is an
    approximation of it, see the model card.) ``maelm``: [MASK] tokens are hidden from the encoder,
    the [MASK] embedding takes their place in the encoder output, and the decoder reconstructs them.
    """

    _keys_to_ignore_on_load_unexpected = [r"^classifier\."]  # a fine-tuned head saved in the same folder

    def __init__(self, config: PolymaskConfig) -> None:
        super().__init__(config)
        self.polymask = PolymaskModel(config)
        self.decoder = PolymaskDecoder(config) if config.decoder_layers else None
        self.lm_head = PolymaskLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> None:
        return None  # tied by construction: the head reads polymask.embed.weight

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                position_ids: Optional[Tensor] = None, inputs_embeds: Optional[Tensor] = None,
                token_type_ids: Optional[Tensor] = None, labels: Optional[Tensor] = None,
                output_attentions: Optional[bool] = None, output_hidden_states: Optional[bool] = None,
                return_dict: Optional[bool] = None):
        """``labels`` (B, L): token ids, -100 where no loss is wanted."""
        return masked_lm_forward(self.config, self.polymask, self.polymask.embed.weight, self.decoder, self.lm_head,
                                 input_ids, attention_mask, labels, return_dict, position_ids=position_ids,
                                 inputs_embeds=inputs_embeds, output_attentions=output_attentions,
                                 output_hidden_states=output_hidden_states)


def masked_lm_forward(config: PretrainedConfig, encoder: nn.Module, embedding: Tensor, decoder: Optional[nn.Module],
                      lm_head: PolymaskLMHead, input_ids: Optional[Tensor], attention_mask: Optional[Tensor],
                      labels: Optional[Tensor], return_dict: Optional[bool], **encoder_kwargs) -> MaskedLMOutput:
    """Logits of the LM head on the encoder output; with MAE-LM's ``decoder``, the encoder sees no [MASK]
    (a key mask hides them, the others keep their positions), the [MASK] embedding takes their place in
    its output, and the decoder reconstructs them."""
    encoder_mask = attention_mask
    masked = None
    if decoder is not None:
        if input_ids is None:
            raise ValueError("MAE-LM's head needs input_ids, to find the [MASK] tokens")
        masked = input_ids == config.mask_token_id
        real = torch.ones_like(masked) if attention_mask is None else attention_mask.bool()
        encoder_mask = real & ~masked
    outputs = encoder(input_ids, attention_mask=encoder_mask, return_dict=True, **encoder_kwargs)
    hidden = outputs.last_hidden_state
    if decoder is not None:
        mask_embedding = embedding[config.mask_token_id].to(hidden.dtype)
        hidden = decoder(torch.where(masked.unsqueeze(-1), mask_embedding, hidden), attention_mask)
    logits = lm_head(hidden, embedding)
    loss = None
    if labels is not None:
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
    output = MaskedLMOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)
    return output if _return_dict(config, return_dict) else output.to_tuple()


def pool(hidden: Tensor, attention_mask: Optional[Tensor], pooling: str) -> Tensor:
    """The [CLS] state, or the mean over real tokens (specials included), as polymask fine-tunes."""
    if pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        return hidden.mean(dim=1)
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)


class PolymaskForSequenceClassification(PolymaskPreTrainedModel):
    """Encoder -> pooling (``config.pooling``) -> dropout -> linear layer, as ``polymask finetune`` trains it."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^decoder\."]  # the pretraining heads

    def __init__(self, config: PolymaskConfig) -> None:
        super().__init__(config)
        self.polymask = PolymaskModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                position_ids: Optional[Tensor] = None, inputs_embeds: Optional[Tensor] = None,
                token_type_ids: Optional[Tensor] = None, labels: Optional[Tensor] = None,
                output_attentions: Optional[bool] = None, output_hidden_states: Optional[bool] = None,
                return_dict: Optional[bool] = None):
        outputs = self.polymask(input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                inputs_embeds=inputs_embeds, output_attentions=output_attentions,
                                output_hidden_states=output_hidden_states, return_dict=True)
        return classify(self, outputs, attention_mask, labels, return_dict)


def classify(model: PreTrainedModel, outputs: BaseModelOutput, attention_mask: Optional[Tensor],
             labels: Optional[Tensor], return_dict: Optional[bool]) -> SequenceClassifierOutput:
    """``model.classifier`` on the pooled encoder output, with the loss of ``config.problem_type``."""
    config = model.config
    logits = model.classifier(model.dropout(pool(outputs.last_hidden_state, attention_mask, config.pooling)))
    loss = None
    if labels is not None:
        loss = classification_loss(config.problem_type, logits.float(), labels)
    output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)
    return output if _return_dict(config, return_dict) else output.to_tuple()


def classification_loss(kind: Optional[str], logits: Tensor, labels: Tensor) -> Tensor:
    if kind == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.float().view_as(logits.squeeze(-1)))
    if kind == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.float())
    return F.cross_entropy(logits, labels.view(-1))


def require_polymask_fields(config: PretrainedConfig, field: str, name: str) -> None:
    """Some transformers 4.x versions register a remote class loaded with ``trust_remote_code`` for every model of
    that config class in the process: another ESM model loaded afterwards through the same auto class would
    be built as this one. Refuse such a config in one line instead of building a wrong model."""
    if not hasattr(config, field):
        raise ValueError(f"{name} is polymask's class for its own ESM exports, and this ESM config is not one (no "
                         f"{field!r}). Your transformers version registered it for every ESM model in this process "
                         "after a trust_remote_code load: load this model in a new process, or upgrade transformers.")


class PolymaskEsmForSequenceClassification(EsmPreTrainedModel):
    """Native ``EsmModel`` -> pooling (``config.pooling``) -> dropout -> linear layer: a polymask fine-tuned
    head on an encoder exported as ESM (``EsmForSequenceClassification``'s head is a different one)."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^mae_"]  # the pretraining heads
    _keys_to_ignore_on_load_missing = [r"contact_head\."]  # ESM's protein contact head, not polymask's

    def __init__(self, config: PretrainedConfig) -> None:
        require_polymask_fields(config, "pooling", type(self).__name__)
        super().__init__(config)
        self.esm = EsmModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                inputs_embeds: Optional[Tensor] = None, labels: Optional[Tensor] = None,
                output_hidden_states: Optional[bool] = None, return_dict: Optional[bool] = None, **kwargs):
        outputs = self.esm(input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                           output_hidden_states=output_hidden_states, return_dict=True)
        return classify(self, outputs, attention_mask, labels, return_dict)


class PolymaskEsmMaeForMaskedLM(EsmPreTrainedModel):
    """MAE-LM's prediction path on a native ``EsmModel``: [MASK] tokens hidden from the encoder, the [MASK]
    embedding in their place, the shallow decoder (``mae_decoder``) and head (``mae_head``) reconstruct them.
    Its weights are named apart from ``EsmForMaskedLM``'s ``lm_head`` so that loading the folder as that class
    leaves its head visibly untrained instead of half-filled."""

    _keys_to_ignore_on_load_unexpected = [r"^classifier\."]
    _keys_to_ignore_on_load_missing = [r"contact_head\."]  # ESM's protein contact head, not polymask's

    def __init__(self, config: PretrainedConfig) -> None:
        require_polymask_fields(config, "decoder_layers", type(self).__name__)
        super().__init__(config)
        self.esm = EsmModel(config, add_pooling_layer=False)
        self.mae_decoder = PolymaskDecoder(config)
        self.mae_head = PolymaskLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> None:
        return None  # tied by construction: the head reads the input embedding matrix

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                labels: Optional[Tensor] = None, output_hidden_states: Optional[bool] = None,
                return_dict: Optional[bool] = None, **kwargs):
        """``labels`` (B, L): token ids, -100 where no loss is wanted."""
        embedding = self.esm.embeddings.word_embeddings.weight
        return masked_lm_forward(self.config, self.esm, embedding, self.mae_decoder, self.mae_head, input_ids,
                                 attention_mask, labels, return_dict, output_hidden_states=output_hidden_states)
