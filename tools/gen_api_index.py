#!/usr/bin/env python3
"""Generate a grep-friendly API index of an installed DSL package.

    python tools/gen_api_index.py --dsl cutedsl --out build/docs/cutedsl/api-index.txt
    python tools/gen_api_index.py --dsl tirx    --out build/docs/tirx/api-index.txt

Everything comes from introspecting the installed package (importlib +
inspect); no upstream documentation file is read or copied. One entry per
public symbol, entries separated by a line "----":

    ----
    cutlass.cute.arch.shuffle_sync_bfly
    kind: function
    signature: (value, offset, mask=..., ...)
    defined in: cutlass.cute.arch.nvvm_wrappers
    <docstring, at most DOC_LINES lines>

Public symbols of a module are the names in its __all__ plus every other name
not starting with "_" whose object is defined inside the DSL's own packages.
Classes get one entry per public member defined in the class itself.
Namespace objects (such as TIRx's T.cuda and T.ptx) are expanded one or two
levels. Modules that fail to import are skipped and listed at the top of the
file. The output is sorted and free of memory addresses, so two runs against
the same installation give the same file. Prints "N symbols from M modules".
"""
import argparse
import dataclasses
import enum
import functools
import importlib
import inspect
import os
import re
import sys
import warnings

DOC_LINES = 40

# Modules indexed per DSL (a listed module that does not import is skipped and
# reported). Keep these to what a kernel author needs.
DSL_MODULES = {
    "cutedsl": [
        "cutlass",
        "cutlass.cute",
        "cutlass.cute.arch",
        "cutlass.cute.math",
        "cutlass.cute.nvgpu",
        "cutlass.cute.nvgpu.warp",
        "cutlass.cute.nvgpu.warpgroup",
        "cutlass.cute.nvgpu.cpasync",
        "cutlass.cute.nvgpu.tcgen05",
        "cutlass.cute.runtime",
        "cutlass.cute.typing",
        "cutlass.cute.testing",
        "cutlass.utils",
        "cutlass.utils.hopper_helpers",
        "cutlass.pipeline",
        "cutlass.torch",
    ],
    "tirx": [
        "tvm",
        "tvm.script.tirx",
        "tvm.tirx.script.tile",
        "tvm.tirx",
        "tvm.tirx.op",
        "tvm.runtime",
        "tvm.target",
        "tvm.ir",
        "tvm.support.nvcc",
        "tvm_ffi",
    ],
}

# Objects whose __module__ starts with one of these count as the DSL's own.
DSL_ROOTS = {
    "cutedsl": ("cutlass",),
    "tirx": ("tvm", "tvm_ffi"),
}

# Short aliases shown in the header (how the modules are usually imported).
DSL_ALIASES = {
    "cutedsl": ["import cutlass", "import cutlass.cute as cute"],
    "tirx": ["import tvm", "from tvm.script import tirx as T   # T.* = tvm.script.tirx.*"],
}

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")
_HEX = re.compile(r"0x[0-9a-fA-F]{8,}")
_FWD = re.compile(r"ForwardRef\('([^']*)'\)")
_QUAL = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)(?=[\],)\s=|]|$)")


def scrub(text):
    """Remove memory addresses so that the output is deterministic."""
    return _HEX.sub("0x...", _ADDR.sub("", text))


def value_repr(obj):
    """repr() with sets sorted (their iteration order varies between runs)."""
    if isinstance(obj, (set, frozenset)):
        text = "{" + ", ".join(sorted(scrub(repr(x)) for x in obj)) + "}"
    else:
        text = scrub(repr(obj))
    return text[:200]


def own(obj, roots):
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str):
        mod = getattr(type(obj), "__module__", "") or ""
    return any(mod == r or mod.startswith(r + ".") for r in roots)


def doc_of(obj, inherit_ok=False):
    """The object's own docstring (not one inherited from a base), capped."""
    try:
        doc = obj.__doc__ if not inherit_ok else inspect.getdoc(obj)
    except Exception:  # noqa: BLE001 - some proxies raise on attribute access
        return ""
    if not isinstance(doc, str) or not doc.strip():
        return ""
    lines = inspect.cleandoc(doc).splitlines()
    if len(lines) > DOC_LINES:
        more = len(lines) - DOC_LINES
        lines = lines[:DOC_LINES] + [f"[... {more} more docstring lines]"]
    return "\n".join(line.rstrip() for line in lines)


def signature_of(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return None
    except Exception:  # noqa: BLE001
        return None
    # The MLIR builder arguments every DSL op takes (loc=None, ip=None) are noise.
    params = [p for n, p in sig.parameters.items() if not (n in ("loc", "ip") and p.default is None)]
    try:
        sig = sig.replace(parameters=params)
    except ValueError:
        pass
    text = _FWD.sub(r"\1", str(sig))
    text = _QUAL.sub(r"\1", text)  # cutlass.base_dsl.typing.Numeric -> Numeric
    return scrub(text)


def kind_of(obj):
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception"
        if issubclass(obj, enum.Enum):
            return "enum"
        return "class"
    if isinstance(obj, functools.partial):
        return "function (partial)"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if isinstance(obj, property):
        return "property"
    if isinstance(obj, (classmethod, staticmethod)):
        return type(obj).__name__
    if inspect.ismethoddescriptor(obj) or inspect.isdatadescriptor(obj):
        return "descriptor"
    if isinstance(obj, enum.Enum):
        return "enum member"
    if isinstance(obj, (int, float, str, bool, bytes, tuple, frozenset)) or obj is None:
        return "constant"
    if callable(obj):
        return f"callable ({type(obj).__name__})"
    return f"object ({type(obj).__name__})"


def defined_in(obj):
    target = obj
    if isinstance(obj, functools.partial):
        target = obj.func
    mod = getattr(target, "__module__", None)
    if isinstance(mod, str):
        return mod
    return None


class Index:
    def __init__(self, roots):
        self.roots = roots
        self.entries = {}  # name -> text
        self.seen_ns = set()

    def add(self, name, obj, kind=None, extra=None, doc=None):
        if name in self.entries:
            return
        lines = [name, "kind: " + (kind or kind_of(obj))]
        if extra:
            lines.extend(extra)
        else:
            target = obj.func if isinstance(obj, functools.partial) else obj
            if callable(obj) and not inspect.isclass(obj) or inspect.isclass(obj):
                sig = signature_of(obj)
                if sig is not None:
                    lines.append("signature: " + name.rsplit(".", 1)[-1] + sig)
            if kind_of(obj) == "constant" or isinstance(obj, enum.Enum):
                lines.append("value: " + value_repr(obj))
            if inspect.isclass(obj):
                bases = [b for b in obj.__bases__ if b is not object]
                if bases:
                    lines.append("bases: " + ", ".join(f"{b.__module__}.{b.__qualname__}" for b in bases))
            where = defined_in(target)
            if where and not name.startswith(where + "."):
                lines.append("defined in: " + where)
        if doc is None:
            doc = doc_of(obj.func if isinstance(obj, functools.partial) else obj)
            if not doc and not (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj)):
                doc = doc_of(type(obj)) if own(type(obj), self.roots) else ""
        if doc:
            lines.append(doc)
        self.entries[name] = "\n".join(lines)

    # -- modules -----------------------------------------------------------
    def module(self, label, mod):
        self.add(label, mod, kind="module", extra=[f"file: {os.path.basename(getattr(mod, '__file__', '') or '')}"])
        # __all__ (when present) plus every other public name whose object is
        # the DSL's own: several useful helpers are importable but not in __all__.
        listed = getattr(mod, "__all__", None)
        listed = set(listed) if isinstance(listed, (list, tuple)) else set()
        for n in sorted(listed | {n for n in dir(mod) if not n.startswith("_")}):
            try:
                obj = getattr(mod, n)
            except Exception:  # noqa: BLE001
                continue
            if inspect.ismodule(obj):
                continue  # submodules are indexed only when listed
            if n not in listed and not self._public_own(obj):
                continue
            self.symbol(f"{label}.{n}", obj)

    def _public_own(self, obj):
        if isinstance(obj, (int, float, str, bool)) or obj is None:
            return True
        if isinstance(obj, functools.partial):
            return own(obj.func, self.roots)
        return own(obj, self.roots)

    # -- one symbol ---------------------------------------------------------
    def symbol(self, name, obj, depth=0):
        if hasattr(obj, "_cands") and type(obj).__name__ == "_InstrChain":
            self.ptx_family(name, obj)
            return
        self.add(name, obj)
        if inspect.isclass(obj):
            self.members(name, obj)
        elif self._is_namespace(obj) and depth < 2 and id(obj) not in self.seen_ns:
            self.seen_ns.add(id(obj))
            for n in sorted(x for x in dir(obj) if not x.startswith("_")):
                try:
                    sub = getattr(obj, n)
                except Exception:  # noqa: BLE001
                    continue
                if inspect.ismodule(sub):
                    continue
                self.symbol(f"{name}.{n}", sub, depth + 1)

    def _is_namespace(self, obj):
        if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
            return False
        if isinstance(obj, (functools.partial, enum.Enum, int, float, str, tuple, list, dict)):
            return False
        if not own(type(obj), self.roots):
            return False
        if not type(obj).__name__.endswith("Namespace"):
            return False
        return any(not x.startswith("_") for x in dir(obj))

    def members(self, cname, cls):
        for n in sorted(cls.__dict__):
            if n.startswith("_") and n not in ("__call__", "__init__", "__getitem__"):
                continue
            raw = cls.__dict__[n]
            if isinstance(raw, (staticmethod, classmethod)):
                func = raw.__func__
                kind = type(raw).__name__
            elif isinstance(raw, property):
                func = raw.fget
                kind = "property"
            elif isinstance(raw, functools.cached_property):
                func = raw.func
                kind = "property"
            elif inspect.isfunction(raw) or inspect.ismethoddescriptor(raw):
                func = raw
                kind = "method"
            elif isinstance(raw, enum.Enum):
                self.add(f"{cname}.{n}", raw, kind="enum member", extra=[f"value: {value_repr(raw)}"], doc="")
                continue
            elif isinstance(raw, (int, float, str, bool)):
                self.add(f"{cname}.{n}", raw, kind="class constant", extra=[f"value: {value_repr(raw)}"], doc="")
                continue
            else:
                continue
            if n == "__init__" and not doc_of(func):
                continue  # the class entry already shows the constructor signature
            extra = []
            if kind != "property" and func is not None:
                sig = signature_of(func)
                if sig is not None:
                    extra.append(f"signature: {n}{sig}")
            self.add(f"{cname}.{n}", func, kind=kind, extra=extra or ["signature: (property)"], doc=doc_of(func) if func else "")

    # -- TIRx T.ptx instruction families (table-driven, no Python signature) --
    def ptx_family(self, name, chain):
        extra = []
        for entry, _filled in sorted(chain._cands, key=lambda c: getattr(c[0], "name", "")):
            fields = {f.name for f in dataclasses.fields(entry)} if dataclasses.is_dataclass(entry) else set()
            ptx = getattr(entry, "ptx_name", getattr(entry, "name", "?"))
            slots = []
            for s in getattr(entry, "slots", ()):
                ch = "|".join(s.choices)
                slots.append(f"[{s.name}: {ch}]" if getattr(s, "optional", False) else f"{{{s.name}: {ch}}}")
            ops = []
            for o in getattr(entry, "operands", ()):
                tag = o.name
                rw = getattr(o, "rw", "r")
                kind = getattr(o, "kind", "reg")
                if rw != "r":
                    tag += f":{rw}"
                if kind != "reg":
                    tag += f":{kind}"
                ops.append(tag)
            extra.append(f"form: {ptx} " + " ".join(slots))
            extra.append(f"  operands: ({', '.join(ops)})")
            if "cert_arch" in fields and entry.cert_arch:
                extra.append(f"  arch: {entry.cert_arch}")
            check = getattr(entry, "check", None)
            cdoc = doc_of(check) if check else ""
            if cdoc:
                extra.append("  check: " + cdoc.splitlines()[0])
        self.add(name, chain, kind="ptx instruction family", extra=extra,
                 doc="Call as T.ptx.<family>.<modifier>...(operands, pred=None); "
                     "destinations are operands (PTX operand order).")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsl", required=True, choices=sorted(DSL_MODULES))
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # deprecation chatter from re-exported aliases

    index = Index(DSL_ROOTS[args.dsl])
    failed, done = [], []
    for modname in DSL_MODULES[args.dsl]:
        try:
            mod = importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001 - any import failure is reported
            failed.append(f"{modname}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        index.module(modname, mod)
        done.append(modname)

    versions = []
    for dist in {"cutedsl": ["nvidia-cutlass-dsl"], "tirx": ["apache-tvm", "apache-tvm-ffi"]}[args.dsl]:
        try:
            from importlib.metadata import version
            versions.append(f"{dist} {version(dist)}")
        except Exception:  # noqa: BLE001
            versions.append(f"{dist} (version unknown)")

    header = [
        f"API index for {args.dsl}: {', '.join(versions)}",
        "Generated by tools/gen_api_index.py from the installed package (introspection).",
        "One entry per public symbol; entries are separated by a line '----'.",
        "Search: grep -n -A12 'NAME' api-index.txt  (or grep -i 'keyword').",
        "Usual imports: " + "; ".join(DSL_ALIASES[args.dsl]),
        "Modules indexed: " + ", ".join(done),
        "Modules skipped (import failed): " + ("none" if not failed else ""),
    ]
    header += [f"  {f}" for f in failed]
    header.append(f"{len(index.entries)} symbols from {len(done)} modules")

    body = [index.entries[k] for k in sorted(index.entries)]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(header) + "\n")
        for text in body:
            fh.write("----\n" + text + "\n")
    print(f"{len(index.entries)} symbols from {len(done)} modules")
    if failed:
        print("skipped: " + "; ".join(failed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
