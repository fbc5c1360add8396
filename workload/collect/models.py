"""Small models in plain torch for ``python -m workload.collect --model``.

Each is a callable ``f(batch_size) -> ModelSpec`` (a tuple ``(module,
example_input)`` or ``(module, example_input, target)`` works as well). They
need nothing beyond torch: torchvision does not install beside the CPU torch
build used here.

    python -m workload.collect --model workload.collect.models:mlp --batch-size 32 --out traces/mlp
"""
from __future__ import annotations

import torch
from torch import nn

from workload.collect.spec import ModelSpec

__all__ = ["mlp", "small_cnn", "transformer_block", "MLP", "SmallCNN", "TransformerBlock"]


class MLP(nn.Module):
    """Three linear layers with ReLU: 256 -> 512 -> 512 -> 10."""

    def __init__(self, in_features: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class SmallCNN(nn.Module):
    """Two 3x3 convolutions with ReLU and max-pooling, then a linear classifier; 32x32 RGB input."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 8 * 8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class TransformerBlock(nn.Module):
    """A token embedding, one pre-norm transformer block (multi-head self-attention and
    an MLP, written out in plain ops) and a language-model head. Input: token ids
    (batch, seq); output: logits (batch, seq, vocab)."""

    def __init__(self, vocab: int = 1000, dim: int = 128, heads: int = 4, ff: int = 512) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, ff)
        self.down = nn.Linear(ff, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        x = x + self.down(torch.relu(self.up(self.norm2(x))))
        return self.head(x)


def mlp(batch_size: int = 32) -> ModelSpec:
    """MLP on random 256-feature inputs, 10 classes, cross-entropy, Adam."""
    return ModelSpec(MLP(), torch.randn(batch_size, 256))


def small_cnn(batch_size: int = 32) -> ModelSpec:
    """SmallCNN on random 3x32x32 images, 10 classes, cross-entropy, Adam."""
    return ModelSpec(SmallCNN(), torch.randn(batch_size, 3, 32, 32))


def transformer_block(batch_size: int = 32, seq_len: int = 64) -> ModelSpec:
    """TransformerBlock on random token ids, next-token cross-entropy over the vocabulary, Adam."""
    model = TransformerBlock()
    tokens = torch.randint(0, model.embed.num_embeddings, (batch_size, seq_len))
    return ModelSpec(model, tokens, target=torch.randint(0, model.embed.num_embeddings, (batch_size, seq_len)))
