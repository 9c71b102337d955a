"""GPU memory shared between the checker and the candidate by file descriptor.

CUDA's virtual memory management API (driver API, through ctypes on
libcuda) allocates device memory that can be exported as a POSIX file
descriptor, sent over the judge's socket (SCM_RIGHTS, as the host arenas
are) and mapped by the other process. Unlike cudaIpc* handles, this works
across PID namespaces, so the confined candidate can map it. Each side maps
the same physical pages at an address of its own; nothing else of either
process's GPU memory is reachable through it.

Used by arena.DeviceArena; arena.Arena (host memory) is the fallback where
this fails, and the only transport on the CPU."""
import ctypes

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1


class VmmError(RuntimeError):
    pass


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp_v1
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc_v1
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_lib = None


def _cuda():
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise VmmError(f"libcuda: {exc}") from exc
        u64, size_t = ctypes.c_ulonglong, ctypes.c_size_t
        sig = {
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size_t), ctypes.POINTER(_Prop), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), size_t, ctypes.POINTER(_Prop), u64],
            "cuMemExportToShareableHandle": [ctypes.c_void_p, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ctypes.c_void_p, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size_t, size_t, u64, u64],
            "cuMemMap": [u64, size_t, size_t, u64, u64],
            "cuMemSetAccess": [u64, size_t, ctypes.POINTER(_AccessDesc), size_t],
            "cuMemUnmap": [u64, size_t],
            "cuMemAddressFree": [u64, size_t],
            "cuMemRelease": [u64],
        }
        lib = _lib
        _lib = None
        for name, args in sig.items():
            fn = getattr(lib, name, None)
            if fn is None:
                raise VmmError(f"libcuda has no {name} (driver too old)")
            fn.argtypes = args
            fn.restype = ctypes.c_int
        _lib = lib
    return _lib


def _check(rc, what):
    if rc != 0:
        raise VmmError(f"{what} failed (CUresult {rc})")


def _prop(device):
    p = _Prop()
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE
    p.location.id = device
    return p


def rounded(size, device):
    """size rounded up to the allocation granularity of device."""
    lib, prop, gran = _cuda(), _prop(device), ctypes.c_size_t(0)
    _check(lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop),
                                             CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity")
    g = max(int(gran.value), 1)
    return (max(int(size), 1) + g - 1) // g * g


class Mapping:
    """Physical GPU memory mapped into this process. The creator exports it
    as a descriptor (export_fd); the other side maps that descriptor. The
    caller's CUDA context must be current (torch's, after torch.cuda.init and
    any device work)."""

    def __init__(self, size, device, fd=None):
        lib = _cuda()
        self.size = rounded(size, device)
        self.device = device
        self.handle = ctypes.c_ulonglong(0)
        self.ptr = ctypes.c_ulonglong(0)
        self.mapped = False
        try:
            if fd is None:
                prop = _prop(device)
                _check(lib.cuMemCreate(ctypes.byref(self.handle), self.size, ctypes.byref(prop), 0), "cuMemCreate")
            else:
                _check(lib.cuMemImportFromShareableHandle(ctypes.byref(self.handle), ctypes.c_void_p(fd),
                                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                       "cuMemImportFromShareableHandle")
            _check(lib.cuMemAddressReserve(ctypes.byref(self.ptr), self.size, 0, 0, 0), "cuMemAddressReserve")
            _check(lib.cuMemMap(self.ptr, self.size, 0, self.handle, 0), "cuMemMap")
            self.mapped = True
            access = _AccessDesc()
            access.location.type = CU_MEM_LOCATION_TYPE_DEVICE
            access.location.id = device
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            _check(lib.cuMemSetAccess(self.ptr, self.size, ctypes.byref(access), 1), "cuMemSetAccess")
        except VmmError:
            self.close()
            raise

    def export_fd(self):
        """A new descriptor for this memory (the caller closes it)."""
        fd = ctypes.c_int(-1)
        _check(_cuda().cuMemExportToShareableHandle(ctypes.byref(fd), self.handle,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
               "cuMemExportToShareableHandle")
        return fd.value

    def close(self):
        lib = _cuda()
        if self.mapped:
            lib.cuMemUnmap(self.ptr, self.size)
            self.mapped = False
        if self.ptr.value:
            lib.cuMemAddressFree(self.ptr, self.size)
            self.ptr = ctypes.c_ulonglong(0)
        if self.handle.value:
            lib.cuMemRelease(self.handle)
            self.handle = ctypes.c_ulonglong(0)


class _Interface:
    """A raw device range as __cuda_array_interface__, for torch.as_tensor."""

    def __init__(self, ptr, size):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


def as_bytes(mapping):
    """A uint8 CUDA tensor over the whole mapping (no copy; keep mapping
    alive while it is used)."""
    import torch
    return torch.as_tensor(_Interface(mapping.ptr.value, mapping.size), device=f"cuda:{mapping.device}")
