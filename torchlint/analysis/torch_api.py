"""What the value model knows of torch's API: how each function, tensor method and module class
treats its inputs' facets (kind, autograd, layout, device, shape).

Names were taken from torch 2.13 (`dir(torch)`, `dir(torch.Tensor)`, `torch.nn.modules`); the
layout behaviour of each group was measured on torch 2.13 CPU (tests/test_value_model.py quotes
the measurements). Nothing here imports torch.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

# -- tensor factories ----------------------------------------------------------------------------
# `torch.<name>(...)`: a fresh contiguous tensor, no graph unless `requires_grad=True`.
FACTORIES = frozenset("""
tensor as_tensor asarray zeros ones empty full rand randn randint arange range linspace logspace eye
from_numpy randperm normal bernoulli multinomial poisson tril_indices triu_indices empty_strided
frombuffer scalar_tensor complex polar Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor
LongTensor IntTensor ShortTensor ByteTensor CharTensor BoolTensor
""".split())
# `torch.<name>_like(x)` keeps `x`'s device and layout (memory_format=torch.preserve_format).
LIKE_FACTORIES = frozenset("zeros_like ones_like empty_like full_like rand_like randn_like randint_like".split())
# `x.new_<name>(...)`: a fresh contiguous tensor on `x`'s device.
NEW_FACTORIES = frozenset("new_zeros new_ones new_empty new_full new_tensor".split())
# `torch.cuda.<Type>Tensor(...)`: hard-coded CUDA tensors.
CUDA_TENSOR_TYPES = frozenset("FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor "
                              "ShortTensor ByteTensor CharTensor BoolTensor".split())

# -- element-wise operations ---------------------------------------------------------------------
# The result has the layout of its first tensor operand (TensorIterator orders the output's
# dimensions by the first operand whose strides decide): `p + c` and `p * 2` keep a permuted `p`'s
# strides, `c + p` is contiguous (measured). They carry a graph when an operand requires grad.
ELEMENTWISE = frozenset("""
abs absolute acos acosh add addcdiv addcmul angle arccos arccosh arcsin arcsinh arctan arctan2 arctanh
asin asinh atan atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp clamp_max
clamp_min clip conj copysign cos cosh deg2rad digamma div divide erf erfc erfinv exp exp2 expm1 fix
float_power floor floor_divide fmax fmin fmod frac hypot i0 lerp lgamma log log10 log1p log2
logaddexp logaddexp2 logit maximum minimum mul multiply nan_to_num neg negative nextafter positive
pow rad2deg reciprocal relu remainder round rsqrt sigmoid sign sgn sin sinc sinh sqrt square sub
subtract tan tanh true_divide trunc where xlogy heaviside
""".split())
# Element-wise functions of torch.nn.functional (same layout rule).
FUNCTIONAL_ELEMENTWISE = frozenset("""
relu relu6 elu selu celu gelu silu mish leaky_relu hardswish hardsigmoid hardtanh sigmoid tanh
softplus softsign tanhshrink threshold logsigmoid dropout dropout1d dropout2d dropout3d alpha_dropout
normalize rrelu hardshrink softshrink
""".split())
# Comparisons: element-wise (layout kept: `pred.t().eq(target)` stays transposed) and no graph.
COMPARISONS = frozenset("""
eq ne lt le gt ge greater greater_equal less less_equal not_equal isnan isinf isfinite isposinf
isneginf isclose logical_and logical_or logical_not logical_xor signbit
""".split())
# Methods that convert a tensor's dtype: layout and graph kept.
DTYPE_CASTS = frozenset("float double half bfloat16 long int short bool byte char cfloat cdouble".split())

# -- results laid out in order -------------------------------------------------------------------
# A new contiguous tensor: matrix products, concatenation, normalisations that allocate, reductions
# with `dim` (measured: `p.sum(1)`, `p.softmax(-1)`, `F.layer_norm(p, ...)`, `p.masked_fill(...)`
# are contiguous for a permuted `p`).
MATMUL = frozenset("matmul mm bmm einsum outer dot inner kron tensordot addmm addbmm baddbmm addmv mv "
                   "chain_matmul linalg_matmul".split())
FUNCTIONAL_NEW = frozenset("""
linear bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d layer_norm
group_norm instance_norm batch_norm embedding embedding_bag softmax log_softmax softmin pad
interpolate upsample upsample_nearest upsample_bilinear grid_sample affine_grid max_pool1d max_pool2d
max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d
adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d scaled_dot_product_attention one_hot glu
pixel_shuffle pixel_unshuffle unfold fold cosine_similarity pairwise_distance gumbel_softmax
""".split())
# torch.nn.functional ops that keep a channels-last (or otherwise permuted) input's memory format.
FUNCTIONAL_LAYOUT_KEEPING = frozenset("""
interpolate upsample upsample_nearest upsample_bilinear conv1d conv2d conv3d batch_norm max_pool2d
avg_pool2d adaptive_avg_pool2d pad
""".split())
CONCATENATIONS = frozenset("cat concat concatenate stack hstack vstack dstack column_stack".split())
REDUCTIONS = frozenset("""
sum mean prod max min amax amin norm std var logsumexp median nanmean nansum nanmedian mode all any
count_nonzero argmax argmin std_mean var_mean aminmax
""".split())
# Reductions whose result has no graph (indices, booleans, counts).
NON_DIFFERENTIABLE_REDUCTIONS = frozenset("argmax argmin all any count_nonzero".split())
# Methods returning (values, indices) pairs.
VALUES_INDICES = frozenset("topk sort kthvalue cummax cummin".split())
NON_DIFFERENTIABLE = frozenset("""
argsort argwhere nonzero bucketize searchsorted unique unique_consecutive histc bincount sign
floor_divide isin
""".split())

# -- views and shape changes ---------------------------------------------------------------------
TRANSPOSING = frozenset("transpose permute t swapaxes swapdims movedim moveaxis adjoint".split())
TRANSPOSING_ATTRIBUTES = frozenset({"T", "mT", "mH", "H"})
# Results laid out in order again.
RESHAPING = frozenset("reshape reshape_as flatten ravel contiguous".split())
# Views whose strides we do not follow (a permuted input gives an unknown layout).
OTHER_VIEWS = frozenset("squeeze unsqueeze expand expand_as narrow select unflatten diagonal unfold "
                        "as_strided view_as_real view_as_complex".split())
SPLITTING = frozenset("chunk split unbind tensor_split hsplit vsplit dsplit split_with_sizes".split())
# Methods returning the receiver itself, written in place.
SELF_RETURNING = frozenset("requires_grad_ retain_grad share_memory_ pin_memory".split())

# -- detaching -----------------------------------------------------------------------------------
DETACHING_METHODS = frozenset("detach detach_".split())
TO_PYTHON = frozenset("item tolist".split())
TO_NUMPY = frozenset({"numpy"})

# -- activations and losses ----------------------------------------------------------------------
SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SIGMOID_FUNCTIONS = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})
ACTIVATION_MODULES = {
    "torch.nn.Softmax": "softmax", "torch.nn.modules.activation.Softmax": "softmax",
    "torch.nn.Sigmoid": "sigmoid", "torch.nn.modules.activation.Sigmoid": "sigmoid",
}
# torch.nn.functional losses: a loss tensor carrying the graph of their inputs.
FUNCTIONAL_LOSSES = frozenset("""
cross_entropy mse_loss nll_loss l1_loss binary_cross_entropy binary_cross_entropy_with_logits
smooth_l1_loss huber_loss kl_div ctc_loss cosine_embedding_loss margin_ranking_loss
hinge_embedding_loss soft_margin_loss multilabel_soft_margin_loss multilabel_margin_loss
multi_margin_loss triplet_margin_loss triplet_margin_with_distance_loss poisson_nll_loss
gaussian_nll_loss
""".split())
CROSS_ENTROPY_CLASSES = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss"})
NLL_CLASSES = frozenset({"torch.nn.NLLLoss", "torch.nn.modules.loss.NLLLoss"})
BCE_CLASSES = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss"})

# -- modules -------------------------------------------------------------------------------------
# Modules without parameters, buffers or train/eval behaviour: nothing of theirs needs moving.
STATELESS_MODULES = frozenset("""
ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh Softmax LogSoftmax Softplus LeakyReLU ELU SELU CELU Hardswish
Hardsigmoid Hardtanh Identity Flatten Unflatten Softsign Tanhshrink Threshold GLU LogSigmoid Softmin
MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d
AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d Upsample PixelShuffle
PixelUnshuffle ZeroPad2d ConstantPad2d ReflectionPad2d ReplicationPad2d
""".split())
# Stateless modules whose output does depend on train/eval mode.
DROPOUT_MODULES = frozenset("Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout".split())
STOCHASTIC_LAYERS = re.compile(
    r"^torch\.nn\.(Dropout\d?d?|AlphaDropout|FeatureAlphaDropout|BatchNorm[123]d|SyncBatchNorm|"
    r"LazyBatchNorm[123]d|InstanceNorm[123]d)$"
)
# torchvision classifiers built with BatchNorm or Dropout layers.
TORCHVISION_STOCHASTIC = re.compile(
    r"^torchvision\.models\.(resnet\d+|resnext\w+|wide_resnet\w+|densenet\d+|mobilenet_v\w+|"
    r"efficientnet\w*|alexnet|vgg\d+(_bn)?|googlenet|inception_v3|shufflenet\w+|mnasnet\w+|"
    r"regnet\w+|squeezenet\w+)$"
)
# Parts of torchvision classifiers that hold such layers, for a network run part by part
# (`model.features(x)`, then `model.classifier(h)`): read from torchvision 0.29's sources
# (alexnet.py, vgg.py, squeezenet.py, resnet.py, densenet.py, mobilenetv2/3.py, efficientnet.py).
# Each part: (the layer, the constructor keyword that could take it out: `dropout=0.0`, another
# `norm_layer=`). Other parts (`alexnet().features`, `resnet18().fc`) hold neither.
TORCHVISION_STOCHASTIC_PARTS = (
    (re.compile(r"^torchvision\.models\.(alexnet|vgg\d+(_bn)?|squeezenet1_[01])$"),
     {"classifier": ("Dropout", "dropout")}),
    (re.compile(r"^torchvision\.models\.vgg\d+_bn$"), {"features": ("BatchNorm", "norm_layer")}),
    (re.compile(r"^torchvision\.models\.(resnet\d+|resnext\w+|wide_resnet\w+)$"),
     {part: ("BatchNorm", "norm_layer") for part in ("bn1", "layer1", "layer2", "layer3", "layer4")}),
    (re.compile(r"^torchvision\.models\.densenet\d+$"), {"features": ("BatchNorm", "norm_layer")}),
    (re.compile(r"^torchvision\.models\.(mobilenet_v2|mobilenet_v3_(large|small)|efficientnet_\w+)$"),
     {"features": ("BatchNorm", "norm_layer"), "classifier": ("Dropout", "dropout")}),
)


def torchvision_stochastic_part(qualified: str, part: str) -> Optional[Tuple[str, str]]:
    """(layer, keyword) when `part` of the torchvision classifier `qualified` holds Dropout or
    BatchNorm."""
    for pattern, parts in TORCHVISION_STOCHASTIC_PARTS:
        if part in parts and pattern.match(qualified):
            return parts[part]
    return None


MODULE_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
PARAMETER_CONTAINERS = frozenset({"torch.nn.ParameterList", "torch.nn.ParameterDict"})
# Modules whose output is a tuple: (output, hidden state) and friends.
RECURRENT = {"RNN": 2, "GRU": 2, "LSTM": 2, "LSTMCell": 2, "MultiheadAttention": 2}
# Modules that keep their input's memory format (convolutions and friends keep channels-last).
LAYOUT_KEEPING_MODULES = frozenset("""
Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm1d BatchNorm2d BatchNorm3d
ReLU ReLU6 GELU SiLU LeakyReLU ELU Hardswish Sigmoid Tanh Dropout Dropout2d Identity MaxPool2d AvgPool2d
AdaptiveAvgPool2d Upsample
""".split())
# Classes of torch.nn that are not modules.
NN_NON_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})
MODULE_BASES = frozenset({
    "torch.nn.Module", "lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule", "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
})
OPTIMIZER_BASES = frozenset({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"})
AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# nn.Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset("""
to cuda cpu eval train half float double bfloat16 requires_grad_ to_empty xpu mps type share_memory
apply zero_grad
""".split())
MODULE_DEVICE_METHODS = frozenset({"cuda", "cpu", "xpu", "mps"})
MODULE_DTYPE_METHODS = frozenset({"half", "float", "double", "bfloat16"})
# Other nn.Module constructors that return a module: pretrained model zoos.
MODEL_ZOO = frozenset({"timm.create_model", "torch.hub.load", "torch.jit.load", "torch.load"})

# -- optimizers, schedulers, data ----------------------------------------------------------------
GRAD_SCALERS = frozenset({
    "torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.GradScaler",
    "torch.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
})
LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

# -- grad mode -----------------------------------------------------------------------------------
GRAD_DISABLING = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
})
GRAD_ENABLING = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})

# -- dtypes and devices --------------------------------------------------------------------------
DTYPE_NAMES = frozenset("""
float float16 float32 float64 half double bfloat16 int8 uint8 int16 int32 int64 long int short bool
complex64 complex128 cfloat cdouble float8_e4m3fn float8_e5m2 uint16 uint32 uint64
""".split())
_DTYPE_PREFIX = ("float", "int", "uint", "bool", "complex", "bfloat", "qint", "quint", "bits")


def is_dtype_name(member: str) -> bool:
    """`float16`, `bfloat16`, `float4_e2m1fn_x2`, `quint8`: a dtype of torch (also ones newer than
    the table)."""
    return member in DTYPE_NAMES or member.startswith(_DTYPE_PREFIX)


HALF_DTYPES = frozenset({"float16", "half", "bfloat16"})
DEVICE_STRING = re.compile(r"^(cpu|cuda|mps|xpu|meta|hpu|npu|xla|privateuseone)(:\d+)?$")
DEVICE_NAME = re.compile(r"(^|_)(device|dev)s?($|_)|^(cuda|gpu)(_?\w*)?$", re.IGNORECASE)
# Tensor methods that show a value is a tensor when called on it.
TENSOR_EVIDENCE = frozenset("""
shape dtype device ndim size dim view reshape transpose permute unsqueeze squeeze contiguous
float half bfloat16 softmax sigmoid masked_fill matmul flatten numel requires_grad
""".split())
TENSOR_ANNOTATIONS = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "torch.FloatTensor",
                                "LongTensor", "torch.LongTensor"})
MODULE_ANNOTATIONS = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"}) | MODULE_BASES

# -- in-place methods ----------------------------------------------------------------------------
# In-place tensor methods (torch 2.13 `dir(torch.Tensor)`, names ending in `_`) that write the
# tensor's values. Left out on purpose: `requires_grad_`, `share_memory_`, `detach_` (autograd
# bookkeeping, not values), metadata-only or storage ops (`set_`, `resize_*`, `as_strided_`,
# `squeeze_`, `unsqueeze_`, `t_`, `transpose_`, `swapaxes_`, `swapdims_`, `sparse_resize_*`) and
# the CPU-only Python callbacks `apply_`, `map_`, `map2_`.
INPLACE_WITH_OUT_OF_PLACE = frozenset("""
abs_ absolute_ acos_ acosh_ add_ addbmm_ addcdiv_ addcmul_ addmm_ addmv_ addr_ arccos_ arccosh_
arcsin_ arcsinh_ arctan2_ arctan_ arctanh_ asin_ asinh_ atan2_ atan_ atanh_ baddbmm_ bernoulli_
bitwise_and_ bitwise_left_shift_ bitwise_not_ bitwise_or_ bitwise_right_shift_ bitwise_xor_ ceil_
clamp_ clamp_max_ clamp_min_ clip_ conj_physical_ copysign_ cos_ cosh_ cumprod_ cumsum_ deg2rad_
digamma_ div_ divide_ eq_ erf_ erfc_ erfinv_ exp2_ exp_ expm1_ fix_ float_power_ floor_
floor_divide_ fmod_ frac_ gcd_ ge_ greater_ greater_equal_ gt_ heaviside_ hypot_ i0_ igamma_
igammac_ index_add_ index_copy_ index_fill_ index_put_ index_reduce_ lcm_ ldexp_ le_ lerp_ less_
less_equal_ lgamma_ log10_ log1p_ log2_ log_ logical_and_ logical_not_ logical_or_ logical_xor_
logit_ lt_ masked_fill_ masked_scatter_ mul_ multiply_ mvlgamma_ nan_to_num_ ne_ neg_ negative_
nextafter_ not_equal_ polygamma_ pow_ put_ rad2deg_ reciprocal_ relu_ remainder_ renorm_ round_
rsqrt_ scatter_ scatter_add_ scatter_reduce_ sgn_ sigmoid_ sign_ sin_ sinc_ sinh_ sqrt_ square_
sub_ subtract_ tan_ tanh_ tril_ triu_ true_divide_ trunc_ xlogy_
""".split())
# In-place methods with no out-of-place method of the same name minus `_`.
INPLACE_ONLY = frozenset("cauchy_ copy_ exponential_ fill_ fill_diagonal_ geometric_ log_normal_ "
                         "normal_ random_ uniform_ zero_".split())
INPLACE_METHODS = INPLACE_WITH_OUT_OF_PLACE | INPLACE_ONLY
# Views: an in-place write through them reaches the viewed tensor.
VIEW_METHODS = frozenset("view view_as transpose permute unsqueeze squeeze t narrow select unflatten "
                         "movedim moveaxis swapaxes swapdims diagonal unfold expand_as".split())
VIEW_ATTRIBUTES = frozenset({"T", "mT", "mH", "H", "real", "imag"})


def torch_member(qualified: str) -> str:
    """`torch.nn.functional.relu` -> `relu`."""
    return qualified.rsplit(".", 1)[-1]


def is_nn_module_class(qualified: str) -> bool:
    """`torch.nn.Linear` (also `torch.nn.modules.linear.Linear`), not `torch.nn.Parameter`."""
    parts = qualified.split(".")
    if parts[:2] != ["torch", "nn"] or len(parts) not in (3, 5):
        return False
    if len(parts) == 5 and parts[2] != "modules":
        return False
    last = parts[-1]
    return last[:1].isupper() and last not in NN_NON_MODULES and not last.endswith("Tensor")


def is_loss_class(qualified: str) -> bool:
    return is_nn_module_class(qualified) and torch_member(qualified).endswith("Loss")


def is_optimizer_class(qualified: str) -> bool:
    parts = qualified.split(".")
    return parts[:2] == ["torch", "optim"] and len(parts) == 3 and parts[2][:1].isupper() \
        and parts[2] != "Optimizer"


def is_scheduler_class(qualified: str) -> bool:
    parts = qualified.split(".")
    return parts[:3] == ["torch", "optim", "lr_scheduler"] and len(parts) == 4 and parts[3][:1].isupper()
