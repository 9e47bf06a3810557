import numpy as np
import torch

from apex_core.grader.isolation.digest import CHUNK, array_digest, input_digests


def test_a_view_and_its_contiguous_copy_have_the_same_digest():
    x = torch.randn(64, 100)
    view = x[:, ::2]
    assert array_digest(view, 123) == array_digest(view.contiguous(), 123)


def test_numpy_and_torch_agree_on_the_same_bits():
    x = torch.randn(8, 9)
    assert array_digest(x, 5).split(":")[1] == array_digest(x.numpy(), 5).split(":")[1]


def test_changing_one_bit_anywhere_changes_the_digest_even_past_the_first_chunk():
    x = torch.randint(0, 255, (CHUNK + 1000,), dtype=torch.uint8)
    reference = array_digest(x, 77)
    for position in (0, 999, CHUNK - 1, CHUNK + 999):
        changed = x.clone()
        changed[position] ^= 1
        assert array_digest(changed, 77) != reference


def test_the_key_changes_the_digest_and_the_shape_and_dtype_are_part_of_it():
    x = torch.arange(12, dtype=torch.int32)
    assert array_digest(x, 1) != array_digest(x, 2)
    assert array_digest(x, 1) != array_digest(x.reshape(3, 4), 1)
    assert array_digest(x, 1) != array_digest(x.view(torch.float32), 1)


def test_declared_outputs_and_plain_values_get_no_digest():
    digests = input_digests([np.ones(3), 1e-5, np.float32(2.0), np.zeros(2)], key=9, skip=(3,))
    assert digests[0] is not None and digests[1:] == [None, None, None]
