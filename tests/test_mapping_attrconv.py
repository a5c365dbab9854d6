import numpy as np
import pytest

from amanda_core.ir import Tensor
from amanda_core.mapping import attrconv as ac
from amanda_core.namespace import PythonTypeSystem, TypeSystem, TypeSystemRegistry


def test_strings_and_flags():
    assert ac.str_equals("SAME", "SAME") and not ac.str_equals("VALID", "SAME")
    assert ac.str_equals(b"SAME", "SAME") and ac.str_equals("same", "SAME", case=False)
    assert not ac.str_equals(None, "SAME")
    assert ac.bool_to_str(True, "SAME", "VALID") == "SAME" and ac.bool_to_str(0, "SAME", "VALID") == "VALID"


def test_layouts():
    assert ac.by_layout([1, 2, 3, 4], "NHWC", "H") == 2
    assert ac.by_layout([1, 4, 2, 3], "NCHW", "C") == 4
    assert ac.spatial([1, 2, 3, 1], "NHWC") == [2, 3]
    assert ac.with_layout([2, 3], "NCHW") == [1, 1, 2, 3]
    with pytest.raises(ValueError, match="no dimension 'D'"):
        ac.by_layout([1, 2, 3, 4], "NHWC", "D")
    with pytest.raises(ValueError, match="3 values for layout"):
        ac.spatial([1, 2, 3], "NHWC")


def test_tensors_and_lists():
    assert ac.tensor_to_ints(np.array([[1, 2], [3, 4]], np.int64)) == [1, 2, 3, 4]
    assert ac.tensor_to_ints(Tensor(np.array([5], np.int32))) == [5]
    assert ac.tensor_to_floats([1, 2]) == [1.0, 2.0]
    t = ac.ints_to_tensor([1, 2, 3])
    assert t.dtype == np.int64 and t.shape == (3,)
    assert ac.ints_to_tensor(4).shape == ()
    assert ac.floats_to_tensor([1, 2, 3, 4], shape=[2, 2]).shape == (2, 2)
    assert ac.scalar(np.array([7])) == 7
    with pytest.raises(ValueError):
        ac.scalar([1, 2])
    with pytest.raises(TypeError, match="not a tensor"):
        ac.tensor_to_list(object())


def test_axes_and_permutations_agree_with_numpy():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # an NHWC tensor
    nchw = x.transpose(ac.perm_to_nchw(4))
    assert nchw.shape == (2, 5, 3, 4) and ac.nhwc_to_nchw_shape(list(x.shape)) == list(nchw.shape)
    assert np.array_equal(nchw.transpose(ac.perm_to_nhwc(4)), x)
    for axis in range(-4, 4):
        a = ac.nhwc_to_nchw_axis(axis, 4)
        assert nchw.shape[a] == x.shape[axis]
        assert ac.nchw_to_nhwc_axis(a, 4) == ac.normalize_axis(axis, 4)
    p = [2, 0, 3, 1]
    assert ac.compose_perms(p, ac.inverse_perm(p)) == [0, 1, 2, 3]
    assert np.array_equal(x.transpose(p).transpose([1, 0, 2, 3]), x.transpose(ac.compose_perms(p, [1, 0, 2, 3])))
    assert ac.is_identity_perm([0, 1, 2]) and not ac.is_identity_perm([1, 0])
    with pytest.raises(ValueError, match="out of range"):
        ac.normalize_axis(4, 4)
    with pytest.raises(ValueError, match="not a permutation"):
        ac.inverse_perm([0, 0])
    assert ac.perm_to_nchw(2) == [0, 1]


@pytest.mark.parametrize("size, k, s, d", [(7, 3, 2, 1), (8, 3, 2, 1), (10, 4, 3, 2), (5, 1, 1, 1), (6, 5, 1, 1)])
def test_same_pads_keep_ceil_size_over_stride(size, k, s, d):
    pads = ac.same_pads([size], [k], [s], [d])
    out = (size + pads[0] + pads[1] - ((k - 1) * d + 1)) // s + 1
    assert out == -(-size // s)
    assert pads[1] >= pads[0] and pads[1] - pads[0] <= 1  # SAME_UPPER: the odd pixel at the end
    lower = ac.same_pads([size], [k], [s], [d], upper=False)
    assert lower == [pads[1], pads[0]]


def test_padding_conversions():
    assert ac.pads_to_pairs([1, 2, 3, 4]) == [[1, 3], [2, 4]]
    assert ac.pads_from_pairs([[1, 3], [2, 4]]) == [1, 2, 3, 4]
    assert ac.auto_pad_from_padding("SAME") == "SAME_UPPER" and ac.padding_from_auto_pad("VALID") == "VALID"
    with pytest.raises(ValueError, match="SAME_LOWER.*no TensorFlow padding"):
        ac.padding_from_auto_pad("SAME_LOWER")
    with pytest.raises(ValueError):
        ac.pads_begin_end([1, 2, 3])


# One case per declared inverse: f(x) -> y, and the inverse takes y back to x (extra arguments as tables pass them).
# A function added to INVERSES without a case here fails the test below.
INVERSE_CASES = {
    "str_equals": (lambda v: ac.str_equals(v, "SAME"), "SAME", lambda y: ac.bool_to_str(y, "SAME", "VALID")),
    "bool_to_str": (lambda v: ac.bool_to_str(v, "SAME", "VALID"), False, lambda y: ac.str_equals(y, "SAME")),
    "spatial": (lambda v: ac.spatial(v, "NHWC"), [1, 5, 6, 1], lambda y: ac.with_layout(y, "NHWC")),
    "with_layout": (lambda v: ac.with_layout(v, "NCHW"), [5, 6], lambda y: ac.spatial(y, "NCHW")),
    "tensor_to_ints": (ac.tensor_to_ints, np.array([3, 1], dtype=np.int64), ac.ints_to_tensor),
    "ints_to_tensor": (ac.ints_to_tensor, [3, 1], ac.tensor_to_ints),
    "tensor_to_floats": (ac.tensor_to_floats, np.array([0.5, -2.0], dtype=np.float32), ac.floats_to_tensor),
    "floats_to_tensor": (ac.floats_to_tensor, [0.5, -2.0], ac.tensor_to_floats),
    "nhwc_to_nchw_axis": (lambda v: ac.nhwc_to_nchw_axis(v, 4), 3, lambda y: ac.nchw_to_nhwc_axis(y, 4)),
    "nchw_to_nhwc_axis": (lambda v: ac.nchw_to_nhwc_axis(v, 4), 1, lambda y: ac.nhwc_to_nchw_axis(y, 4)),
    # a permutation's inverse composes with it to the identity
    "perm_to_nchw": (ac.perm_to_nchw, 4, lambda y: ac.compose_perms(y, ac.perm_to_nhwc(len(y)))),
    "perm_to_nhwc": (ac.perm_to_nhwc, 5, lambda y: ac.compose_perms(y, ac.perm_to_nchw(len(y)))),
    "nhwc_to_nchw_shape": (ac.nhwc_to_nchw_shape, [2, 7, 9, 3], ac.nchw_to_nhwc_shape),
    "nchw_to_nhwc_shape": (ac.nchw_to_nhwc_shape, [2, 3, 7, 9], ac.nhwc_to_nchw_shape),
    "pads_to_pairs": (ac.pads_to_pairs, [1, 2, 3, 4], ac.pads_from_pairs),
    "pads_from_pairs": (ac.pads_from_pairs, [[1, 3], [2, 4]], ac.pads_to_pairs),
    "auto_pad_from_padding": (ac.auto_pad_from_padding, "SAME", ac.padding_from_auto_pad),
    "padding_from_auto_pad": (ac.padding_from_auto_pad, "SAME_UPPER", ac.auto_pad_from_padding),
}


def test_every_declared_inverse_exists_and_undoes():
    lib = ac.library_for(None)
    assert set(ac.INVERSES) - {"convert_dtype"} == set(INVERSE_CASES)  # every declared inverse has a case
    for name, (forward, x, back) in INVERSE_CASES.items():
        inv = ac.INVERSES[name]
        assert name in lib and inv in lib and ac.INVERSES[inv] == name, name
        back_x = back(forward(x))
        expected = list(range(x)) if name.startswith("perm_to") else x
        np.testing.assert_array_equal(np.asarray(back_x), np.asarray(expected), err_msg=name)
        assert np.asarray(back_x).dtype.kind == np.asarray(expected).dtype.kind, name
    # convert_dtype is its own inverse with the type systems swapped (tested with real systems below)
    assert ac.INVERSES["convert_dtype"] == "convert_dtype"


class Upper(TypeSystem):
    name = "upper"

    def canonical_dtype(self, value):
        return {"FLOAT": "float32", "INT64": "int64"}.get(str(value))

    def from_canonical_dtype(self, name):
        return {"float32": "FLOAT", "int64": "INT64"}.get(name)


class Lower(TypeSystem):
    name = "lower"

    def canonical_dtype(self, value):
        return {"f32": "float32", "i64": "int64"}.get(str(value))

    def from_canonical_dtype(self, name):
        return {"float32": "f32", "int64": "i64"}.get(name)


def test_dtype_helpers_go_through_the_type_systems():
    lib = ac.library_for(TypeSystemRegistry([PythonTypeSystem(), Upper(), Lower()]))
    assert lib["convert_dtype"]("FLOAT", "upper", "lower") == "f32"
    assert lib["convert_dtype"]("i64", "lower", "upper") == "INT64"
    with pytest.raises(ValueError, match="does not know the dtype"):
        lib["convert_dtype"]("f16", "lower", "upper")
    assert lib["dtype_name"]("INT64") == "int64"
    assert lib["dtype_name"]("float64") == "float64"
    with pytest.raises(ValueError, match="cannot tell the element type"):
        lib["dtype_name"]("not-a-dtype")


def test_torch_series_tables_agree_with_torch():
    torch = pytest.importorskip("torch")
    mask = ac.cumulative_mask(3, 1)
    assert mask.shape == (3, 3, 1) and mask[:, :, 0].tolist() == [[True, False, False], [True, True, False],
                                                                    [True, True, True]]
    x = torch.randn(4, 6, dtype=torch.float64)
    for n in (10, 11, 4, 1):
        for norm in (None, "backward", "ortho", "forward"):
            got = x.numpy() @ ac.real_irfft_matrix(6, n, norm)
            np.testing.assert_allclose(got, torch.fft.irfft(x, n, norm=norm).numpy(), atol=1e-12)
            got = x.numpy() @ ac.real_irfft_matrix(6, n, norm, hermitian=True)
            np.testing.assert_allclose(got, torch.fft.hfft(x, n, norm=norm).numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="norm"):
        ac.real_irfft_matrix(6, 4, "other")
    t = torch.arange(60).reshape(3, 4, 5)
    idx = ac.flat_roll_indices([3, 4, 5], [1, -2, 3], [0, 2, 0])
    assert np.array_equal(t.flatten().numpy()[idx], torch.roll(t, [1, -2, 3], [0, 2, 0]).numpy())
    # bit for bit, both halves of torch's kernel (a plain float32 product and sum differs in the last bit)
    for start, end, steps in [(0, 10, 101), (-3.3, 7.1, 33), (1.5, 2.25, 1000), (2, 2, 5), (1, 4, 1)]:
        assert np.array_equal(ac.torch_linspace(start, end, steps), torch.linspace(start, end, steps).numpy())


@pytest.mark.parametrize("size,k,s,p,d", [(6, 3, 2, 0, 1), (7, 3, 2, 1, 1), (5, 2, 2, 0, 1), (9, 3, 3, 1, 2),
                                          (4, 1, 3, 0, 1)])
def test_ceil_pool_pads_give_torchs_ceil_mode_size(size, k, s, p, d):
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.max_pool1d(torch.zeros(1, 1, size), k, s, p, d, ceil_mode=True).shape[-1]
    pads = ac.ceil_pool_pads([size], [k], [s], [p], [d])
    if pads is None:  # the end padding ONNX would need reaches the kernel size
        assert (want - 1) * s + d * (k - 1) + 1 - (size + p) >= k
        return
    assert pads[0] == p and (size + pads[0] + pads[1] - d * (k - 1) - 1) // s + 1 == want


@pytest.mark.parametrize("h,w,k,s,p,ceil,counted,divisor", [
    (9, 9, 3, 1, 1, True, False, 2), (7, 8, 3, 2, 1, True, True, None), (7, 8, 3, 2, 1, True, False, None),
    (6, 5, 2, 2, 0, False, True, None), (7, 7, 3, 3, 1, True, True, None), (5, 5, 4, 3, 2, True, False, None),
])
def test_torch_avg_pool_plan_gives_torchs_average_pooling(h, w, k, s, p, ceil, counted, divisor):
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    x = torch.randn(1, 2, h, w, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = f.avg_pool2d(x, k, s, p, ceil, counted, divisor)
    plan = ac.torch_avg_pool_plan([h, w], [k, k], [s, s], [p, p], ceil, counted, divisor)
    pads = plan["pads"]
    # the plan: a zero pad, the average of each whole window, times the kernel size over torch's divisor
    got = f.avg_pool2d(f.pad(x, [pads[1], pads[3], pads[0], pads[2]]), k, s, 0) * torch.from_numpy(plan["scale"])
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    assert ac.torch_avg_pool_plan([2], [3], [1], [0]) is None  # no window fits


def test_the_element_type_of_a_parsed_type_that_names_it():
    """A type system's parsed type may name its element type (torch's ``Float(batch, 8)`` says ``float32``): the
    helpers read it whichever family typed the value, as a rule of another family asks it."""

    class Named:
        dtype = "float32"

        def sizes(self):
            return [None, 8]

    class Port:
        is_input = False

        def __init__(self, dtype):
            self.dtype = dtype

    assert ac.value_elem(Port(Named())) == "float32"
    assert ac.elem_kind(ac.value_elem(Port(Named()))) == "float"
    assert ac.port_shape(Port(Named())) == [None, 8]

    class Unnamed:
        dtype = None

    assert ac.value_elem(Port(Unnamed())) is None and ac.value_elem(Port("float32")) is None
