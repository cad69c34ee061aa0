"""TL004: .view() on the result of permute/transpose."""

from torchlint.verify.case import Case

VIEW_MESSAGE = "view size is not compatible with input tensor's size and stride"

CASES = [
    Case(
        rule="TL004",
        title="attention heads merged with .transpose(1, 2).view(...)",
        bad="""\
import torch

batch, heads, seq, dim = 2, 4, 5, 8
attn = torch.randn(batch, heads, seq, dim, device=DEVICE)
merged = attn.transpose(1, 2).view(batch, seq, heads * dim)
""",
        good="""\
import torch

batch, heads, seq, dim = 2, 4, 5, 8
attn = torch.randn(batch, heads, seq, dim, device=DEVICE)
merged = attn.transpose(1, 2).reshape(batch, seq, heads * dim)
""",
        bad_line=5,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE, "show": ["merged.shape"]},
    ),
    Case(
        rule="TL004",
        title="permuted tensor flattened with .view(...)",
        bad="""\
import torch

images = torch.randn(2, 3, 4, 4, device=DEVICE)
channels_last = images.permute(0, 2, 3, 1)
flat = channels_last.view(2, -1)
""",
        good="""\
import torch

images = torch.randn(2, 3, 4, 4, device=DEVICE)
channels_last = images.permute(0, 2, 3, 1)
flat = channels_last.contiguous().view(2, -1)
""",
        bad_line=5,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE,
                "show": ["channels_last.stride()", "flat.shape"]},
    ),
    Case(
        rule="TL004",
        title="transposed matrix (.T) flattened with .view(-1)",
        bad="""\
import torch

weight = torch.randn(3, 4, device=DEVICE)
column_major = weight.T.view(-1)
""",
        good="""\
import torch

weight = torch.randn(3, 4, device=DEVICE)
column_major = weight.T.reshape(-1)
""",
        bad_line=4,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE, "show": ["column_major.shape"]},
    ),
    Case(
        rule="TL004",
        title="tokens merged back across the transpose; splitting one dimension is fine",
        bad="""\
import torch

tokens = torch.randn(2, 12, 8, device=DEVICE)
B, N, C = tokens.shape
pooled = tokens.transpose(1, 2).view(B, -1)
""",
        good="""\
import torch

tokens = torch.randn(2, 12, 8, device=DEVICE)
B, N, C = tokens.shape
H, W = 3, 4
feature_map = tokens.transpose(1, 2).view(B, C, H, W)
""",
        bad_line=5,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE, "show": ["feature_map.shape"]},
    ),
    Case(
        rule="TL004",
        title="channels-last flatten breaks, merging the two in-order dimensions is fine",
        bad="""\
import torch

embed = torch.randn(1, 8, 4, 4, device=DEVICE)
tokens = embed.permute(0, 2, 3, 1).view(embed.size(0), -1)
""",
        good="""\
import torch

embed = torch.randn(1, 8, 4, 4, device=DEVICE)
dim = embed.shape[1]
tokens = embed.permute(0, 2, 3, 1).view(1, -1, dim)
""",
        bad_line=4,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE, "show": ["tokens.shape"]},
    ),
    Case(
        rule="TL004",
        title="a transpose of an (n, 3) tensor cannot be flattened by view; of an (n, 1) one it can",
        bad="""\
import torch

column = torch.randn(5, 3, device=DEVICE)
row = column.t().view(-1)
""",
        good="""\
import torch

column = torch.randn(5, 1, device=DEVICE)
row = column.t().view(-1)
""",
        bad_line=4,
        probe="raises",
        expect={"exc": "RuntimeError", "match": VIEW_MESSAGE, "show": ["row.shape"]},
    ),
]
