"""The GPU's clocks, temperature and power as NVML reports them, recorded at
the start and end of an evaluation's timed section (issue 11: which sources
of run-to-run noise matter). Read through ctypes on libnvidia-ml (no pynvml
in the grader's environment); read only: nothing here changes a setting.

snapshot() returns {"sm_mhz", "mem_mhz", "temp_c", "power_w"} for the GPU
the checker uses, or None where NVML is not there (the CPU test mode)."""
import ctypes

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0

_nvml = None
_handle = None


def _open(torch):
    global _nvml, _handle
    if _handle is not None:
        return _nvml, _handle
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    if lib.nvmlInit_v2() != 0:
        raise OSError("nvmlInit failed")
    try:  # the NVML index of torch's device 0 under CUDA_VISIBLE_DEVICES
        index = torch.cuda._get_nvml_device_index(torch.cuda.current_device())
    except Exception:
        index = torch.cuda.current_device()
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
        raise OSError("nvmlDeviceGetHandleByIndex failed")
    _nvml, _handle = lib, handle
    return lib, handle


def snapshot(device):
    if device != "cuda":
        return None
    try:
        return _read()
    except Exception:  # a diagnosis: never the evaluation's failure
        return None


def _read():
    import torch
    try:
        lib, handle = _open(torch)
    except (OSError, AttributeError):
        return None
    value = ctypes.c_uint()
    state = {}
    for key, call in (("sm_mhz", lambda: lib.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(value))),
                      ("mem_mhz", lambda: lib.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_MEM, ctypes.byref(value))),
                      ("temp_c", lambda: lib.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU,
                                                                      ctypes.byref(value))),
                      ("power_w", lambda: lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(value)))):
        ok = call() == 0
        state[key] = (value.value / 1000.0 if key == "power_w" else int(value.value)) if ok else None
    return state
