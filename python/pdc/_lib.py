"""The C library: finding libpdc.so.0 and declaring the functions of include/pdc.h that the bindings call.

Search order: $PDC_LIBRARY (a path, e.g. build/libpdc.so.0 of a source tree); the library that
`make install` put next to this package (PREFIX/lib/libpdc.so.0 for PREFIX/lib/python3/dist-packages/pdc);
then the dynamic linker's search path (libpdc.so.0).
"""
import ctypes
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_float_p = ctypes.POINTER(ctypes.c_float)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_uint8_p = ctypes.POINTER(ctypes.c_uint8)
c_uint64_p = ctypes.POINTER(ctypes.c_uint64)
c_int32_p = ctypes.POINTER(ctypes.c_int32)

MAX_RANK = 8

PROGRESS_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t)
NOTE_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_char_p)


def _candidates():
    env = os.environ.get("PDC_LIBRARY")
    if env:
        return [env], env
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.normpath(os.path.join(here, "..", "..", "..", "libpdc.so.0"))
    return ([installed] if os.path.exists(installed) else []) + ["libpdc.so.0"], None


def _load():
    names, env = _candidates()
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
    hint = ("$PDC_LIBRARY is set to " + env) if env else \
        "install pdc (make install) or set PDC_LIBRARY to the build tree's library, e.g. PDC_LIBRARY=build/libpdc.so.0"
    raise ImportError("pdc: cannot load libpdc.so.0 (" + "; ".join(errors) + "); " + hint)


lib = _load()

S = ctypes.c_int  # pdc_status
P = ctypes.c_void_p
sz = ctypes.c_size_t

# name: (restype, argtypes)
_DECLS = {
    "pdc_version_number": (ctypes.c_uint32, []),
    "pdc_version_string": (ctypes.c_char_p, []),
    "pdc_status_string": (ctypes.c_char_p, [S]),
    "pdc_string_free": (None, [P]),
    "pdc_context_create": (S, [c_void_pp]),
    "pdc_context_destroy": (None, [P]),
    "pdc_context_last_error": (ctypes.c_char_p, [P]),
    "pdc_context_set_option": (S, [P, ctypes.c_char_p, ctypes.c_char_p]),
    "pdc_context_get_option": (S, [P, ctypes.c_char_p, ctypes.c_char_p, sz]),
    "pdc_context_set_progress_handler": (S, [P, PROGRESS_HANDLER, P]),
    "pdc_context_set_note_handler": (S, [P, NOTE_HANDLER, P]),
    "pdc_context_num_objects": (S, [P, c_size_p]),
    "pdc_attrs_create": (S, [P, c_void_pp]),
    "pdc_attrs_destroy": (None, [P]),
    "pdc_attrs_set_int": (S, [P, ctypes.c_char_p, ctypes.c_int64]),
    "pdc_attrs_set_ints": (S, [P, ctypes.c_char_p, sz, c_int64_p]),
    "pdc_attrs_set_float": (S, [P, ctypes.c_char_p, ctypes.c_float]),
    "pdc_attrs_set_string": (S, [P, ctypes.c_char_p, ctypes.c_char_p]),
    "pdc_model_create": (S, [P, ctypes.c_char_p, c_void_pp]),
    "pdc_model_destroy": (None, [P]),
    "pdc_model_add_input": (S, [P, ctypes.c_char_p, sz, c_int64_p]),
    "pdc_model_set_input_shape": (S, [P, ctypes.c_char_p, sz, c_int64_p]),
    "pdc_model_add_constant": (S, [P, ctypes.c_char_p, sz, c_int64_p, P]),
    "pdc_model_add_layer": (S, [P, ctypes.c_char_p, ctypes.c_char_p, sz, c_char_pp, sz, c_char_pp, P]),
    "pdc_model_mark_output": (S, [P, ctypes.c_char_p]),
    "pdc_model_load": (S, [P, ctypes.c_char_p, c_void_pp]),
    "pdc_model_load_memory": (S, [P, ctypes.c_char_p, sz, c_void_pp]),
    "pdc_model_save": (S, [P, ctypes.c_char_p]),
    "pdc_model_save_text": (S, [P, ctypes.c_char_p, ctypes.c_uint32]),
    "pdc_model_save_onnx": (S, [P, ctypes.c_char_p]),
    "pdc_model_print": (S, [P, ctypes.c_uint32, c_void_pp]),
    "pdc_model_parse": (S, [P, ctypes.c_char_p, sz, c_void_pp]),
    "pdc_model_verify": (S, [P]),
    "pdc_model_num_layers": (S, [P, c_size_p]),
    "pdc_model_layer_stat": (S, [P, sz, ctypes.c_int, c_int64_p]),
    "pdc_model_layer_string": (S, [P, sz, ctypes.c_int, c_char_pp]),
    "pdc_model_num_inputs": (S, [P, c_size_p]),
    "pdc_model_num_outputs": (S, [P, c_size_p]),
    "pdc_model_input_info": (S, [P, sz, c_char_pp, c_size_p, c_int64_p]),
    "pdc_model_output_info": (S, [P, sz, c_char_pp, c_size_p, c_int64_p]),
    "pdc_model_transform": (S, [P, ctypes.c_char_p, P]),
    "pdc_pass_info": (S, [sz, c_char_pp, c_char_pp, c_char_pp]),
    "pdc_prune_project_pattern": (S, [P, c_float_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                      sz, sz, ctypes.c_uint32, c_uint64_p, c_int32_p]),
    "pdc_prune_project_connectivity": (S, [P, c_float_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                           ctypes.c_double, c_uint8_p]),
    "pdc_prune_project_block": (S, [P, c_float_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.c_double, c_uint8_p]),
    "pdc_prune_project_unstructured": (S, [P, c_float_p, sz, ctypes.c_double, c_uint8_p]),
    "pdc_compile": (S, [P, P, ctypes.c_char_p, c_void_pp]),
    "pdc_program_destroy": (None, [P]),
    "pdc_program_target": (ctypes.c_char_p, [P]),
    "pdc_program_num_inputs": (S, [P, c_size_p]),
    "pdc_program_num_outputs": (S, [P, c_size_p]),
    "pdc_program_input_info": (S, [P, sz, c_char_pp, c_size_p, c_int64_p]),
    "pdc_program_output_info": (S, [P, sz, c_char_pp, c_size_p, c_int64_p]),
    "pdc_program_run": (S, [P, sz, P, sz, P]),  # the tensor arrays by address
    "pdc_program_num_threads": (S, [P, c_size_p]),
    "pdc_program_num_layers": (S, [P, c_size_p]),
    "pdc_program_layer_kernel": (S, [P, sz, c_char_pp, c_char_pp]),
    "pdc_tensor_create": (S, [P, sz, c_int64_p, c_void_pp]),
    "pdc_tensor_wrap": (S, [P, sz, c_int64_p, P, c_void_pp]),
    "pdc_tensor_destroy": (None, [P]),
    "pdc_trainer_create": (S, [P, P, c_void_pp]),
    "pdc_trainer_destroy": (None, [P]),
    "pdc_trainer_set_option": (S, [P, ctypes.c_char_p, ctypes.c_char_p]),
    "pdc_trainer_get_option": (S, [P, ctypes.c_char_p, ctypes.c_char_p, sz]),
    "pdc_trainer_init_weights": (S, [P]),
    "pdc_trainer_shuffle": (S, [P, sz, c_size_p]),
    "pdc_trainer_step": (S, [P, P, P, c_float_p]),
    "pdc_trainer_evaluate": (S, [P, P, P, c_float_p, c_float_p]),
    "pdc_trainer_num_weights": (S, [P, c_size_p]),
    "pdc_trainer_weight_info": (S, [P, sz, c_char_pp, c_size_p, c_int64_p, c_size_p, ctypes.POINTER(ctypes.c_int)]),
    "pdc_trainer_get_weights": (S, [P, ctypes.c_char_p, P, sz]),
    "pdc_trainer_set_weights": (S, [P, ctypes.c_char_p, P, sz]),
    "pdc_trainer_prune": (S, [P, ctypes.c_char_p, P]),
    "pdc_trainer_admm_begin": (S, [P, ctypes.c_char_p, P, ctypes.c_float]),
    "pdc_trainer_admm_update": (S, [P, ctypes.POINTER(ctypes.c_double)]),
    "pdc_trainer_admm_end": (S, [P]),
    "pdc_trainer_save": (S, [P, ctypes.c_char_p]),
    "pdc_trainer_load": (S, [P, ctypes.c_char_p]),
    "pdc_trainer_export": (S, [P, c_void_pp]),
}

for _name, (_res, _args) in _DECLS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
