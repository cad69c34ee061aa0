#!/usr/bin/env python
"""Recall of the shape rules (TL301-TL307) on seeded shape edits of real public training code.

    python bench/shape_edits.py --mirror /work/.mirror             # lint mode: recall per kind
    python bench/shape_edits.py --mirror /work/.mirror --confirm   # first run every mutant on torch
    python bench/shape_edits.py --mirror /work/.mirror --confirm --json
    python bench/shape_edits.py --mirror /work/.mirror --list      # every seed and its outcome

Each seed is ONE changed line in one file of a public repository at a pinned commit: the edit a
learner makes (a kernel size, a channel count, the input resolution, MNIST swapped for CIFAR10, a
pooling layer removed, a hard-coded view size, a loss target's shape, batch_first, a Normalize's
channels, a U-Net/ResNet skip). No fetched code is stored here: a seed is data (repository,
commit, path, a unique snippet of the original text, its replacement, the kind), and the file is
read from the snapshot's bare git directory at run time (`git --git-dir=D show COMMIT:PATH`).
`--mirror` is the folder that holds the snapshots (`owner+name/repo`, as the `fetch` tool lays
them out, or `owner+name` itself a git directory); a seed whose repository is absent is skipped
and said so.

--confirm (needs torch; run in a child process, so the lint step never imports torch): each
original and each mutant is executed on random data of the shape the code's data implies
(torchvision is replaced by a small stand-in: MNIST gives (1, 28, 28) images, CIFAR10 (3, 32, 32),
FakeData/ImageFolder what they are asked for, and the transforms act on tensors as torchvision's
do; a DataLoader yields the first two batches and the real last, partial one). A file runs either
whole as a script (`__main__`, a short argv, epochs cut in both original and mutant) or as its
imports, definitions and literal assignments plus a driver snippet stored below. A mutant counts
as confirmed when it raises where the original did not, or, for the silent kinds, when a probe
measures the harm (a sample's output changes when another sample of the batch is changed; a
loss warns that it broadcasts target and input). A mutant that runs clean is dropped ("not a
bug"); an original that does not run clean is reported and its seeds are not counted.

Lint mode (always): each seed's file is linted before and after the edit with the TL3 rules that
exist (`select_rules(["TL3"])`), in memory, under the file's path inside a temporary extract of
its directory (so the project layer sees its sibling files). A seed is found when a TL30x finding
appears in the edited file that was not there on the original; the table also counts the ones
at the edited line or the line where torch raised. The findings on the unmodified originals are
listed: they must be none.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))

KINDS = ("kernel", "channels", "resolution", "dataset", "pooling", "view", "loss", "batch_first",
         "normalize", "skip")


@dataclass(frozen=True)
class File:
    """How to read and run one source file of a repository."""
    repo: str            # owner/name
    commit: str
    path: str
    mode: str = "script"  # "script": run the whole file as __main__; "defs": definitions + driver
    argv: Tuple[str, ...] = ()
    shrink: Tuple[Tuple[str, str], ...] = ()  # edits applied to original and mutant alike (epochs)
    keep: Tuple[str, ...] = ()   # defs mode: top-level statements with one of these snippets also run
    driver: str = ""            # code run after the file (defs mode), or after the script
    probe: str = ""             # silent kinds: code that sets HARM to a string when it measures harm
    prelude: Tuple[str, ...] = ()   # other paths of the repository run first, in the same namespace
    postlude: Tuple[str, ...] = ()  # ... and after it (relative imports dropped, definitions only)
    syspath: bool = False           # its folder (extracted at the commit) goes on sys.path: `import utils`


@dataclass(frozen=True)
class Seed:
    file: str      # key in FILES
    kind: str
    old: str       # a snippet that occurs exactly once in the file (cell sources for a notebook)
    new: str
    note: str = ""
    nth: int = 0     # the snippet's n-th occurrence (1-based) where it is not unique
    probe: str = ""  # overrides the file's probe


EX = ("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8")
YJ = ("yunjey/pytorch-tutorial", "0500d3df5a2a8080ccfccbc00aca0eacc21818db")
UN = ("milesial/Pytorch-UNet", "21d7850f2af30a9695bbeea75f3136aa538cfc4a")
DB = ("mrdbourke/pytorch-deep-learning", "baa27b691617461c173ecf3439793cd8cde74e13")
# pytorch/tutorials' snapshot is over 5 GB: its CIFAR-10 tutorial from a 2018 copy of that repository
# (the same Net, transforms and loop; a local dataset path and NUM_EPOCHS added).
CJ = ("cjacobs/pytorch_tutorials", "e32fe199c450b934db17b4cff0442de01e5222bb")

_MIX = """
HARM = mixes_batch(model, x)
"""

_EPOCH = ("--epochs", "1")
_VIT_PROBE = "HARM = mixes_batch(model, x)\n"
_MIX_PROBE = "model = Net()\nx = torch.rand(8, 1, 28, 28)\nHARM = mixes_batch(model, x)\n"

FILES: Dict[str, File] = {
    # pytorch/examples: scripts run whole (argparse argv), MNIST/FakeData from the stand-in.
    "ex-mnist": File(*EX, "mnist/main.py", argv=_EPOCH + ("--dry-run",)),
    "ex-vae": File(*EX, "vae/main.py", argv=_EPOCH),
    "ex-mnist-rnn": File(*EX, "mnist_rnn/main.py", argv=_EPOCH + ("--dry-run",), probe=_MIX_PROBE),
    "ex-dcgan": File(*EX, "dcgan/main.py", argv=("--dataset", "fake", "--dry-run", "--batchSize", "16")),
    "ex-wlm-model": File(*EX, "word_language_model/model.py", mode="defs", driver=(
        "model = RNNModel('LSTM', 1000, 200, 200, 2)\n"
        "x = torch.randint(0, 1000, (35, 20))\n"
        "out, hidden = model(x, model.init_hidden(20))\n"
        "tmodel = TransformerModel(1000, 200, 2, 200, 2)\n"
        "out = tmodel(x)\n")),
    # yunjey/pytorch-tutorial: top-level scripts; the epoch counts are cut in original and mutant.
    "yj-ffnn": File(*YJ, "tutorials/01-basics/feedforward_neural_network/main.py",
                    shrink=(("num_epochs = 5", "num_epochs = 1"),)),
    "yj-cnn": File(*YJ, "tutorials/02-intermediate/convolutional_neural_network/main.py",
                   shrink=(("num_epochs = 5", "num_epochs = 1"),)),
    "yj-rnn": File(*YJ, "tutorials/02-intermediate/recurrent_neural_network/main.py",
                   shrink=(("num_epochs = 2", "num_epochs = 1"),)),
    "yj-birnn": File(*YJ, "tutorials/02-intermediate/bidirectional_recurrent_neural_network/main.py",
                     shrink=(("num_epochs = 2", "num_epochs = 1"),)),
    "yj-resnet": File(*YJ, "tutorials/02-intermediate/deep_residual_network/main.py",
                      shrink=(("num_epochs = 80", "num_epochs = 1"),)),
    "yj-vae": File(*YJ, "tutorials/03-advanced/variational_autoencoder/main.py",
                   shrink=(("num_epochs = 15", "num_epochs = 1"),)),
    "yj-gan": File(*YJ, "tutorials/03-advanced/generative_adversarial_network/main.py",
                   shrink=(("num_epochs = 200", "num_epochs = 1"),)),
    # milesial/Pytorch-UNet: the package's two files, run one after the other, and a forward.
    "unet-model": File(*UN, "unet/unet_model.py", mode="defs", prelude=("unet/unet_parts.py",),
                       driver="model = UNet(n_channels=3, n_classes=2)\nmodel(torch.rand(2, 3, 64, 64))\n"),
    "unet-parts": File(*UN, "unet/unet_parts.py", mode="defs", postlude=("unet/unet_model.py",),
                       driver="model = UNet(n_channels=3, n_classes=2)\nmodel(torch.rand(2, 3, 64, 64))\n"),
    # mrdbourke/pytorch-deep-learning: TinyVGG (going_modular, 64x64 pizza/steak/sushi photos).
    "db-model-builder": File(*DB, "going_modular/going_modular/model_builder.py", mode="defs", driver=(
        "model = TinyVGG(input_shape=3, hidden_units=10, output_shape=3)\n"
        "model(torch.rand(32, 3, 64, 64))\n")),
    "db-train": File(*DB, "going_modular/going_modular/train.py", syspath=True,
                     shrink=(("NUM_EPOCHS = 5", "NUM_EPOCHS = 1"),)),
    # mrdbourke notebooks: their definitions, the cells named by `keep`, and a driver.
    "db-nb03-cv": File(*DB, "03_pytorch_computer_vision.ipynb", mode="defs", keep=(
        "train_data = datasets.", "test_data = datasets.FashionMNIST(", "class_names = train_data.classes",
        "train_dataloader = DataLoader(train_data,", "model_2 = FashionMNISTModelV2(", 'device = "cuda"'), driver=(
        "images, labels = next(iter(train_dataloader))\n"
        "nn.CrossEntropyLoss()(model_2(images), labels)\n")),
    "db-nb08-vit": File(*DB, "08_pytorch_paper_replicating.ipynb", mode="defs", keep=(
        "manual_transforms = transforms.Compose(",), driver=(
        "x = torch.stack([manual_transforms(torch.rand(3, 384, 512)) for _ in range(4)])\n"
        "model = ViT(num_classes=3, num_transformer_layers=2)\n"
        "model(x)\n")),
    "db-nb01-workflow": File(*DB, "01_pytorch_workflow.ipynb", mode="defs", keep=(
        "X = torch.arange(", "train_split = int(", "model_1 = LinearRegressionModelV2()", 'device = "cuda"',
        "loss_fn = nn.L1Loss()", "optimizer = torch.optim.SGD(params=model_1", "y_pred = model_1(X_train)")),
    # the CIFAR-10 tutorial: its definitions, data and training loop (the plots need matplotlib).
    "tut-cifar10": File(*CJ, "beginner_source/blitz/cifar10_tutorial.py", mode="defs", keep=(
        "CIFAR_DATASET_DIR = ", "transform = transforms.Compose(", "trainset = torchvision.datasets.",
        "trainloader = torch.utils.data.DataLoader(", "net = Net()", "criterion = nn.", "optimizer = optim.SGD(",
        "for epoch in range(NUM_EPOCHS)"), shrink=(("NUM_EPOCHS = 10", "NUM_EPOCHS = 1"),)),
    # pytorch/examples fast_neural_style: the residual image transformation network.
    "ex-style-net": File(*EX, "fast_neural_style/neural_style/transformer_net.py", mode="defs",
                         driver="model = TransformerNet()\nmodel(torch.rand(2, 3, 64, 64))\n"),
    # pytorch/examples time_sequence_prediction: LSTMCells on 97 sine waves of 999 steps, MSELoss
    # (the data as generate_sine_wave.py makes it; the script itself needs matplotlib).
    "ex-time-seq": File(*EX, "time_sequence_prediction/train.py", mode="defs", driver=(
        "waves = torch.sin((torch.arange(1000) + torch.randint(-80, 80, (100, 1))) / 20.0).double()\n"
        "input, target = waves[3:, :-1], waves[3:, 1:]\n"
        "seq = Sequence()\nseq.double()\n"
        "loss = nn.MSELoss()(seq(input), target)\n")),
    "yj-lm": File(*YJ, "tutorials/02-intermediate/language_model/main.py", mode="defs", driver=(
        "vocab_size = 1000\n"
        "ids = torch.randint(0, vocab_size, (batch_size, 4 * seq_length + 1))\n"
        "model = RNNLM(vocab_size, embed_size, hidden_size, num_layers)\n"
        "states = (torch.zeros(num_layers, batch_size, hidden_size), torch.zeros(num_layers, batch_size, hidden_size))\n"
        "outputs, states = model(ids[:, :seq_length], states)\n"
        "loss = nn.CrossEntropyLoss()(outputs, ids[:, 1:1 + seq_length].reshape(-1))\n")),
}

SEEDS: List[Seed] = [
    # ---- pytorch/examples mnist/main.py
    Seed("ex-mnist", "kernel", "nn.Conv2d(32, 64, 3, 1)", "nn.Conv2d(32, 64, 5, 1)"),
    Seed("ex-mnist", "kernel", "nn.Conv2d(1, 32, 3, 1)", "nn.Conv2d(1, 32, 5, 1)"),
    Seed("ex-mnist", "channels", "nn.Conv2d(1, 32, 3, 1)", "nn.Conv2d(1, 16, 3, 1)"),
    Seed("ex-mnist", "channels", "nn.Conv2d(32, 64, 3, 1)", "nn.Conv2d(32, 128, 3, 1)"),
    Seed("ex-mnist", "pooling", "        x = F.max_pool2d(x, 2)", "        # x = F.max_pool2d(x, 2)"),
    Seed("ex-mnist", "dataset", "dataset1 = datasets.MNIST(", "dataset1 = datasets.CIFAR10("),
    Seed("ex-mnist", "normalize", "transforms.Normalize((0.1307,), (0.3081,))",
         "transforms.Normalize((0.1307, 0.1307, 0.1307), (0.3081, 0.3081, 0.3081))"),
    Seed("ex-mnist", "view", "x = torch.flatten(x, 1)", "x = x.view(64, -1)", "hard-coded batch size"),
    Seed("ex-mnist", "view", "x = torch.flatten(x, 1)", "x = x.view(-1, 4608)", "folds two samples into one row"),
    Seed("ex-mnist", "loss", "loss = F.nll_loss(output, target)", "loss = F.nll_loss(output, target.unsqueeze(1))"),
    # ---- pytorch/examples vae/main.py
    Seed("ex-vae", "view", "self.encode(x.view(-1, 784))", "self.encode(x.view(args.batch_size, -1))",
         "hard-coded batch size vs the partial last batch"),
    Seed("ex-vae", "dataset", "datasets.MNIST('../data', train=True", "datasets.CIFAR10('../data', train=True"),
    Seed("ex-vae", "channels", "self.fc3 = nn.Linear(20, 400)", "self.fc3 = nn.Linear(40, 400)"),
    Seed("ex-vae", "loss", "F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')",
         "F.binary_cross_entropy(recon_x, x, reduction='sum')"),
    # ---- pytorch/examples mnist_rnn/main.py
    Seed("ex-mnist-rnn", "batch_first", "nn.LSTM(input_size=28, hidden_size=64, batch_first=True)",
         "nn.LSTM(input_size=28, hidden_size=64)", "silent: the batch becomes the sequence"),
    Seed("ex-mnist-rnn", "channels", "nn.LSTM(input_size=28, hidden_size=64, batch_first=True)",
         "nn.LSTM(input_size=28, hidden_size=128, batch_first=True)"),
    Seed("ex-mnist-rnn", "channels", "self.batchnorm = nn.BatchNorm1d(64)", "self.batchnorm = nn.BatchNorm1d(32)"),
    Seed("ex-mnist-rnn", "view", "input = input.reshape(-1, 28, 28)", "input = input.reshape(64, 28, 28)",
         "hard-coded batch size"),
    Seed("ex-mnist-rnn", "dataset", "datasets.MNIST('../data', train=True", "datasets.CIFAR10('../data', train=True"),
    # ---- pytorch/examples dcgan/main.py (FakeData 3x64x64)
    Seed("ex-dcgan", "resolution", "default=64, help='the height / width", "default=128, help='the height / width"),
    Seed("ex-dcgan", "kernel", "nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False)", "nn.Conv2d(ndf * 8, 1, 3, 1, 0, bias=False)"),
    Seed("ex-dcgan", "channels", "nn.BatchNorm2d(ngf * 4),", "nn.BatchNorm2d(ngf * 8),"),
    Seed("ex-dcgan", "channels", "nn.ConvTranspose2d(     nz, ngf * 8, 4, 1, 0, bias=False)",
         "nn.ConvTranspose2d(     nz, ngf * 4, 4, 1, 0, bias=False)"),
    Seed("ex-dcgan", "loss", "return output.view(-1, 1).squeeze(1)", "return output.view(-1, 1)"),
    # ---- pytorch/examples word_language_model/model.py
    Seed("ex-wlm-model", "batch_first", "self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)",
         "self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout, batch_first=True)"),
    Seed("ex-wlm-model", "batch_first", "dim_feedforward=nhid, num_encoder_layers=nlayers)",
         "dim_feedforward=nhid, num_encoder_layers=nlayers, batch_first=True)"),
    Seed("ex-wlm-model", "channels", "self.decoder = nn.Linear(nhid, ntoken)", "self.decoder = nn.Linear(ninp, ntoken)",
         "ninp == nhid in the example's defaults"),
    Seed("ex-wlm-model", "channels", "self.decoder = nn.Linear(ninp, ntoken)", "self.decoder = nn.Linear(nhid, ntoken)",
         "TransformerModel: nhid is the feed-forward width"),
    # ---- yunjey feedforward
    Seed("yj-ffnn", "view", "images = images.reshape(-1, 28*28).to(device)",
         "images = images.reshape(-1, 28*14).to(device)", nth=1),
    Seed("yj-ffnn", "dataset", "train_dataset = torchvision.datasets.MNIST(", "train_dataset = torchvision.datasets.CIFAR10("),
    Seed("yj-ffnn", "channels", "input_size = 784", "input_size = 1024"),
    Seed("yj-ffnn", "view", "images = images.reshape(-1, 28*28).to(device)",
         "images = images.reshape(batch_size, -1).to(device)", "batch 100 divides 60000 and 10000", nth=2),
    # ---- yunjey CNN
    Seed("yj-cnn", "kernel", "nn.Conv2d(16, 32, kernel_size=5, stride=1, padding=2)",
         "nn.Conv2d(16, 32, kernel_size=3, stride=1, padding=2)"),
    Seed("yj-cnn", "kernel", "nn.Conv2d(1, 16, kernel_size=5, stride=1, padding=2)",
         "nn.Conv2d(1, 16, kernel_size=5, stride=1, padding=0)"),
    Seed("yj-cnn", "channels", "nn.BatchNorm2d(16)", "nn.BatchNorm2d(32)"),
    Seed("yj-cnn", "channels", "nn.Conv2d(16, 32, kernel_size=5", "nn.Conv2d(16, 64, kernel_size=5"),
    Seed("yj-cnn", "pooling", "nn.MaxPool2d(kernel_size=2, stride=2))", "nn.Identity())", "the second pool", nth=2),
    Seed("yj-cnn", "dataset", "train_dataset = torchvision.datasets.MNIST(", "train_dataset = torchvision.datasets.CIFAR10("),
    Seed("yj-cnn", "resolution", "transform=transforms.ToTensor(),\n",
         "transform=transforms.Compose([transforms.Resize(32), transforms.ToTensor()]),\n"),
    Seed("yj-cnn", "view", "out = out.reshape(out.size(0), -1)", "out = out.reshape(-1, 7*7*16)"),
    Seed("yj-cnn", "view", "out = out.reshape(out.size(0), -1)", "out = out.reshape(batch_size, -1)",
         "batch 100 divides 60000 and 10000"),
    Seed("yj-cnn", "loss", "loss = criterion(outputs, labels)", "loss = criterion(outputs, labels.unsqueeze(1))"),
    # ---- yunjey RNN / BiRNN
    Seed("yj-rnn", "batch_first", "nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)",
         "nn.LSTM(input_size, hidden_size, num_layers)"),
    Seed("yj-rnn", "view", "sequence_length = 28", "sequence_length = 14"),
    Seed("yj-rnn", "dataset", "train_dataset = torchvision.datasets.MNIST(", "train_dataset = torchvision.datasets.CIFAR10("),
    Seed("yj-rnn", "channels", "self.fc = nn.Linear(hidden_size, num_classes)", "self.fc = nn.Linear(hidden_size * 2, num_classes)"),
    Seed("yj-birnn", "channels", "self.fc = nn.Linear(hidden_size*2, num_classes)", "self.fc = nn.Linear(hidden_size, num_classes)"),
    Seed("yj-birnn", "batch_first", "num_layers, batch_first=True, bidirectional=True)", "num_layers, bidirectional=True)"),
    Seed("yj-birnn", "view", "images = images.reshape(-1, sequence_length, input_size).to(device)",
         "images = images.reshape(-1, input_size, sequence_length * 2).to(device)", nth=1),
    # ---- yunjey ResNet (CIFAR10)
    Seed("yj-resnet", "skip", "            residual = self.downsample(x)", "            residual = x"),
    Seed("yj-resnet", "skip", "conv3x3(self.in_channels, out_channels, stride=stride),",
         "conv3x3(self.in_channels, out_channels),"),
    Seed("yj-resnet", "pooling", "self.avg_pool = nn.AvgPool2d(8)", "self.avg_pool = nn.AvgPool2d(4)"),
    Seed("yj-resnet", "resolution", "transforms.RandomCrop(32),", "transforms.RandomCrop(28),"),
    Seed("yj-resnet", "channels", "self.bn = nn.BatchNorm2d(16)", "self.bn = nn.BatchNorm2d(32)"),
    Seed("yj-resnet", "dataset", "train_dataset = torchvision.datasets.CIFAR10(", "train_dataset = torchvision.datasets.MNIST("),
    Seed("yj-resnet", "kernel", "kernel_size=3, \n                     stride=stride, padding=1",
         "kernel_size=5, \n                     stride=stride, padding=1"),
    # ---- yunjey VAE / GAN
    Seed("yj-vae", "dataset", "dataset = torchvision.datasets.MNIST(", "dataset = torchvision.datasets.CIFAR10("),
    Seed("yj-vae", "view", "x = x.to(device).view(-1, image_size)", "x = x.to(device).view(batch_size, -1)",
         "hard-coded batch size vs the partial last batch (60000 % 128)"),
    Seed("yj-vae", "channels", "self.fc4 = nn.Linear(z_dim, h_dim)", "self.fc4 = nn.Linear(h_dim, h_dim)"),
    Seed("yj-vae", "loss", "F.binary_cross_entropy(x_reconst, x, size_average=False)",
         "F.binary_cross_entropy(x_reconst, x.view(-1, 1, 28, 28), size_average=False)"),
    Seed("yj-gan", "normalize", "transforms.Normalize(mean=[0.5],", "transforms.Normalize(mean=[0.5, 0.5, 0.5],"),
    Seed("yj-gan", "dataset", "mnist = torchvision.datasets.MNIST(", "mnist = torchvision.datasets.CIFAR10("),
    Seed("yj-gan", "view", "batch_size = 100", "batch_size = 128", "the hard-coded reshape(batch_size, -1) meets a partial batch"),
    Seed("yj-gan", "loss", "real_labels = torch.ones(batch_size, 1).to(device)", "real_labels = torch.ones(batch_size).to(device)"),
    # ---- U-Net
    Seed("unet-model", "channels", "self.up1 = (Up(1024, 512 // factor, bilinear))", "self.up1 = (Up(512, 512 // factor, bilinear))"),
    Seed("unet-model", "skip", "x = self.up2(x, x3)", "x = self.up2(x, x2)"),
    Seed("unet-model", "channels", "self.outc = (OutConv(64, n_classes))", "self.outc = (OutConv(128, n_classes))"),
    Seed("unet-parts", "skip", "x = torch.cat([x2, x1], dim=1)", "x = x2 + x1"),
    Seed("unet-parts", "skip", "x = torch.cat([x2, x1], dim=1)", "x = torch.cat([x2, x1], dim=2)"),
    Seed("unet-parts", "kernel", "nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False)",
         "nn.Conv2d(in_channels, mid_channels, kernel_size=5, padding=1, bias=False)"),
    Seed("unet-parts", "kernel", "nn.MaxPool2d(2),", "nn.MaxPool2d(4),"),
    Seed("unet-parts", "pooling", "            nn.MaxPool2d(2),", "            # nn.MaxPool2d(2),"),
    Seed("unet-parts", "channels", "nn.BatchNorm2d(mid_channels),", "nn.BatchNorm2d(out_channels),",
         "mid == out unless bilinear"),
    # ---- TinyVGG (going_modular)
    Seed("db-model-builder", "channels", "nn.Linear(in_features=hidden_units*13*13,", "nn.Linear(in_features=hidden_units*16*16,"),
    Seed("db-model-builder", "kernel", "nn.Conv2d(hidden_units, hidden_units, kernel_size=3, padding=0),",
         "nn.Conv2d(hidden_units, hidden_units, kernel_size=5, padding=0),", nth=1),
    Seed("db-model-builder", "pooling", "          nn.MaxPool2d(2)\n", "          # nn.MaxPool2d(2)\n"),
    Seed("db-model-builder", "channels", "nn.Conv2d(in_channels=hidden_units, \n                    out_channels=hidden_units,",
         "nn.Conv2d(in_channels=hidden_units * 2, \n                    out_channels=hidden_units,"),
    Seed("db-train", "resolution", "transforms.Resize((64, 64))", "transforms.Resize((128, 128))"),
    Seed("db-train", "channels", "input_shape=3,", "input_shape=1,"),
    # ---- notebook 03 (FashionMNIST, TinyVGG)
    Seed("db-nb03-cv", "channels", "nn.Linear(in_features=hidden_units*7*7,", "nn.Linear(in_features=hidden_units*14*14,"),
    Seed("db-nb03-cv", "kernel", "kernel_size=3, # how big", "kernel_size=5, # how big"),
    Seed("db-nb03-cv", "pooling", "            nn.MaxPool2d(2)\n", "            # nn.MaxPool2d(2)\n"),
    Seed("db-nb03-cv", "dataset", "train_data = datasets.FashionMNIST(", "train_data = datasets.CIFAR10("),
    Seed("db-nb03-cv", "channels", "model_2 = FashionMNISTModelV2(input_shape=1,", "model_2 = FashionMNISTModelV2(input_shape=3,", nth=1),
    # ---- notebook 08 (ViT)
    Seed("db-nb08-vit", "batch_first", "batch_first=True) # does our batch dimension come first?",
         "batch_first=False) # does our batch dimension come first?", "silent: attention runs across the batch",
         probe=_VIT_PROBE),
    Seed("db-nb08-vit", "resolution", "IMG_SIZE = 224", "IMG_SIZE = 256"),
    Seed("db-nb08-vit", "channels", "in_features=mlp_size,", "in_features=embedding_dim,"),
    Seed("db-nb08-vit", "channels", "nn.LayerNorm(normalized_shape=embedding_dim),", "nn.LayerNorm(normalized_shape=mlp_size),"),
    Seed("db-nb08-vit", "skip", "torch.cat((class_token, x), dim=1)", "torch.cat((class_token, x), dim=2)"),
    Seed("db-nb08-vit", "kernel", "                                 kernel_size=patch_size,",
         "                                 kernel_size=patch_size * 2,"),
    # ---- notebook 01 (linear regression, L1Loss)
    Seed("db-nb01-workflow", "view", "X = torch.arange(start, end, step).unsqueeze(dim=1) # without",
         "X = torch.arange(start, end, step) # without", "the data loses its feature dimension"),
    Seed("db-nb01-workflow", "loss", "loss = loss_fn(y_pred, y_train)", "loss = loss_fn(y_pred, y_train.squeeze())",
         "silent: (40, 1) against (40,) broadcasts to 40x40", nth=2),
    Seed("db-nb01-workflow", "loss", "y = weight * X + bias \n", "y = weight * X.squeeze() + bias \n",
         "silent: targets (N,) against predictions (N, 1)"),
    # ---- the CIFAR-10 tutorial (LeNet on 3x32x32, batch 4)
    Seed("tut-cifar10", "kernel", "self.conv1 = nn.Conv2d(3, 6, 5)", "self.conv1 = nn.Conv2d(3, 6, 3)",
         "30 -> 15 -> 11 -> 5: still 16*5*5"),
    Seed("tut-cifar10", "kernel", "self.conv2 = nn.Conv2d(6, 16, 5)", "self.conv2 = nn.Conv2d(6, 16, 3)"),
    Seed("tut-cifar10", "channels", "self.conv2 = nn.Conv2d(6, 16, 5)", "self.conv2 = nn.Conv2d(6, 32, 5)",
         "view(-1, 400) folds two samples into one row"),
    Seed("tut-cifar10", "channels", "self.conv2 = nn.Conv2d(6, 16, 5)", "self.conv2 = nn.Conv2d(3, 16, 5)"),
    Seed("tut-cifar10", "dataset", "trainset = torchvision.datasets.CIFAR10(", "trainset = torchvision.datasets.MNIST("),
    Seed("tut-cifar10", "normalize", "transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))",
         "transforms.Normalize((0.5,), (0.5,))", "a 1-channel mean broadcasts over 3 channels"),
    Seed("tut-cifar10", "normalize", "[transforms.ToTensor(),", "[transforms.ToTensor(), transforms.Grayscale(),"),
    Seed("tut-cifar10", "resolution", "[transforms.ToTensor(),", "[transforms.Resize(64), transforms.ToTensor(),"),
    Seed("tut-cifar10", "pooling", "x = self.pool(F.relu(self.conv2(x)))", "x = F.relu(self.conv2(x))"),
    Seed("tut-cifar10", "view", "x = x.view(-1, 16 * 5 * 5)", "x = x.view(16 * 5 * 5, -1)"),
    Seed("tut-cifar10", "view", "x = x.view(-1, 16 * 5 * 5)", "x = x.view(4, -1)", "batch 4 divides 50000"),
    Seed("tut-cifar10", "loss", "criterion = nn.CrossEntropyLoss()", "criterion = nn.MSELoss()"),
    # ---- fast_neural_style TransformerNet
    Seed("ex-style-net", "skip", "self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)",
         "self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=2)"),
    Seed("ex-style-net", "kernel", "self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)",
         "self.conv1 = ConvLayer(channels, channels, kernel_size=4, stride=1)"),
    Seed("ex-style-net", "channels", "self.in2 = torch.nn.InstanceNorm2d(64, affine=True)",
         "self.in2 = torch.nn.InstanceNorm2d(128, affine=True)"),
    Seed("ex-style-net", "channels", "self.conv3 = ConvLayer(64, 128, kernel_size=3, stride=2)",
         "self.conv3 = ConvLayer(64, 64, kernel_size=3, stride=2)"),
    # ---- time_sequence_prediction
    Seed("ex-time-seq", "channels", "self.linear = nn.Linear(51, 1)", "self.linear = nn.Linear(51, 2)"),
    Seed("ex-time-seq", "channels", "self.lstm2 = nn.LSTMCell(51, 51)", "self.lstm2 = nn.LSTMCell(51, 64)"),
    Seed("ex-time-seq", "view", "for input_t in input.split(1, dim=1):", "for input_t in input.split(1, dim=0):"),
    # ---- yunjey language model (LSTM, batch first, Penn Treebank ids as random ones)
    Seed("yj-lm", "batch_first", "nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)",
         "nn.LSTM(embed_size, hidden_size, num_layers)"),
    Seed("yj-lm", "view", "out = out.reshape(out.size(0)*out.size(1), out.size(2))", "out = out.reshape(out.size(0), -1)"),
    Seed("yj-lm", "channels", "self.linear = nn.Linear(hidden_size, vocab_size)", "self.linear = nn.Linear(embed_size, vocab_size)"),
    # ---- more of the weak kinds
    Seed("ex-mnist-rnn", "normalize", "transforms.Normalize((0.1307,), (0.3081,))",
         "transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))", "ImageNet statistics pasted", nth=1),
    Seed("yj-resnet", "skip", "self.conv2 = conv3x3(out_channels, out_channels)",
         "self.conv2 = conv3x3(out_channels, out_channels, stride)"),
    Seed("unet-model", "skip", "x = self.up4(x, x1)", "x = self.up4(x, x2)"),
    Seed("yj-ffnn", "loss", "criterion = nn.CrossEntropyLoss()", "criterion = nn.BCEWithLogitsLoss()"),
]


# --------------------------------------------------------------------------------------------
# Reading seeds' files from the snapshots and applying the edits (no torch)
# --------------------------------------------------------------------------------------------

class EditError(Exception):
    """A seed that does not apply: its snippet is absent or not unique, or it changes more than one line."""


def git_dir(mirror: Path, repo: str) -> Optional[Path]:
    base = mirror / repo.replace("/", "+")
    for candidate in (base / "repo", base / "repo" / ".git", base, base / ".git"):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def read_blob(directory: Path, commit: str, path: str) -> str:
    done = subprocess.run(["git", "--git-dir", str(directory), "show", f"{commit}:{path}"],
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise EditError(f"git show {commit[:12]}:{path}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode("utf-8")


def code_cells(notebook: dict) -> List[Tuple[int, str]]:
    """(cell number counted from 1 over all cells, source) for each code cell (as torchlint counts)."""
    cells = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append((number, "".join(source) if isinstance(source, list) else source))
    return cells


def _one_line_changed(before: str, after: str) -> int:
    old, new = before.splitlines(), after.splitlines()
    changed = [n for n, (a, b) in enumerate(zip(old, new), 1) if a != b]
    if len(old) != len(new) or len(changed) != 1:
        raise EditError(f"the edit changes {len(changed)} line(s) and the line count by {len(new) - len(old)}")
    return changed[0]


def normalised(text: str, path: str) -> str:
    """The text linted as the original: a notebook goes through the same serialisation as its edits."""
    if not path.endswith(".ipynb"):
        return text
    return json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"


def _replace(text: str, old: str, new: str, nth: int) -> str:
    count = text.count(old)
    if (nth == 0 and count != 1) or count < nth:
        raise EditError(f"snippet found {count} times{'' if nth == 0 else f' (wanted occurrence {nth})'}: {old!r}")
    start = -1
    for _ in range(max(nth, 1)):
        start = text.index(old, start + 1)
    return text[:start] + new + text[start + len(old):]


def apply_edit(text: str, path: str, old: str, new: str, nth: int = 0) -> Tuple[str, Tuple[Optional[int], int]]:
    """The edited text and where the changed line is: (cell or None, 1-based line in the file or cell)."""
    if not path.endswith(".ipynb"):
        edited = _replace(text, old, new, nth)
        return edited, (None, _one_line_changed(text, edited))
    notebook = json.loads(text)
    hits = [(number, source) for number, source in code_cells(notebook) if old in source]
    count = sum(source.count(old) for _, source in hits)
    if (nth == 0 and count != 1) or count < nth:
        raise EditError(f"snippet found {count} times in the code cells: {old!r}")
    wanted = max(nth, 1)
    for number, source in hits:
        if source.count(old) >= wanted:
            break
        wanted -= source.count(old)
    edited_source = _replace(source, old, new, wanted if nth else 0)
    line = _one_line_changed(source, edited_source)
    notebook["cells"][number - 1]["source"] = edited_source.splitlines(keepends=True)
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", (number, line)


def shrunk(text: str, path: str, edits: Sequence[Tuple[str, str]]) -> str:
    """The file's own text with the run-time cuts (fewer epochs) that original and mutants share."""
    for old, new in edits:
        if old not in text:
            raise EditError(f"shrink snippet not found: {old!r}")
        text = text.replace(old, new)
    return text


def runnable_code(text: str, path: str) -> Tuple[str, List[Tuple[Optional[int], int]]]:
    """Python source to execute, and for each of its lines where it comes from (cell, line).
    A notebook's code cells are joined; IPython magics and shell lines become `pass`."""
    if not path.endswith(".ipynb"):
        return text, [(None, n) for n in range(1, text.count("\n") + 2)]
    lines, where = [], []
    for number, source in code_cells(json.loads(text)):
        for row, line in enumerate(source.splitlines(), 1):
            stripped = line.lstrip()
            if stripped.startswith(("!", "%")):
                line = line[:len(line) - len(stripped)] + "pass"
            lines.append(line)
            where.append((number, row))
        lines.append("")
        where.append((number, 0))
    return "\n".join(lines) + "\n", where


# --------------------------------------------------------------------------------------------
# Lint mode (torchlint's API; never torch)
# --------------------------------------------------------------------------------------------

_STAMP = [0]


def shape_findings(path: str, text: str) -> List[dict]:
    """The TL30x findings of `text` linted as the file at `path`, which holds that text on disk
    while it is linted (in the temporary extract): as in an editor or a pre-commit hook, the other
    files of its directory that import it see the edited version."""
    from torchlint.engine import select_rules
    from torchlint.runner import lint_data

    rules = select_rules(["TL3"])
    original = Path(path).read_bytes() if os.path.exists(path) else None
    data = text.encode("utf-8")
    if original is None:  # not extracted (the archive failed): linted in memory only
        result = lint_data(path, data, rules)
    else:
        _write(path, data)
        try:
            result = lint_data(path, data, rules)
        finally:
            _write(path, original)
    return [{"code": f.code, "line": f.start.row, "cell": f.cell, "message": f.message}
            for f in result.findings if f.code.startswith("TL30")]


def _write(path: str, data: bytes) -> None:
    """Write and give the file a new modification time: the project layer re-reads a file whose
    time or size changed."""
    Path(path).write_bytes(data)
    _STAMP[0] += 1
    stamp = 1_700_000_000_000_000_000 + _STAMP[0] * 1_000_000
    os.utime(path, ns=(stamp, stamp))


def rule_codes() -> List[str]:
    from torchlint.engine import select_rules

    return sorted({rule.code for rule in select_rules(["TL3"]) if rule.code.startswith("TL30")})


def extract(directory: Path, commit: str, path: str, root: Path, repo: str) -> Path:
    """The file's directory at `commit`, extracted under `root` (the project layer reads siblings)."""
    import io
    import tarfile

    target = root / repo.replace("/", "+")
    folder = os.path.dirname(path)
    done = subprocess.run(["git", "--git-dir", str(directory), "archive", commit, "--", folder or path],
                          capture_output=True, check=False)
    if done.returncode == 0:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            members = [m for m in archive.getmembers() if m.isfile() or m.isdir()]
            archive.extractall(target, members=members)
    return target / path


# --------------------------------------------------------------------------------------------
# Confirmation on torch (child process: `--confirm-worker`)
# --------------------------------------------------------------------------------------------

TORCHVISION_STUB = r'''
import math, types, torch
import torch.nn.functional as F

class _Images(torch.utils.data.Dataset):
    """Random images of a real data set's shape and length (never downloaded)."""
    shape, classes_n, lengths = (1, 28, 28), 10, (60000, 10000)

    def __init__(self, root=None, train=True, transform=None, target_transform=None, download=False,
                 split=None, **kwargs):
        self.transform, self.target_transform = transform, target_transform
        self.length = self.lengths[0 if (train and split in (None, "train")) else 1]
        self.classes = [f"class{i}" for i in range(self.classes_n)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.targets = torch.arange(self.length) % self.classes_n
        self.root = root

    def __len__(self):
        return self.length

    def image(self, index):
        generator = torch.Generator().manual_seed(index)
        return torch.rand(self.shape, generator=generator)

    def __getitem__(self, index):
        image, target = self.image(index), int(index % self.classes_n)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

def _data_set(name, shape, classes, lengths):
    return type(name, (_Images,), {"shape": shape, "classes_n": classes, "lengths": lengths})

datasets = types.ModuleType("torchvision.datasets")
for _name, _shape, _classes, _lengths in [
        ("MNIST", (1, 28, 28), 10, (60000, 10000)), ("FashionMNIST", (1, 28, 28), 10, (60000, 10000)),
        ("KMNIST", (1, 28, 28), 10, (60000, 10000)), ("CIFAR10", (3, 32, 32), 10, (50000, 10000)),
        ("CIFAR100", (3, 32, 32), 100, (50000, 10000)), ("SVHN", (3, 32, 32), 10, (73257, 26032)),
        ("STL10", (3, 96, 96), 10, (5000, 8000))]:
    setattr(datasets, _name, _data_set(_name, _shape, _classes, _lengths))

class FakeData(_Images):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        self.shape, self.classes_n = tuple(image_size), num_classes
        super().__init__(transform=transform, target_transform=target_transform)
        self.length = size
        self.targets = torch.arange(size) % num_classes

class ImageFolder(_Images):
    """Photos of several sizes (pizza_steak_sushi: 225 train, 75 test, 3 classes)."""
    shape, classes_n = (3, 384, 512), 3

    def __init__(self, root, transform=None, target_transform=None, **kwargs):
        super().__init__(root, True, transform, target_transform)
        self.length = 75 if "test" in str(root) else 225
        self.classes = ["pizza", "steak", "sushi"][:self.classes_n]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.targets = torch.arange(self.length) % self.classes_n
        self.samples = [(f"{root}/{i}.jpg", int(t)) for i, t in enumerate(self.targets)]

    def image(self, index):
        generator = torch.Generator().manual_seed(index)
        height, width = (384, 512) if index % 2 else (512, 341)
        return torch.rand((3, height, width), generator=generator)

datasets.FakeData, datasets.ImageFolder = FakeData, ImageFolder
datasets.ImageNet = _data_set("ImageNet", (3, 375, 500), 1000, (1281167, 50000))
datasets.utils = types.ModuleType("torchvision.datasets.utils")

transforms = types.ModuleType("torchvision.transforms")

class _T:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
    def __call__(self, image):
        return image
    def __repr__(self):
        return type(self).__name__ + "()"

class Compose(_T):
    def __init__(self, transforms):
        self.transforms = list(transforms)
    def __call__(self, image):
        for transform in self.transforms:
            image = transform(image)
        return image

class ToTensor(_T):
    def __call__(self, image):
        return torch.as_tensor(image, dtype=torch.float32)

class Normalize(_T):
    """torchvision.transforms.functional.normalize on a tensor: in place on a clone."""
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = mean, std
    def __call__(self, tensor):
        if tensor.ndim < 3:
            raise ValueError("Expected tensor to be a tensor image of size (..., C, H, W). Got tensor.size() = "
                             f"{tensor.size()}")
        tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub_(mean).div_(std)

def _size(size, image):
    if isinstance(size, int):
        height, width = image.shape[-2:]
        if height <= width:
            return size, int(size * width / height)
        return int(size * height / width), size
    size = tuple(size)
    return (size[0], size[0]) if len(size) == 1 else size

class Resize(_T):
    def __init__(self, size, *args, **kwargs):
        self.size = size
    def __call__(self, image):
        return F.interpolate(image[None], size=_size(self.size, image), mode="bilinear", align_corners=False)[0]

class RandomResizedCrop(Resize):
    def __init__(self, size, *args, **kwargs):
        self.size = (size, size) if isinstance(size, int) else size

class CenterCrop(_T):
    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
    def __call__(self, image):
        height, width = image.shape[-2:]
        top, left = max(0, (height - self.size[0]) // 2), max(0, (width - self.size[1]) // 2)
        return image[..., top:top + self.size[0], left:left + self.size[1]]

class Pad(_T):
    def __init__(self, padding, fill=0, padding_mode="constant"):
        self.padding = padding
    def __call__(self, image):
        p = self.padding
        pads = [p, p, p, p] if isinstance(p, int) else ([p[0], p[0], p[1], p[1]] if len(p) == 2 else [p[0], p[2], p[1], p[3]])
        return F.pad(image, pads)

class RandomCrop(CenterCrop):
    def __init__(self, size, padding=None, *args, **kwargs):
        super().__init__(size)
        self.padding = padding
    def __call__(self, image):
        if self.padding:
            image = Pad(self.padding)(image)
        return image[..., :self.size[0], :self.size[1]]

class Grayscale(_T):
    def __init__(self, num_output_channels=1):
        self.channels = num_output_channels
    def __call__(self, image):
        return image.mean(dim=-3, keepdim=True).expand(*image.shape[:-3], self.channels, *image.shape[-2:]).clone()

class Lambda(_T):
    def __init__(self, lambd):
        self.lambd = lambd
    def __call__(self, image):
        return self.lambd(image)

for _name, _class in [("Compose", Compose), ("ToTensor", ToTensor), ("PILToTensor", ToTensor),
                      ("Normalize", Normalize), ("Resize", Resize), ("Scale", Resize),
                      ("RandomResizedCrop", RandomResizedCrop), ("CenterCrop", CenterCrop), ("Pad", Pad),
                      ("RandomCrop", RandomCrop), ("Grayscale", Grayscale), ("Lambda", Lambda)]:
    setattr(transforms, _name, _class)
for _name in ["ToPILImage", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation", "ColorJitter",
              "TrivialAugmentWide", "RandomErasing", "RandomAffine", "AutoAugment", "RandAugment"]:
    setattr(transforms, _name, type(_name, (_T,), {}))
transforms.functional = types.ModuleType("torchvision.transforms.functional")

utils = types.ModuleType("torchvision.utils")
utils.save_image = lambda *args, **kwargs: None
utils.make_grid = lambda tensor, *args, **kwargs: tensor
models = types.ModuleType("torchvision.models")
'''


class _Timeout(Exception):
    pass


def _install_stubs():
    """torchvision as tensors-only stand-ins, and a DataLoader that yields the first two batches and
    the last (partial) one, so a whole epoch costs three batches."""
    import types

    import torch
    import torch.utils.data as data

    torch.set_num_threads(1)
    torchvision = types.ModuleType("torchvision")
    exec(compile(TORCHVISION_STUB, "<torchvision stand-in>", "exec"), torchvision.__dict__)
    for name in ("datasets", "transforms", "utils", "models"):
        module = torchvision.__dict__[name]
        sys.modules[f"torchvision.{name}"] = module
    sys.modules["torchvision.transforms.functional"] = torchvision.transforms.functional
    sys.modules["torchvision.datasets.utils"] = torchvision.datasets.utils
    sys.modules["torchvision"] = torchvision
    real = data.DataLoader

    class ShortLoader(real):
        def __iter__(self):
            if isinstance(self.dataset, data.IterableDataset) or self.batch_sampler is None:
                yield from super().__iter__()
                return
            batches = list(self.batch_sampler)
            chosen = sorted({0, 1, len(batches) - 1} & set(range(len(batches))))
            for number in chosen:
                yield self.collate_fn([self.dataset[i] for i in batches[number]])

    data.DataLoader = ShortLoader
    try:
        import tqdm  # noqa: F401
    except ImportError:  # going_modular's engine: a progress bar is no part of the measurement
        tqdm = types.ModuleType("tqdm")
        tqdm.tqdm = lambda iterable=None, *args, **kwargs: iterable
        tqdm.auto = types.ModuleType("tqdm.auto")
        tqdm.auto.tqdm = tqdm.tqdm
        sys.modules["tqdm"], sys.modules["tqdm.auto"] = tqdm, tqdm.auto
    import importlib.machinery

    for name in [n for n in sys.modules if n.split(".")[0] in ("torchvision", "tqdm")]:
        if getattr(sys.modules[name], "__spec__", None) is None:
            sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)


def mixes_batch(model, x, batch_dim=0, perturbed=None):
    """Harm of a silent edit: '' when each sample's output depends on that sample and on it only,
    else what was measured (sample 0 changed and the others' outputs moved, or its own did not; or
    the output lost the batch size)."""
    import torch

    model.eval()
    with torch.no_grad():
        before = model(x)
        if perturbed is None:
            perturbed = x.clone()
            perturbed.select(batch_dim, 0).add_(torch.randn_like(perturbed.select(batch_dim, 0)))
        after = model(perturbed)
    if isinstance(before, (tuple, list)):
        before, after = before[0], after[0]
    size = x.shape[batch_dim]
    if before.shape[batch_dim] != size:
        return f"output batch {before.shape[batch_dim]} for input batch {size} (samples folded together)"
    moved = (before.narrow(batch_dim, 1, size - 1) - after.narrow(batch_dim, 1, size - 1)).abs().max().item()
    if moved > 1e-5:
        return f"changing sample 0 moves the outputs of the other samples by up to {moved:.3g}"
    own = (before.narrow(batch_dim, 0, 1) - after.narrow(batch_dim, 0, 1)).abs().max().item()
    if own <= 1e-6:
        return "changing sample 0 does not change its own output (the model no longer sees its input)"
    return ""


def _kept(node: ast.stmt, source_lines: List[str], keep: Sequence[str]) -> str:
    """'' (not run), 'yes', or 'literal': an assignment without calls, skipped where a name it
    reads was never defined (a notebook's leftover `y = weight * X + bias` of a skipped cell)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return "yes"
    segment = "\n".join(source_lines[node.lineno - 1:node.end_lineno])
    if any(snippet in segment for snippet in keep):
        return "yes"
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        if not any(isinstance(n, (ast.Call, ast.Lambda, ast.Await, ast.Attribute)) for n in ast.walk(node.value)):
            return "literal"
    return ""


def _statements(code: str) -> List[ast.stmt]:
    """The top-level statements; a notebook with a cell that does not parse gives each parsable
    run of lines (split at unindented lines after a blank one) on its own."""
    try:
        return ast.parse(code).body
    except SyntaxError:
        pass
    lines = code.splitlines()
    statements: List[ast.stmt] = []
    start = 0
    for end in range(len(lines) + 1):
        if end == len(lines) or (lines[end] == "" and end + 1 < len(lines) and not lines[end + 1][:1].isspace()):
            try:
                part = ast.parse("\n".join(lines[start:end]))
                ast.increment_lineno(part, start)
                statements.extend(part.body)
            except SyntaxError:
                pass
            start = end + 1
    return statements


def plan(code: str, keep: Sequence[str]) -> Dict[int, str]:
    """Which top-level statements a defs-mode run executes, by first line, judged on the ORIGINAL
    text so that an edit never changes what runs around it."""
    lines = code.splitlines()
    return {node.lineno: kind for node in _statements(code) if (kind := _kept(node, lines, keep))}


def _execute(code: str, filename: str, spec: dict, namespace: dict, kept_plan: Optional[Dict[int, str]] = None) -> None:
    if spec["mode"] == "script":
        exec(compile(code, filename, "exec"), namespace)
        return
    chosen = plan(code, spec["keep"]) if kept_plan is None else kept_plan
    for node in _statements(code):
        kept = chosen.get(node.lineno, "")
        if not kept:
            continue
        module = ast.Module(body=[node], type_ignores=[])
        try:
            exec(compile(module, filename, "exec"), namespace)
        except ImportError:  # matplotlib, torchinfo, helper_functions...: what the driver needs is defined here
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                raise
        except NameError:
            if kept != "literal":
                raise


def run_one(spec: dict, text: str, probe: str, limit: int = 240) -> dict:
    """Run one version of a file; what happened: error (type, message, line) / harm / warnings."""
    import contextlib
    import signal
    import traceback
    import warnings

    import torch

    filename = "/shapebench/" + spec["path"]
    code, where = runnable_code(text, spec["path"])
    namespace = {"__name__": "__main__" if spec["mode"] == "script" else "shapebench", "__file__": filename,
                 "__builtins__": __builtins__, "mixes_batch": mixes_batch}
    outcome: dict = {"error": None, "line": None, "harm": "", "warnings": []}
    sys.argv = [spec["path"]] + list(spec["argv"])

    def alarm(signum, frame):
        raise _Timeout(f"ran past {limit} s")

    if spec["syspath"]:
        sys.path.insert(0, spec["syspath"])
    modules = set(sys.modules)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(limit)
    torch.manual_seed(0)
    try:
        with warnings.catch_warnings(record=True) as caught, open(os.devnull, "w") as sink, \
                contextlib.redirect_stdout(sink):
            warnings.simplefilter("always")
            try:
                for path, prelude in spec["preludes"]:
                    _execute(_no_relative(prelude), "/shapebench/" + path, dict(spec, mode="defs"), namespace)
                reference = None
                if spec["mode"] == "defs":
                    reference = plan(runnable_code(spec["reference"], spec["path"])[0], spec["keep"])
                _execute(code, filename, spec, namespace, reference)
                for path, postlude in spec["postludes"]:
                    _execute(_no_relative(postlude), "/shapebench/" + path, dict(spec, mode="defs"), namespace)
                if spec["driver"]:
                    exec(compile(spec["driver"], "<driver>", "exec"), namespace)
                if probe:
                    exec(compile(probe, "<probe>", "exec"), namespace)
                    outcome["harm"] = namespace.get("HARM") or ""
            except BaseException as error:  # noqa: B902 - the mutant's failure is the measurement
                if isinstance(error, KeyboardInterrupt):
                    raise
                message = str(error).strip().splitlines()[0] if str(error).strip() else ""
                outcome["error"] = f"{type(error).__name__}: {message}"[:300]
                frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
                if frames:
                    cell, row = where[frames[-1].lineno - 1] if frames[-1].lineno <= len(where) else (None, 0)
                    outcome["line"] = [cell, row]
        seen = []
        for warning in caught:
            text_ = str(warning.message)
            if re.search(r"target size|broadcast", text_, re.I) and text_ not in seen:
                seen.append(text_[:300])
        outcome["warnings"] = seen
    finally:
        signal.alarm(0)
        if spec["syspath"]:
            sys.path.remove(spec["syspath"])
            for name in set(sys.modules) - modules:  # the project's own modules: fresh for the next run
                if (getattr(sys.modules[name], "__file__", None) or "").startswith(spec["syspath"]):
                    del sys.modules[name]
    return outcome


def _no_relative(source: str) -> str:
    return re.sub(r"(?m)^from \.\S* import .*$", "", source)


def confirm_worker() -> int:
    jobs = json.load(sys.stdin)
    _install_stubs()
    import torch

    results = {"torch": torch.__version__}
    with tempfile.TemporaryDirectory(prefix="shapebench-run-") as scratch:
        os.chdir(scratch)
        for job in jobs:
            results[job["id"]] = run_one(job["spec"], job["text"], job["probe"])
            print(json.dumps({"id": job["id"], **results[job["id"]]}), file=sys.stderr, flush=True)
    json.dump(results, sys.stdout)
    return 0


def confirm(jobs: List[dict], verbose: bool) -> Dict[str, dict]:
    """Run the jobs on torch in a child process (the parent never imports torch)."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--confirm-worker"],
                          input=json.dumps(jobs), capture_output=True, text=True, check=False)
    if verbose:
        sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"confirmation worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------

# Failures of the harness, not of the shapes: a seed that meets one is not counted either way.
_HARNESS_ERRORS = ("NameError", "ImportError", "ModuleNotFoundError", "SyntaxError", "IndentationError", "_Timeout")


def _judge(original: dict, mutant: dict) -> Tuple[bool, str]:
    """Whether the mutant is a confirmed bug, and the observation."""
    if mutant["error"]:
        if mutant["error"].startswith(_HARNESS_ERRORS):
            return False, "harness problem, not counted: " + mutant["error"]
        return True, mutant["error"]
    new = [w for w in mutant["warnings"] if w not in original["warnings"]]
    if new:
        return True, "UserWarning: " + new[0]
    if mutant["harm"]:
        return True, "silent: " + mutant["harm"]
    return False, "runs clean: not a bug"


def _near(finding: dict, where: Optional[Sequence], slack: int = 2) -> bool:
    if not where:
        return False
    cell, line = where
    return finding.get("cell") == cell and abs(finding["line"] - line) <= slack


def run(mirror: Path, do_confirm: bool, verbose: bool = False, only: Sequence[str] = ()) -> dict:
    result: dict = {"rules": rule_codes(), "skipped_repos": [], "broken_seeds": [], "originals": {},
                    "seeds": []}
    seeds = [s for s in SEEDS if not only or s.file in only or s.kind in only]
    by_file: Dict[str, List[Tuple[int, Seed]]] = {}
    for index, seed in enumerate(seeds):
        by_file.setdefault(seed.file, []).append((index, seed))
    texts: Dict[str, str] = {}
    preludes: Dict[str, List[Tuple[str, str]]] = {}
    postludes: Dict[str, List[Tuple[str, str]]] = {}
    edits: Dict[int, Tuple[str, Tuple[Optional[int], int]]] = {}
    missing = set()
    for key in by_file:
        spec = FILES[key]
        directory = git_dir(mirror, spec.repo)
        if directory is None:
            missing.add(spec.repo)
            continue
        texts[key] = normalised(read_blob(directory, spec.commit, spec.path), spec.path)
        preludes[key] = [(p, read_blob(directory, spec.commit, p)) for p in spec.prelude]
        postludes[key] = [(p, read_blob(directory, spec.commit, p)) for p in spec.postlude]
        for index, seed in by_file[key]:
            try:
                edits[index] = apply_edit(texts[key], spec.path, seed.old, seed.new, seed.nth)
            except EditError as error:
                result["broken_seeds"].append({"file": key, "kind": seed.kind, "old": seed.old, "why": str(error)})
    result["skipped_repos"] = sorted(missing)
    for repo in sorted(missing):
        print(f"skipped: {repo} is not under {mirror} (fetch it; its seeds are not counted)", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="shapebench-") as root:
        paths = {}
        for key in texts:
            spec = FILES[key]
            paths[key] = str(extract(git_dir(mirror, spec.repo), spec.commit, spec.path, Path(root), spec.repo))
        runs: Dict[str, dict] = {}
        if do_confirm:
            jobs = []
            for key, text in texts.items():
                spec = FILES[key]
                payload = {"path": spec.path, "mode": spec.mode, "argv": list(spec.argv), "keep": list(spec.keep),
                           "driver": spec.driver, "preludes": preludes[key], "postludes": postludes[key],
                           "syspath": os.path.dirname(paths[key]) if spec.syspath else "",
                           "reference": shrunk(text, spec.path, spec.shrink)}
                probes = {seed.probe or spec.probe for _, seed in by_file[key]}
                for probe in sorted(probes):
                    jobs.append({"id": f"{key}|original|{probe}", "spec": payload,
                                 "text": shrunk(text, spec.path, spec.shrink), "probe": probe})
                for index, seed in by_file[key]:
                    if index in edits:
                        jobs.append({"id": f"{key}|{index}", "spec": payload, "probe": seed.probe or spec.probe,
                                     "text": shrunk(edits[index][0], spec.path, spec.shrink)})
            runs = confirm(jobs, verbose)
            result["torch"] = runs.pop("torch")
        for key, text in texts.items():
            spec = FILES[key]
            path = paths[key]
            before = shape_findings(path, text)
            original = {"findings": before}
            if do_confirm:
                for probe_id, outcome in runs.items():
                    if probe_id.startswith(f"{key}|original|"):
                        bad = outcome["error"] or outcome["harm"] or outcome["warnings"]
                        original.setdefault("runs_clean", True)
                        if bad:
                            original["runs_clean"] = False
                            original["problem"] = outcome["error"] or outcome["harm"] or outcome["warnings"][0]
            result["originals"][key] = {"repo": spec.repo, "commit": spec.commit, "path": spec.path, **original}
            seen = {(f["code"], f["cell"], f["line"], f["message"]) for f in before}
            for index, seed in by_file[key]:
                if index not in edits:
                    continue
                edited, where = edits[index]
                row = {"file": key, "repo": spec.repo, "path": spec.path, "kind": seed.kind, "old": seed.old.strip(),
                       "new": seed.new.strip(), "cell": where[0], "line": where[1], "note": seed.note}
                if do_confirm:
                    outcome = runs[f"{key}|{index}"]
                    original_run = runs[f"{key}|original|{seed.probe or spec.probe}"]
                    if original.get("runs_clean") is False:
                        row.update(confirmed=False, observed="original does not run clean: " + str(original["problem"]))
                    else:
                        confirmed, observed = _judge(original_run, outcome)
                        row.update(confirmed=confirmed, observed=observed, crash=outcome["line"])
                after = shape_findings(path, edited)
                new = [f for f in after if (f["code"], f["cell"], f["line"], f["message"]) not in seen]
                row["findings"] = new
                row["found"] = bool(new)
                row["found_near"] = any(_near(f, [where[0], where[1]]) or _near(f, row.get("crash")) for f in new)
                result["seeds"].append(row)
    return result


def table(result: dict, confirmed_only: bool) -> str:
    out = [f"TL30x rules present: {', '.join(result['rules']) or 'none'}"
           + (f"; confirmed on torch {result['torch']}" if result.get("torch") else ""), "",
           "| kind | seeded | confirmed | found | found near | recall |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    totals = [0, 0, 0, 0]
    for kind in KINDS:
        rows = [r for r in result["seeds"] if r["kind"] == kind]
        if not rows:
            continue
        counted = [r for r in rows if r.get("confirmed", True)]
        found = sum(r["found"] for r in counted)
        near = sum(r["found_near"] for r in counted)
        confirmed = len(counted) if confirmed_only else "-"
        recall = f"{found / len(counted):.0%}" if counted else "-"
        out.append(f"| {kind} | {len(rows)} | {confirmed} | {found} | {near} | {recall} |")
        totals = [totals[0] + len(rows), totals[1] + len(counted), totals[2] + found, totals[3] + near]
    recall = f"{totals[2] / totals[1]:.0%}" if totals[1] else "-"
    out.append(f"| all | {totals[0]} | {totals[1] if confirmed_only else '-'} | {totals[2]} | {totals[3]} | {recall} |")
    if not confirmed_only:
        out.append("\n(not confirmed on torch: run with --confirm; recall here is over every seed)")
    dropped = [r for r in result["seeds"] if r.get("confirmed") is False]
    if dropped:
        out.append("\nDropped (the mutant is not a bug on torch, its original does not run, or the harness failed):")
        out.extend(f"  {r['file']} [{r['kind']}] {r['old']!r} -> {r['new']!r}: {r['observed']}"
                   + (f" -- yet reported: {', '.join(f['code'] for f in r['findings'])}" if r["found"] else "")
                   for r in dropped)
        flagged = sum(r["found"] for r in dropped if r["observed"].startswith("runs clean"))
        out.append(f"TL30x findings on the {sum(r['observed'].startswith('runs clean') for r in dropped)} "
                   f"mutants that run clean (false positives): {flagged}")
    findings = [(k, f) for k, o in result["originals"].items() for f in o["findings"]]
    out.append(f"\nTL30x findings on the {len(result['originals'])} unmodified originals: {len(findings)}")
    out.extend(f"  {k}:{f['cell'] + ':' if f['cell'] else ''}{f['line']}: {f['code']} {f['message']}"
               for k, f in findings)
    unclean = [k for k, o in result["originals"].items() if o.get("runs_clean") is False]
    if unclean:
        out.append("Originals that do not run clean: " + ", ".join(
            f"{k} ({result['originals'][k]['problem']})" for k in unclean))
    if result["broken_seeds"]:
        out.append("\nSeeds that do not apply: " + "; ".join(f"{b['file']}: {b['why']}" for b in result["broken_seeds"]))
    if result["skipped_repos"]:
        out.append("Repositories absent (their seeds skipped): " + ", ".join(result["skipped_repos"]))
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"),
                        help="folder holding the snapshots as owner+name/repo bare git dirs")
    parser.add_argument("--confirm", action="store_true", help="run originals and mutants on torch first")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.add_argument("--list", action="store_true", help="every seed with its observation and findings")
    parser.add_argument("--only", action="append", default=[], help="a file key or a kind (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="show the worker's per-run lines")
    parser.add_argument("--confirm-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.confirm_worker:
        return confirm_worker()
    result = run(args.mirror, args.confirm, args.verbose, args.only)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    if args.list:
        for r in result["seeds"]:
            where = f"{r['cell']}:{r['line']}" if r["cell"] else str(r["line"])
            status = "" if "confirmed" not in r else ("confirmed " if r["confirmed"] else "DROPPED ") + r["observed"]
            if r.get("crash") and r.get("confirmed"):
                status += f" (raised at {str(r['crash'][0]) + ':' if r['crash'][0] else ''}{r['crash'][1]})"
            print(f"{r['path']}:{where} [{r['kind']}] {r['old']!r} -> {r['new']!r}: {status}"
                  f" | {'found ' + ','.join(f['code'] for f in r['findings']) if r['found'] else 'missed'}")
        print()
    print(table(result, args.confirm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
