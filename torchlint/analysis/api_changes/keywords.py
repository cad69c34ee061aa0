"""API changes: see `torchlint.analysis.api_changes` for the schema."""

from __future__ import annotations

from typing import Dict, FrozenSet, List

from torchlint.analysis.api_changes import DEFAULT, KEYWORD, RAISES, WARNS, ApiChange, Check

CHANGES: List[ApiChange] = []

# -- torch.utils.checkpoint: `use_reentrant` must be passed (TL213) ------------------------------
# torch 2.13 torch/utils/checkpoint.py: `use_reentrant=None` warns on every call and then runs the
# reentrant variant (`use_reentrant = True`); the warning announces an exception "starting in
# PyTorch 2.9" that 2.13 still does not raise (measured).
_REENTRANT_WARNING = "the use_reentrant parameter should be passed explicitly"
CHANGES += [
    ApiChange(
        api="torch.utils.checkpoint.checkpoint",
        kind=DEFAULT,
        keyword="use_reentrant",
        outcome=WARNS,
        deprecated_in=None,  # the release that added the warning was not checked
        changed_in=None,
        error="UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed "
              "explicitly. Starting in PyTorch 2.9, calling checkpoint without use_reentrant will "
              "raise an exception. (torch 2.13 still warns, and runs use_reentrant=True)",
        replacement="pass use_reentrant=False (recommended) or use_reentrant=True (today's default)",
        check=Check(
            snippet="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
                    "x = torch.randn(2, requires_grad=True)\ncheckpoint(torch.sin, x)\n",
            match=_REENTRANT_WARNING,
            replacement_snippet="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
                                "x = torch.randn(2, requires_grad=True)\n"
                                "checkpoint(torch.sin, x, use_reentrant=False)\n",
        ),
        exact_fix=False,
        notes="The implicit default is the reentrant variant: when no input of the checkpointed "
              "function requires grad (the first block of a network fed plain data), its output "
              "has no grad_fn and the block's parameters get no gradient (warning `None of the "
              "inputs have requires_grad=True. Gradients will be None`). use_reentrant=False "
              "has no such limit but differs in hooks and in how nested backward calls behave.",
    ),
    ApiChange(
        api="torch.utils.checkpoint.checkpoint_sequential",
        kind=DEFAULT,
        keyword="use_reentrant",
        outcome=WARNS,
        deprecated_in=None,  # the release that added the warning was not checked
        changed_in=None,
        error="UserWarning: torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
              "parameter should be passed explicitly. In version 2.9 we will raise an exception if "
              "use_reentrant is not passed. (torch 2.13 still warns, and runs use_reentrant=True)",
        replacement="pass use_reentrant=False (recommended) or use_reentrant=True (today's default)",
        check=Check(
            snippet="import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
                    "m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))\n"
                    "checkpoint_sequential(m, 2, torch.randn(1, 2, requires_grad=True))\n",
            match=_REENTRANT_WARNING,
            replacement_snippet="import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
                                "m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))\n"
                                "checkpoint_sequential(m, 2, torch.randn(1, 2, requires_grad=True), "
                                "use_reentrant=False)\n",
        ),
        exact_fix=False,
        notes="As for checkpoint.",
    ),
]

# -- torch.optim.lr_scheduler: `verbose=` (TL216) ---------------------------------------------------
# Deprecated by pytorch/pytorch#111302 (merged October 2023, released in 2.2: the constructors warned
# "The verbose parameter is deprecated. Please use get_last_lr() to access the learning rate." and
# printed nothing any more); removed with `print_lr` by pytorch/pytorch#147301, whose BC-breaking
# note shows `ReduceLROnPlateau(optim, verbose=True)` working "In 2.6.0" and gone "In 2.7.0". Both
# read in those PR threads (not in the release tarballs); the outcome on the installed torch is
# measured by the check. Every scheduler took it through the `LRScheduler` base class.
LR_SCHEDULERS = "torch.optim.lr_scheduler"
CHANGES += [
    ApiChange(
        api="torch.optim.lr_scheduler.*(verbose=)",
        kind=KEYWORD,
        keyword="verbose",
        outcome=RAISES,
        deprecated_in="2.2",
        changed_in="2.7",
        error="TypeError: ReduceLROnPlateau.__init__() got an unexpected keyword argument 'verbose'",
        replacement="remove `verbose=`; log `scheduler.get_last_lr()` instead",
        check=Check(
            snippet="import torch\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
                    "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, 'min', patience=3, verbose=True)\n",
            match="unexpected keyword argument 'verbose'",
            replacement_snippet="import torch\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
                                "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, 'min', patience=3)\n"
                                "print(sched.get_last_lr())\n",
            line=3,
        ),
        exact_fix=False,
        notes="From 2.2 to 2.6 `verbose=True` only warned and printed nothing, so removing `verbose=False` "
              "(or `verbose=True` on 2.2+) changes nothing; on older releases `verbose=True` printed each "
              "learning-rate change, which `print(scheduler.get_last_lr())` after `step()` replaces.",
    ),
]

# -- torch.utils.data.TensorDataset: `data_tensor=` / `target_tensor=` (TL216) -----------------------
# PyTorch 0.3's `TensorDataset(data_tensor, target_tensor)` became `TensorDataset(*tensors)` in 0.4
# (pytorch/pytorch#6038, merged March 2018; "this was changed in 0.4", a maintainer in
# pytorch/pytorch#8275): no deprecation period. Read in those threads; the outcome on the installed
# torch is measured by the checks.
_TENSOR_DATASET = "import torch\nfrom torch.utils.data import TensorDataset\nx, y = torch.randn(4, 2), torch.arange(4)\n"
CHANGES += [
    ApiChange(
        api=f"torch.utils.data.TensorDataset({keyword}=)",
        kind=KEYWORD,
        keyword=keyword,
        outcome=RAISES,
        deprecated_in=None,
        changed_in="0.4",
        error=f"TypeError: TensorDataset.__init__() got an unexpected keyword argument '{keyword}'",
        replacement="pass the tensors positionally: `TensorDataset(x, y)` (it takes any number of tensors)",
        check=Check(
            snippet=_TENSOR_DATASET + "dataset = TensorDataset(data_tensor=x, target_tensor=y)\n",
            match="unexpected keyword argument 'data_tensor'",
            replacement_snippet=_TENSOR_DATASET + "dataset = TensorDataset(x, y)\n",
        ),
        exact_fix=True,
        notes="The dataset's items are the same tuples; `dataset.data_tensor` / `.target_tensor` are "
              "`dataset.tensors[0]` / `[1]` since 0.4.",
    )
    for keyword in ("data_tensor", "target_tensor")
]

# -- torchvision model builders: `pretrained=` / `pretrained_backbone=` (TL215) ------------------
# Read in torchvision 0.29.1's released sources (the wheel's torchvision/models/_utils.py,
# `handle_legacy_interface`): the builders decorated with it accept the old keywords, warn
# "The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, please
# use 'weights' instead." and then "Arguments other than a weight enum or `None` for 'weights' are
# deprecated since 0.13 ... The current behavior is equivalent to passing `weights=<X>`", and load
# the builder's legacy weights (`pretrained=True` means the weights named in the decorator, e.g.
# ResNet50_Weights.IMAGENET1K_V1, which is not ResNet50_Weights.DEFAULT = IMAGENET1K_V2);
# `pretrained=False` is exactly `weights=None`. A positional first argument (`resnet50(True)`) is
# taken as `weights` by `kwonly_to_pos_or_kw` and handled the same way, with the second warning.
_VISION_SOURCE = "torchvision 0.29.1 torchvision/models/_utils.py (handle_legacy_interface) and the builders' decorators"
CHANGES += [
    ApiChange(
        api="torchvision.models.*(pretrained=)",
        kind=KEYWORD,
        keyword="pretrained",
        outcome=WARNS,
        deprecated_in="torchvision 0.13",
        changed_in=None,
        error="UserWarning: The parameter 'pretrained' is deprecated since 0.13 and may be removed "
              "in the future, please use 'weights' instead.",
        replacement="weights=<Model>_Weights.<name> (pretrained=True), weights=None (pretrained=False)",
        check=Check(
            snippet="import torchvision\ntorchvision.models.resnet18(pretrained=False)\n",
            match="The parameter 'pretrained' is deprecated",
            replacement_snippet="import torchvision\ntorchvision.models.resnet18(weights=None)\n",
            checked="source",
            source=_VISION_SOURCE,
        ),
        exact_fix=False,
        notes="pretrained=True loads the builder's legacy weights, which are not always the "
              "enum's DEFAULT (ResNet-50: IMAGENET1K_V1 against DEFAULT = IMAGENET1K_V2); "
              "pretrained=False is exactly weights=None.",
    ),
    ApiChange(
        api="torchvision.models.*(pretrained_backbone=)",
        kind=KEYWORD,
        keyword="pretrained_backbone",
        outcome=WARNS,
        deprecated_in="torchvision 0.13",
        changed_in=None,
        error="UserWarning: The parameter 'pretrained_backbone' is deprecated since 0.13 and may be "
              "removed in the future, please use 'weights_backbone' instead.",
        replacement="weights_backbone=<Backbone>_Weights.<name>, or weights_backbone=None",
        check=Check(
            snippet="import torchvision\n"
                    "torchvision.models.detection.fasterrcnn_resnet50_fpn(pretrained_backbone=False)\n",
            match="The parameter 'pretrained_backbone' is deprecated",
            replacement_snippet="import torchvision\n"
                                "torchvision.models.detection.fasterrcnn_resnet50_fpn(weights_backbone=None)\n",
            checked="source",
            source=_VISION_SOURCE,
        ),
        exact_fix=False,
        notes="pretrained_backbone=False is exactly weights_backbone=None.",
    ),
]

# The keyword each old one became.
VISION_LEGACY_KEYWORDS: Dict[str, str] = {"pretrained": "weights", "pretrained_backbone": "weights_backbone"}

# The builders decorated with `handle_legacy_interface` in torchvision 0.29.1, by package (a
# builder is reached as `torchvision.models[.<package>][.<its module>].<name>`), and the keywords
# each accepts. Read from the wheel's sources (_VISION_SOURCE).
_BACKBONE = frozenset({"pretrained", "pretrained_backbone"})
_PRETRAINED = frozenset({"pretrained"})
VISION_LEGACY_BUILDERS: Dict[str, Dict[str, FrozenSet[str]]] = {
    "": dict.fromkeys("""
        alexnet convnext_base convnext_large convnext_small convnext_tiny densenet121 densenet161
        densenet169 densenet201 efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3
        efficientnet_b4 efficientnet_b5 efficientnet_b6 efficientnet_b7 efficientnet_v2_l
        efficientnet_v2_m efficientnet_v2_s googlenet inception_v3 maxvit_t mnasnet0_5 mnasnet0_75
        mnasnet1_0 mnasnet1_3 mobilenet_v2 mobilenet_v3_large mobilenet_v3_small regnet_x_16gf
        regnet_x_1_6gf regnet_x_32gf regnet_x_3_2gf regnet_x_400mf regnet_x_800mf regnet_x_8gf
        regnet_y_128gf regnet_y_16gf regnet_y_1_6gf regnet_y_32gf regnet_y_3_2gf regnet_y_400mf
        regnet_y_800mf regnet_y_8gf resnet101 resnet152 resnet18 resnet34 resnet50 resnext101_32x8d
        resnext101_64x4d resnext50_32x4d shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5
        shufflenet_v2_x2_0 squeezenet1_0 squeezenet1_1 swin_b swin_s swin_t swin_v2_b swin_v2_s
        swin_v2_t vgg11 vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn vit_b_16 vit_b_32
        vit_h_14 vit_l_16 vit_l_32 wide_resnet101_2 wide_resnet50_2
    """.split(), _PRETRAINED),
    "detection": {
        **dict.fromkeys("""
            fasterrcnn_mobilenet_v3_large_320_fpn fasterrcnn_mobilenet_v3_large_fpn
            fasterrcnn_resnet50_fpn fasterrcnn_resnet50_fpn_v2 fcos_resnet50_fpn
            keypointrcnn_resnet50_fpn maskrcnn_resnet50_fpn maskrcnn_resnet50_fpn_v2
            retinanet_resnet50_fpn retinanet_resnet50_fpn_v2 ssd300_vgg16 ssdlite320_mobilenet_v3_large
        """.split(), _BACKBONE),
        # backbone_utils: the first parameter is `backbone_name`, so no positional `weights`
        "mobilenet_backbone": _PRETRAINED, "resnet_fpn_backbone": _PRETRAINED,
    },
    "segmentation": dict.fromkeys("""
        deeplabv3_mobilenet_v3_large deeplabv3_resnet101 deeplabv3_resnet50 fcn_resnet101
        fcn_resnet50 lraspp_mobilenet_v3_large
    """.split(), _BACKBONE),
    "video": dict.fromkeys("mc3_18 mvit_v1_b mvit_v2_s r2plus1d_18 r3d_18 s3d swin3d_b swin3d_s swin3d_t".split(),
                           _PRETRAINED),
    "optical_flow": dict.fromkeys(["raft_large", "raft_small"], _PRETRAINED),
    "quantization": dict.fromkeys("""
        googlenet inception_v3 mobilenet_v2 mobilenet_v3_large resnet18 resnet50 resnext101_32x8d
        resnext101_64x4d shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5 shufflenet_v2_x2_0
    """.split(), _PRETRAINED),
}
# Builders whose first parameter is not `weights` (a positional first argument is something else).
VISION_NO_POSITIONAL_WEIGHTS: FrozenSet[str] = frozenset({"mobilenet_backbone", "resnet_fpn_backbone"})
# Builders of the top-level package whose decorator names no legacy weights (`("pretrained",
# None)`): `pretrained=True` raises `ValueError: No weights available for model <name>`.
VISION_NO_LEGACY_WEIGHTS: FrozenSet[str] = frozenset({"vit_h_14", "regnet_y_128gf"})
