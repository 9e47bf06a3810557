from apex_core.errors import UnknownNameError, nearest


def test_nearest_names_come_first():
    known = ["llama-3-1-8b-instruct__rms_norm", "cpu-mini__rms_norm"]
    assert nearest("llama-3-1-8b-instruct__rmsnorm", known)[0] == "llama-3-1-8b-instruct__rms_norm"


def test_unknown_name_message_is_one_line_with_suggestions():
    error = UnknownNameError("task id", "cpu-mini__rmsnorm", ["cpu-mini__rms_norm", "other__x"])
    message = str(error)
    assert "\n" not in message
    assert "did you mean 'cpu-mini__rms_norm'" in message


def test_unknown_name_message_lists_a_short_catalogue_when_nothing_is_close():
    message = str(UnknownNameError("GPU", "zzz", ["gfx950", "sm_90"]))
    assert "known: gfx950, sm_90" in message
