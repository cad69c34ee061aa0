"""API changes: removed and deprecated functions, modules, classes and methods (TL209, TL210).

See `torchlint.analysis.api_changes` for the schema. Every `checked="torch"` claim below was
measured on torch 2.13.0+cpu (`CHECKED_ON`) and is re-measured by `torchlint --verify TL209
TL210`; the `error` texts are the first words of what that torch printed. Entries about
torchvision and torchtext (not installable beside the pinned CPU torch) are `checked="source"`
and name what was read.

Versions: `deprecated_in` / `changed_in` are the PyTorch (or torchvision / torchtext) releases
that deprecated / removed the API, from the measured messages where they name one ("deprecated
since 1.12", "as of PyTorch 2.1", "as of PyTorch 2.0", "since version 1.9"), else from the
release notes and the deprecation/removal PRs named in TorchFix's `deprecated_symbols.yaml`
(dated to the release that followed them). Those read off PR dates are less certain: `torch.lu`,
`lu_solve` (1.13), `triangular_solve` (1.11), `sdp_kernel` (2.3), `_register_pytree_node` (2.2),
`torch.ger` (1.8), `norm`, `svd` (1.9), the DataLoader `.next()` (1.5); the outcome on the current
release, which is what the rules report, is measured for every `checked="torch"` entry.
"""

from __future__ import annotations

from typing import List

from torchlint.analysis.api_changes import DOCS, FUNCTION, METHOD, MODULE, RAISES, WARNS, ApiChange, Check

_REMOVED_19 = "RuntimeError: This function was deprecated since version 1.9 and is now removed."
_MATRIX = "import torch\n\nA = torch.randn(3, 3)\nS = A @ A.T + 3 * torch.eye(3)\nB = torch.randn(3, 2)\n"


def _linalg_removed(name: str, call: str, replacement: str, good: str, notes: str, extra: str = "") -> ApiChange:
    return ApiChange(
        api=f"torch.{name}", kind=FUNCTION, outcome=RAISES, deprecated_in="1.9", changed_in="1.13",
        error=f"{_REMOVED_19} {extra}".strip(),
        replacement=replacement,
        check=Check(snippet=_MATRIX + call + "\n", match="deprecated since version 1.9 and is now removed",
                    replacement_snippet=_MATRIX + good + "\n"),
        notes=notes,
    )


CHANGES: List[ApiChange] = [
    # -- removed linear algebra (RuntimeError when called; the names still exist) ------------
    _linalg_removed(
        "solve", "X, LU = torch.solve(B, S)", "`torch.linalg.solve(A, B)` (arguments swapped, returns X only)",
        "X = torch.linalg.solve(S, B)",
        "torch.solve(B, A) returned (solution, LU); torch.linalg.solve(A, B) takes A first and returns the "
        "solution only. With a batched A and an unbatched B whose ndim is A.ndim - 1, linalg.solve reads B "
        "as a batch of vectors where torch.solve broadcast it as a matrix.",
        "`torch.solve` is deprecated in favor of `torch.linalg.solve`."),
    _linalg_removed(
        "symeig", "L, V = torch.symeig(S, eigenvectors=True)",
        '`torch.linalg.eigh(A, UPLO="U")` (or `torch.linalg.eigvalsh` for the eigenvalues only)',
        'L, V = torch.linalg.eigh(S, UPLO="U")',
        "torch.symeig read the upper triangle by default (upper=True); torch.linalg.eigh reads the lower one "
        "(UPLO='L') unless told. symeig(eigenvectors=False), its default, returned an empty eigenvector tensor."),
    _linalg_removed(
        "eig", "L, V = torch.eig(A, eigenvectors=True)", "`torch.linalg.eig(A)` (complex results)",
        "L, V = torch.linalg.eig(A)",
        "torch.eig returned eigenvalues as an (n, 2) real tensor of (real, imaginary) pairs; "
        "torch.linalg.eig returns complex tensors."),
    _linalg_removed(
        "lstsq", "X, QR = torch.lstsq(B, A)", "`torch.linalg.lstsq(A, B).solution` (arguments swapped)",
        "X = torch.linalg.lstsq(A, B).solution",
        "torch.lstsq(B, A) returned (solution, QR) with the solution padded to max(m, n) rows; "
        "torch.linalg.lstsq(A, B) takes A first and returns a named tuple."),
    _linalg_removed(
        "matrix_rank", "r = torch.matrix_rank(A)", "`torch.linalg.matrix_rank(A)` (`symmetric=` is `hermitian=`)",
        "r = torch.linalg.matrix_rank(A)",
        "torch.matrix_rank's `symmetric` parameter is `hermitian` in torch.linalg.matrix_rank; its `tol` is "
        "`atol`/`rtol`."),
    # -- the same, as Tensor methods (flagged where the value model knows the receiver is a tensor)
    *[
        ApiChange(
            api=f"torch.Tensor.{name}", kind=METHOD, outcome=RAISES, deprecated_in="1.9", changed_in="1.13",
            error=error, replacement=replacement,
            check=Check(snippet=_MATRIX + call + "\n", match=match, replacement_snippet=_MATRIX + good + "\n"),
            notes=f"The method form of torch.{name}.",
        )
        for name, call, good, replacement, error, match in (
            ("solve", "X, LU = B.solve(A)", "X = torch.linalg.solve(A, B)", "`torch.linalg.solve(A, B)`",
             _REMOVED_19, "deprecated since version 1.9 and is now removed"),
            ("symeig", "L, V = S.symeig(eigenvectors=True)", 'L, V = torch.linalg.eigh(S, UPLO="U")',
             '`torch.linalg.eigh(A, UPLO="U")`', _REMOVED_19, "deprecated since version 1.9 and is now removed"),
            ("eig", "L, V = A.eig(eigenvectors=True)", "L, V = torch.linalg.eig(A)", "`torch.linalg.eig(A)`",
             _REMOVED_19, "deprecated since version 1.9 and is now removed"),
            ("lstsq", "X, QR = B.lstsq(A)", "X = torch.linalg.lstsq(A, B).solution",
             "`torch.linalg.lstsq(A, B).solution`", _REMOVED_19, "deprecated since version 1.9 and is now removed"),
            ("matrix_rank", "r = A.matrix_rank()", "r = torch.linalg.matrix_rank(A)", "`torch.linalg.matrix_rank(A)`",
             "AttributeError: 'Tensor' object has no attribute 'matrix_rank'", "has no attribute 'matrix_rank'"),
        )
    ],
    # -- removed modules -------------------------------------------------------------------
    ApiChange(
        api="torch._six", kind=MODULE, outcome=RAISES, deprecated_in=None, changed_in="2.0",
        error="ModuleNotFoundError: No module named 'torch._six'",
        replacement="the standard library: `str` for `string_classes`, `math.inf` for `inf`, "
                    "`collections.abc` for `container_abcs`, `int` for `int_classes`",
        check=Check(snippet="import torch\nfrom torch._six import string_classes\n",
                    match="No module named 'torch._six'",
                    replacement_snippet="import torch\nstring_classes = str\n"),
        notes="A private Python 2/3 compatibility module; `import torch` alone then `torch._six.inf` raises "
              "AttributeError: module 'torch' has no attribute '_six'.",
        on_reference=True,
    ),
    ApiChange(
        api="torch.utils.ffi", kind=MODULE, outcome=RAISES, deprecated_in="0.4.1", changed_in="1.0",
        error="ModuleNotFoundError: No module named 'torch.utils.ffi'",
        replacement="C++ extensions: `torch.utils.cpp_extension`",
        check=Check(snippet="import torch\nfrom torch.utils.ffi import create_extension\n",
                    match="No module named 'torch.utils.ffi'",
                    replacement_snippet="import torch\nfrom torch.utils.cpp_extension import load\n"),
        on_reference=True,
    ),
    # -- removed functions that are gone entirely (AttributeError on any reference) ---------
    ApiChange(
        api="torch.rfft", kind=FUNCTION, outcome=RAISES, deprecated_in="1.7", changed_in="1.8",
        error="AttributeError: module 'torch' has no attribute 'rfft'",
        replacement="`torch.fft.rfft` / `torch.fft.rfftn` (complex output; no `signal_ndim`, `onesided`)",
        check=Check(snippet="import torch\n\nx = torch.randn(8)\ny = torch.rfft(x, 1)\n",
                    match="has no attribute 'rfft'",
                    replacement_snippet="import torch\n\nx = torch.randn(8)\ny = torch.fft.rfft(x)\n"),
        notes="torch.rfft(x, signal_ndim) returned real (..., 2) pairs; torch.fft.rfft returns a complex "
              "tensor (torch.view_as_real gives the pairs back).",
        on_reference=True,
    ),
    ApiChange(
        api="torch.irfft", kind=FUNCTION, outcome=RAISES, deprecated_in="1.7", changed_in="1.8",
        error="AttributeError: module 'torch' has no attribute 'irfft'",
        replacement="`torch.fft.irfft` / `torch.fft.irfftn` (complex input)",
        check=Check(snippet="import torch\n\nx = torch.randn(5, 2)\ny = torch.irfft(x, 1)\n",
                    match="has no attribute 'irfft'",
                    replacement_snippet="import torch\n\nx = torch.randn(5, 2)\n"
                                        "y = torch.fft.irfft(torch.view_as_complex(x))\n"),
        on_reference=True,
    ),
    ApiChange(
        api="torch.ifft", kind=FUNCTION, outcome=RAISES, deprecated_in="1.7", changed_in="1.8",
        error="AttributeError: module 'torch' has no attribute 'ifft'",
        replacement="`torch.fft.ifft` (complex input and output)",
        check=Check(snippet="import torch\n\nx = torch.randn(4, 2)\ny = torch.ifft(x, 1)\n",
                    match="has no attribute 'ifft'",
                    replacement_snippet="import torch\n\nx = torch.randn(4, 2)\n"
                                        "y = torch.fft.ifft(torch.view_as_complex(x))\n"),
        on_reference=True,
    ),
    ApiChange(
        api="torch.gesv", kind=FUNCTION, outcome=RAISES, deprecated_in="1.1", changed_in="1.2",
        error="AttributeError: module 'torch' has no attribute 'gesv'",
        replacement="`torch.linalg.solve(A, B)` (arguments swapped, returns X only)",
        check=Check(snippet=_MATRIX + "X, LU = torch.gesv(B, A)\n", match="has no attribute 'gesv'",
                    replacement_snippet=_MATRIX + "X = torch.linalg.solve(A, B)\n"),
        notes="Renamed torch.solve in 1.1 (which warned 'torch.gesv is deprecated in favour of torch.solve "
              "and will be removed in the next release'); torch.solve itself went in 1.13.",
        on_reference=True,
    ),
    ApiChange(
        api="torch.gels", kind=FUNCTION, outcome=RAISES, deprecated_in="1.2", changed_in="1.3",
        error="AttributeError: module 'torch' has no attribute 'gels'",
        replacement="`torch.linalg.lstsq(A, B).solution` (arguments swapped)",
        check=Check(snippet=_MATRIX + "X, QR = torch.gels(B, A)\n", match="has no attribute 'gels'",
                    replacement_snippet=_MATRIX + "X = torch.linalg.lstsq(A, B).solution\n"),
        notes="The 1.3 release notes: 'torch.gels: removed deprecated operator, use torch.lstsq instead' "
              "(pytorch/pytorch#26480); torch.lstsq itself went in 1.13.",
        on_reference=True,
    ),
    # -- the DataLoader iterator's Python 2 `next` ------------------------------------------
    ApiChange(
        api="torch.utils.data.DataLoader.__iter__().next", kind=METHOD, outcome=RAISES,
        deprecated_in=None, changed_in="1.5",
        error="AttributeError: '_SingleProcessDataLoaderIter' object has no attribute 'next'",
        replacement="`next(iter(loader))`",
        check=Check(
            snippet="import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
                    "loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)\n"
                    "batch = iter(loader).next()\n",
            match="object has no attribute 'next'",
            replacement_snippet="import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
                                "loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)\n"
                                "batch = next(iter(loader))\n"),
        exact_fix=True,
        notes="The Python 2 alias `next = __next__` of the loader iterators went with Python 2 support "
              "(PyTorch 1.5 dropped Python 2; the exact release of the alias's removal was not read in "
              "the sources). With num_workers > 0 the class is _MultiProcessingDataLoaderIter.",
    ),
    # -- torchvision / torchtext: checked in their sources and maintainers' statements -------
    ApiChange(
        api="torchvision.transforms.Scale", kind=FUNCTION, outcome=RAISES, deprecated_in="0.2", changed_in="0.12",
        error="AttributeError: module 'torchvision.transforms' has no attribute 'Scale'",
        replacement="`transforms.Resize` (same arguments)",
        check=Check(snippet="import torchvision.transforms as transforms\n\nt = transforms.Scale(256)\n",
                    replacement_snippet="import torchvision.transforms as transforms\n\nt = transforms.Resize(256)\n",
                    checked="source",
                    source="torchvision transforms.py (0.2-era stored version: `class Scale(Resize)` warns "
                           "and forwards); removal in 0.12.0 by pytorch/vision#5386 per the maintainer in "
                           "pytorch/vision#5927"),
        exact_fix=True, rename="torchvision.transforms.Resize", on_reference=True,
    ),
    ApiChange(
        api="torchvision.transforms.RandomSizedCrop", kind=FUNCTION, outcome=RAISES, deprecated_in="0.2",
        changed_in="0.12",
        error="AttributeError: module 'torchvision.transforms' has no attribute 'RandomSizedCrop'",
        replacement="`transforms.RandomResizedCrop` (same arguments)",
        check=Check(snippet="import torchvision.transforms as transforms\n\nt = transforms.RandomSizedCrop(224)\n",
                    replacement_snippet="import torchvision.transforms as transforms\n\n"
                                        "t = transforms.RandomResizedCrop(224)\n",
                    checked="source",
                    source="torchvision transforms.py (0.2-era stored version: `class RandomSizedCrop("
                           "RandomResizedCrop)` warns and forwards); gone with Scale in 0.12 (the "
                           "AttributeError is reported on later releases; the removal PR was not read)"),
        exact_fix=True, rename="torchvision.transforms.RandomResizedCrop", on_reference=True,
    ),
    ApiChange(
        api="torchvision.models.utils", kind=MODULE, outcome=RAISES, deprecated_in=None, changed_in="0.11",
        error="ModuleNotFoundError: No module named 'torchvision.models.utils'",
        replacement="`torch.hub.load_state_dict_from_url`",
        check=Check(snippet="import torch\nfrom torchvision.models.utils import load_state_dict_from_url\n",
                    replacement_snippet="import torch\nfrom torch.hub import load_state_dict_from_url\n",
                    checked="source",
                    source="torchvision v0.11.0: models/utils.py replaced by torchvision/_internally_replaced_"
                           "utils.py (the ModuleNotFoundError is reported on 0.11.3 and 0.13.1)"),
        on_reference=True,
    ),
    ApiChange(
        api="torchtext.legacy", kind=MODULE, outcome=RAISES, deprecated_in="0.11", changed_in="0.12",
        error="ModuleNotFoundError: No module named 'torchtext.legacy'",
        replacement="torchtext's datasets, `torchtext.vocab.build_vocab_from_iterator` and a "
                    "`torch.utils.data.DataLoader` with a `collate_fn` (or pin torchtext < 0.12)",
        check=Check(snippet="import torch\nfrom torchtext.legacy.data import Field, BucketIterator\n",
                    replacement_snippet="import torch\nfrom torchtext.vocab import build_vocab_from_iterator\n",
                    checked="source",
                    source="pytorch/text#1437 (removes the legacy folder, merged for 0.12.0); maintainer in "
                           "pytorch/text#1661: deprecated since 0.11, deleted in 0.12.0"),
        on_reference=True,
    ),
    ApiChange(
        api="torchtext.data.Field", kind=FUNCTION, outcome=RAISES, deprecated_in="0.8", changed_in="0.9",
        error=("ImportError: cannot import name 'Field' from 'torchtext.data' "
               "(read as `data.Field`: AttributeError)"),
        replacement="torchtext's datasets and `torchtext.vocab` with a DataLoader (torchtext.legacy.data.Field "
                    "existed in 0.9-0.11 only)",
        check=Check(snippet="import torch\nfrom torchtext.data import Field\n",
                    replacement_snippet="import torch\nfrom torchtext.vocab import build_vocab_from_iterator\n",
                    checked="source",
                    source="torchtext v0.9.0 release notes (Field, BucketIterator, TabularDataset moved to "
                           "torchtext.legacy), per pytorch/text#1274 and #1636"),
        on_reference=True,
    ),
    ApiChange(
        api="torchtext.data.BucketIterator", kind=FUNCTION, outcome=RAISES, deprecated_in="0.8", changed_in="0.9",
        error=("ImportError: cannot import name 'BucketIterator' from 'torchtext.data' "
               "(read as `data.BucketIterator`: AttributeError)"),
        replacement="a `torch.utils.data.DataLoader` with a `collate_fn` that pads",
        check=Check(snippet="import torch\nfrom torchtext.data import BucketIterator\n",
                    replacement_snippet="import torch\nfrom torch.utils.data import DataLoader\n",
                    checked="source", source="torchtext v0.9.0 release notes (moved to torchtext.legacy)"),
        on_reference=True,
    ),
    ApiChange(
        api="torchtext.data.TabularDataset", kind=FUNCTION, outcome=RAISES, deprecated_in="0.8", changed_in="0.9",
        error=("ImportError: cannot import name 'TabularDataset' from 'torchtext.data' "
               "(read as `data.TabularDataset`: AttributeError)"),
        replacement="a `torch.utils.data.Dataset` over the rows (csv / pandas)",
        check=Check(snippet="import torch\nfrom torchtext.data import TabularDataset\n",
                    replacement_snippet="import torch\nfrom torch.utils.data import Dataset\n",
                    checked="source", source="torchtext v0.9.0 release notes (moved to torchtext.legacy)"),
        on_reference=True,
    ),
    # == deprecated: the old spelling still runs (TL210) =====================================
    ApiChange(
        api="torch.qr", kind=FUNCTION, outcome=WARNS, deprecated_in="1.9", changed_in=None,
        error="UserWarning: torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
              "PyTorch release.",
        replacement='`torch.linalg.qr(A)` (`some=False` is `mode="complete"`)',
        check=Check(snippet=_MATRIX + "Q, R = torch.qr(A)\n", match="torch.qr is deprecated",
                    replacement_snippet=_MATRIX + "Q, R = torch.linalg.qr(A)\n"),
        exact_fix=True, rename="torch.linalg.qr",
        notes="Measured equal (torch.equal) for some=True / mode='reduced' and some=False / mode='complete'.",
    ),
    ApiChange(
        api="torch.cholesky", kind=FUNCTION, outcome=WARNS, deprecated_in="1.9", changed_in=None,
        error="UserWarning: torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed "
              "in a future PyTorch release.",
        replacement="`torch.linalg.cholesky(A)` (`upper=` is keyword-only)",
        check=Check(snippet=_MATRIX + "L = torch.cholesky(S)\n", match="torch.cholesky is deprecated",
                    replacement_snippet=_MATRIX + "L = torch.linalg.cholesky(S)\n"),
        exact_fix=True, rename="torch.linalg.cholesky",
        notes="Measured equal (torch.equal) for upper=False and upper=True.",
    ),
    ApiChange(
        api="torch.chain_matmul", kind=FUNCTION, outcome=WARNS, deprecated_in="1.9", changed_in=None,
        error="UserWarning: torch.chain_matmul is deprecated and will be removed in a future PyTorch release. "
              "Use torch.linalg.multi_dot instead",
        replacement="`torch.linalg.multi_dot([a, b, c])` (one list argument)",
        check=Check(snippet=_MATRIX + "C = torch.chain_matmul(A, S, B)\n", match="torch.chain_matmul is deprecated",
                    replacement_snippet=_MATRIX + "C = torch.linalg.multi_dot([A, S, B])\n"),
        exact_fix=True, notes="Measured equal (torch.equal) for three matrices.",
    ),
    ApiChange(
        api="torch.range", kind=FUNCTION, outcome=WARNS, deprecated_in="0.4", changed_in=None,
        error="UserWarning: torch.range is deprecated and will be removed in a future release because its "
              "behavior is inconsistent with Python's range builtin.",
        replacement="`torch.arange(start, end + step, step)` (arange excludes `end`)",
        check=Check(snippet="import torch\n\nr = torch.range(0, 4)\n", match="torch.range is deprecated",
                    replacement_snippet="import torch\n\nr = torch.arange(0, 4 + 1)\n"),
        notes="torch.range includes `end`, torch.arange excludes it; with a float step the element count of "
              "arange(start, end + 1, step) differs (measured: range(0, 1, 0.1) has 11 elements, "
              "arange(0, 2, 0.1) 20), and torch.range returns float by default where arange of ints is int64.",
    ),
    ApiChange(
        api="torch.lu", kind=FUNCTION, outcome=WARNS, deprecated_in="1.13", changed_in=None,
        error="UserWarning: torch.lu is deprecated in favor of torch.linalg.lu_factor / "
              "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.",
        replacement="`torch.linalg.lu_factor(A)` (`get_infos=True`: `torch.linalg.lu_factor_ex`)",
        check=Check(snippet=_MATRIX + "LU, piv = torch.lu(A)\n", match="torch.lu is deprecated",
                    replacement_snippet=_MATRIX + "LU, piv = torch.linalg.lu_factor(A)\n"),
    ),
    ApiChange(
        api="torch.lu_solve", kind=FUNCTION, outcome=WARNS, deprecated_in="1.13", changed_in=None,
        error="UserWarning: torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed "
              "in a future PyTorch release.",
        replacement="`torch.linalg.lu_solve(LU, pivots, B)` (arguments reordered)",
        check=Check(snippet=_MATRIX + "LU, piv = torch.linalg.lu_factor(A)\nX = torch.lu_solve(B, LU, piv)\n",
                    match="torch.lu_solve is deprecated",
                    replacement_snippet=_MATRIX + "LU, piv = torch.linalg.lu_factor(A)\n"
                                                  "X = torch.linalg.lu_solve(LU, piv, B)\n"),
    ),
    ApiChange(
        api="torch.triangular_solve", kind=FUNCTION, outcome=WARNS, deprecated_in="1.11", changed_in=None,
        error="UserWarning: torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular"
              "and will be removed in a future PyTorch release.",
        replacement="`torch.linalg.solve_triangular(A, B, upper=...)` (arguments swapped, returns X only)",
        check=Check(snippet=_MATRIX + "X, M = torch.triangular_solve(B, S)\n",
                    match="torch.triangular_solve is deprecated",
                    replacement_snippet=_MATRIX + "X = torch.linalg.solve_triangular(S, B, upper=True)\n"),
        notes="triangular_solve(b, A) defaults to upper=True and returns (solution, cloned A); "
              "solve_triangular requires `upper=` and returns the solution.",
    ),
    ApiChange(
        api="torch.testing.assert_allclose", kind=FUNCTION, outcome=WARNS, deprecated_in="1.12", changed_in=None,
        error="FutureWarning: `torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in "
              "a future release. Please use `torch.testing.assert_close()` instead.",
        replacement="`torch.testing.assert_close(actual, expected)`",
        check=Check(snippet="import torch\n\nx = torch.ones(3)\ntorch.testing.assert_allclose(x, x)\n",
                    match="assert_allclose()` is deprecated",
                    replacement_snippet="import torch\n\nx = torch.ones(3)\ntorch.testing.assert_close(x, x)\n"),
        notes="assert_close checks dtype and device as well and treats NaN as unequal unless equal_nan=True; "
              "assert_allclose compared NaN as equal. Of torch.testing's 1.x helpers, 2.13 keeps only "
              "assert_allclose, assert_close, make_tensor and FileCheck.",
    ),
    ApiChange(
        api="torch.nn.utils.weight_norm", kind=FUNCTION, outcome=WARNS, deprecated_in="2.1", changed_in=None,
        error="FutureWarning: `torch.nn.utils.weight_norm` is deprecated in favor of "
              "`torch.nn.utils.parametrizations.weight_norm`.",
        replacement="`torch.nn.utils.parametrizations.weight_norm` (the parameters become "
                    "`parametrizations.weight.original0/1`)",
        check=Check(snippet="import torch\n\nlayer = torch.nn.utils.weight_norm(torch.nn.Linear(4, 4))\n",
                    match="weight_norm` is deprecated",
                    replacement_snippet="import torch\n\n"
                                        "layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 4))\n"),
        notes="The parametrization stores weight_g / weight_v as parametrizations.weight.original0 / original1: "
              "old state dicts do not load into the new module without renaming.",
    ),
    ApiChange(
        api="torch.nn.utils.clip_grad_norm", kind=FUNCTION, outcome=WARNS, deprecated_in="0.4", changed_in=None,
        error="FutureWarning: `torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
              "`torch.nn.utils.clip_grad_norm_`.",
        replacement="`torch.nn.utils.clip_grad_norm_` (same arguments)",
        check=Check(snippet="import torch\n\nlayer = torch.nn.Linear(2, 2)\nlayer(torch.randn(3, 2)).sum().backward()\n"
                            "n = torch.nn.utils.clip_grad_norm(layer.parameters(), 0.1)\n",
                    match="clip_grad_norm` is now deprecated",
                    replacement_snippet="import torch\n\nlayer = torch.nn.Linear(2, 2)\n"
                                        "layer(torch.randn(3, 2)).sum().backward()\n"
                                        "n = torch.nn.utils.clip_grad_norm_(layer.parameters(), 0.1)\n"),
        exact_fix=True, rename="torch.nn.utils.clip_grad_norm_",
    ),
    ApiChange(
        api="torch.utils._pytree._register_pytree_node", kind=FUNCTION, outcome=WARNS, deprecated_in="2.2",
        changed_in=None,
        error="FutureWarning: `torch.utils._pytree._register_pytree_node` is deprecated. Please use "
              "`torch.utils._pytree.register_pytree_node` instead.",
        replacement="`torch.utils._pytree.register_pytree_node`",
        check=Check(snippet="import torch\nimport torch.utils._pytree\n\nclass P:\n    pass\n\n"
                            "torch.utils._pytree._register_pytree_node(P, lambda p: ([], None), lambda v, c: P())\n",
                    match="_register_pytree_node` is deprecated",
                    replacement_snippet="import torch\nimport torch.utils._pytree\n\nclass P:\n    pass\n\n"
                                        "torch.utils._pytree.register_pytree_node(P, lambda p: ([], None), "
                                        "lambda v, c: P())\n"),
        rename="torch.utils._pytree.register_pytree_node",
        notes="The 4th/5th positional parameters (to_str_fn, maybe_from_str_fn) do not exist in "
              "register_pytree_node, whose extra parameters are keyword-only.",
    ),
    ApiChange(
        api="torch.backends.cuda.sdp_kernel", kind=FUNCTION, outcome=WARNS, deprecated_in="2.3", changed_in=None,
        error="FutureWarning: `torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context "
              "manager will be removed. Please see `torch.nn.attention.sdpa_kernel()`",
        replacement="`torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION, ...])` (a list of backends "
                    "instead of enable_* flags)",
        check=Check(snippet="import torch\n\nwith torch.backends.cuda.sdp_kernel(enable_math=True):\n    pass\n",
                    match="sdp_kernel()` is deprecated", line=3,
                    replacement_snippet="import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n\n"
                                        "with sdpa_kernel([SDPBackend.MATH]):\n    pass\n"),
    ),
    ApiChange(
        api="torch.cuda.amp.autocast", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use "
              "`torch.amp.autocast('cuda', args...)` instead.",
        replacement='`torch.amp.autocast("cuda", ...)`',
        check=Check(snippet="import torch\n\nctx = torch.cuda.amp.autocast(enabled=False)\n",
                    match="torch.cuda.amp.autocast(args...)` is deprecated",
                    replacement_snippet='import torch\n\nctx = torch.amp.autocast("cuda", enabled=False)\n'),
        exact_fix=True,
        notes="torch.cuda.amp.autocast(enabled, dtype, cache_enabled) takes them positionally; "
              "torch.amp.autocast(device_type, dtype, enabled, cache_enabled) in another order, so only a call "
              "with keyword arguments is rewritten. The old class passes dtype=torch.float16 where the new one "
              "reads torch.get_autocast_dtype('cuda') (float16 unless torch.set_autocast_dtype changed it).",
    ),
    ApiChange(
        api="torch.cpu.amp.autocast", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. Please use "
              "`torch.amp.autocast('cpu', args...)` instead.",
        replacement='`torch.amp.autocast("cpu", ...)`',
        check=Check(snippet="import torch\n\nctx = torch.cpu.amp.autocast()\n",
                    match="torch.cpu.amp.autocast(args...)` is deprecated",
                    replacement_snippet='import torch\n\nctx = torch.amp.autocast("cpu")\n'),
        exact_fix=True,
        notes="As torch.cuda.amp.autocast; the old class passes dtype=torch.bfloat16, the new one reads "
              "torch.get_autocast_dtype('cpu') (bfloat16 unless changed; measured: both give bfloat16 matmuls).",
    ),
    ApiChange(
        api="torch.cuda.amp.GradScaler", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
              "`torch.amp.GradScaler('cuda', args...)` instead.",
        replacement='`torch.amp.GradScaler("cuda", ...)`',
        check=Check(snippet="import torch\n\nscaler = torch.cuda.amp.GradScaler(enabled=False)\n",
                    match="torch.cuda.amp.GradScaler(args...)` is deprecated",
                    replacement_snippet='import torch\n\nscaler = torch.amp.GradScaler("cuda", enabled=False)\n'),
        exact_fix=True,
        notes="torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled) "
              "calls torch.amp.GradScaler('cuda', ...) with the same keywords; positional arguments would "
              "shift, so only keyword calls are rewritten.",
    ),
    ApiChange(
        api="torch.cpu.amp.GradScaler", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
              "`torch.amp.GradScaler('cpu', args...)` instead.",
        replacement='`torch.amp.GradScaler("cpu", ...)`',
        check=Check(snippet="import torch\n\nscaler = torch.cpu.amp.GradScaler()\n",
                    match="torch.cpu.amp.GradScaler(args...)` is deprecated",
                    replacement_snippet='import torch\n\nscaler = torch.amp.GradScaler("cpu")\n'),
        exact_fix=True,
    ),
    ApiChange(
        api="torch.cuda.amp.custom_fwd", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
              "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
        replacement='`torch.amp.custom_fwd(device_type="cuda")`',
        check=Check(snippet="import torch\n\nf = torch.cuda.amp.custom_fwd(lambda x: x)\n",
                    match="custom_fwd(args...)` is deprecated",
                    replacement_snippet='import torch\n\nf = torch.amp.custom_fwd(lambda x: x, device_type="cuda")\n'),
    ),
    ApiChange(
        api="torch.cuda.amp.custom_bwd", kind=FUNCTION, outcome=WARNS, deprecated_in="2.4", changed_in=None,
        error="FutureWarning: `torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
              "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.",
        replacement='`torch.amp.custom_bwd(device_type="cuda")`',
        check=Check(snippet="import torch\n\nf = torch.cuda.amp.custom_bwd(lambda x: x)\n",
                    match="custom_bwd(args...)` is deprecated",
                    replacement_snippet='import torch\n\nf = torch.amp.custom_bwd(lambda x: x, device_type="cuda")\n'),
    ),
    ApiChange(
        api="torch.set_default_tensor_type", kind=FUNCTION, outcome=WARNS, deprecated_in="2.1", changed_in=None,
        error="UserWarning: torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
              "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
        replacement="`torch.set_default_dtype(...)` and `torch.set_default_device(...)`",
        check=Check(snippet="import torch\n\ntorch.set_default_tensor_type(torch.FloatTensor)\n",
                    match="set_default_tensor_type() is deprecated",
                    replacement_snippet="import torch\n\ntorch.set_default_dtype(torch.float32)\n"),
    ),
    *[
        ApiChange(
            api=f"functorch.{name}", kind=FUNCTION, outcome=WARNS, deprecated_in="2.0", changed_in=None,
            error=f"FutureWarning: We've integrated functorch into PyTorch. As the final step of the integration, "
                  f"`functorch.{name}` is deprecated as of PyTorch 2.0 and will be deleted in a future version",
            replacement=f"`torch.func.{name}`",
            check=Check(snippet=f"import torch\nimport functorch\n\nf = functorch.{name}({arg})\n",
                        match=f"`functorch.{name}` is deprecated",
                        replacement_snippet=f"import torch\nimport torch.func\n\nf = torch.func.{name}({arg})\n"),
            rename=f"torch.func.{name}",
            notes="functorch is still installed with torch 2.13; its functions warn and call torch.func's.",
        )
        for name, arg in (("vmap", "torch.sin"), ("grad", "torch.sin"), ("vjp", "torch.sin, torch.ones(2)"),
                          ("jvp", "torch.sin, (torch.ones(2),), (torch.ones(2),)"), ("jacrev", "torch.sin"),
                          ("jacfwd", "torch.sin"), ("hessian", "torch.sin"), ("functionalize", "torch.sin"))
    ],
    # -- deprecated in the documentation only (no warning on 2.13; TorchFix's TOR101) --------
    ApiChange(
        api="torch.ger", kind=FUNCTION, outcome=DOCS, deprecated_in="1.8", changed_in=None,
        error="no warning; the documentation says deprecated, use torch.outer",
        replacement="`torch.outer` (same arguments)",
        check=Check(match="deprecated", snippet="import torch\n\na = torch.randn(3)\nb = torch.randn(2)\n"
                                                "m = torch.ger(a, b)\n",
                    replacement_snippet="import torch\n\na = torch.randn(3)\nb = torch.randn(2)\n"
                                        "m = torch.outer(a, b)\n"),
        exact_fix=True, rename="torch.outer", notes="An alias: measured equal (torch.equal).",
    ),
    ApiChange(
        api="torch.norm", kind=FUNCTION, outcome=DOCS, deprecated_in="1.9", changed_in=None,
        error="no warning; the documentation says deprecated and may be removed, use torch.linalg.norm, "
              "torch.linalg.vector_norm or torch.linalg.matrix_norm",
        replacement="`torch.linalg.vector_norm` / `torch.linalg.matrix_norm` (or `Tensor.norm`)",
        check=Check(match="deprecated", snippet="import torch\n\nx = torch.randn(4)\nn = torch.norm(x)\n",
                    replacement_snippet="import torch\n\nx = torch.randn(4)\nn = torch.linalg.vector_norm(x)\n"),
        notes="torch.norm(A) of a matrix is the Frobenius norm of all elements, torch.linalg.norm(A) of a 2-D "
              "input is the matrix norm; with `dim=`/`p=` the mappings differ: no rename is exact for all calls.",
    ),
    ApiChange(
        api="torch.svd", kind=FUNCTION, outcome=DOCS, deprecated_in="1.9", changed_in=None,
        error="no warning; the documentation says deprecated, use torch.linalg.svd",
        replacement="`torch.linalg.svd(A, full_matrices=False)` (returns Vh, not V)",
        check=Check(match="deprecated", snippet="import torch\n\nA = torch.randn(3, 3)\nU, S, V = torch.svd(A)\n",
                    replacement_snippet="import torch\n\nA = torch.randn(3, 3)\n"
                                        "U, S, Vh = torch.linalg.svd(A, full_matrices=False)\n"),
        notes="torch.svd returns V; torch.linalg.svd returns V's conjugate transpose and some=True is "
              "full_matrices=False.",
    ),
    ApiChange(
        api="torch.nn.UpsamplingNearest2d", kind=FUNCTION, outcome=DOCS, deprecated_in=None, changed_in=None,
        error="no warning; the documentation says deprecated, use nn.functional.interpolate / nn.Upsample",
        replacement='`nn.Upsample(scale_factor=..., mode="nearest")`',
        check=Check(match="deprecated", snippet="import torch\n\nup = torch.nn.UpsamplingNearest2d(scale_factor=2)\n",
                    replacement_snippet='import torch\n\nup = torch.nn.Upsample(scale_factor=2, mode="nearest")\n'),
    ),
    ApiChange(
        api="torch.nn.UpsamplingBilinear2d", kind=FUNCTION, outcome=DOCS, deprecated_in=None, changed_in=None,
        error="no warning; the documentation says deprecated, use nn.functional.interpolate / nn.Upsample",
        replacement='`nn.Upsample(scale_factor=..., mode="bilinear", align_corners=True)`',
        check=Check(match="deprecated", snippet="import torch\n\nup = torch.nn.UpsamplingBilinear2d(scale_factor=2)\n",
                    replacement_snippet='import torch\n\nup = torch.nn.Upsample(scale_factor=2, mode="bilinear", '
                                        'align_corners=True)\n'),
        notes="UpsamplingBilinear2d uses align_corners=True; nn.Upsample(mode='bilinear') defaults to False.",
    ),
    ApiChange(
        api="torchvision.transforms.v2.ToTensor", kind=FUNCTION, outcome=WARNS, deprecated_in="0.16",
        changed_in=None,
        error="UserWarning: The transform `ToTensor()` is deprecated and will be removed in a future release.",
        replacement="`v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])`",
        check=Check(snippet="import torch\nfrom torchvision.transforms import v2\n\nt = v2.ToTensor()\n",
                    replacement_snippet="import torch\nfrom torchvision.transforms import v2\n\n"
                                        "t = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])\n",
                    checked="source",
                    source="TorchFix TOR202's message (torchvision.transforms.v2.ToTensor deprecated); the "
                           "release that added the warning was not read in torchvision's sources"),
        on_reference=True,
    ),
]
