"""A Hugging Face causal LM as a bundled task (`task=hf_causal_lm`): a GPT-2 built from a `GPT2Config` (never
`from_pretrained`), its input and output embeddings tied, fed an attention mask that hides the right padding, on
tiny_lm's token sequences. transformers is imported with this module, not by the builder: the worker imports a task's
module before it measures the import footprint, so that every arm's training memory leaves transformers out (the
hf_trainer extra installs it).
"""
from __future__ import annotations

import torch
from torch import nn

from evalkit.tasks.catalog import PAD_TOKEN, Task, TokenLoss, count_tokens, markov_tokens, perplexity

try:     # the classes themselves: transformers loads its model code lazily, on first use of a name
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as exc:     # pragma: no cover - the message is the point
    raise ImportError("task=hf_causal_lm builds a transformers model, and transformers is not installed: "
                      "pip install 'evalkit[hf_trainer]' (or choose another task)") from exc


class CausalLM(nn.Module):
    """A Hugging Face causal LM seen through evalkit's task contract: token ids in, logits out. The attention mask
    hides the pad tokens (PAD_TOKEN) from attention; `lm` is the transformers model itself (its `config`,
    `save_pretrained`, tied embeddings)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=tokens, attention_mask=(tokens != PAD_TOKEN).long()).logits


def hf_causal_lm(seed: int, *, n_train: int, n_val: int, vocab_size: int, seq_len: int, hidden: int, depth: int,
                 n_heads: int) -> Task:
    """A GPT-2 (`transformers.GPT2LMHeadModel`) built from a `GPT2Config` (`hidden`: n_embd, `depth`: n_layer,
    `n_heads`: n_head; dropout off, so a step depends on its data only; input and output embeddings tied) on tiny_lm's
    token sequences: the loss is the token mean over a micro-batch's non-pad targets (`Task.loss_terms`). Metric:
    perplexity over non-pad tokens (lower is better)."""
    train, val = markov_tokens(seed, n_train, n_val, vocab_size, seq_len)
    config = GPT2Config(vocab_size=vocab_size, n_positions=seq_len, n_embd=hidden, n_layer=depth,
                                     n_head=n_heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     tie_word_embeddings=True, bos_token_id=PAD_TOKEN, eos_token_id=PAD_TOKEN,
                                     pad_token_id=PAD_TOKEN)
    torch.manual_seed(seed)
    model = CausalLM(GPT2LMHeadModel(config))
    return Task("hf_causal_lm", model, train, val, TokenLoss(), perplexity(), loss_terms=count_tokens)
